"""Command lines: a binary's --help text -> flag catalog; profile <-> llama-server argv/env.

The flag catalog is read from the chosen binary's own `--help`, so forks and newer builds are
understood and removed flags are caught.

The package, by seam: `help` (FlagSpec, FlagCatalog, parse_help), `fields` (FieldFlag, FIELD_FLAGS,
lookup tables, secrets, removed flags, result models), `argv` (profile <-> argv/env, import, validate,
fix), `generated` (fields from --help for the flags without a hand-made one), `paste` (the tokenizer for
pasted command text). Import from the package: every public name is here.
"""

from __future__ import annotations

from llm_tuner.core.cmdline.argv import (
    apply_fix,
    describe_env,
    effective_profile,
    field_tokens,
    field_value_text,
    format_number,
    import_command,
    parse_field_value,
    profile_diff,
    profile_to_argv,
    render_shell,
    respell,
    set_flag,
    validate,
)
from llm_tuner.core.cmdline.fields import (
    FIELD_BY_NAME,
    FIELD_FLAGS,
    MASK,
    REMOVED_FLAGS,
    SECRET_ENV_WORDS,
    SECTIONS,
    FieldFlag,
    ImportResult,
    Kind,
    RemovedFlag,
    ValidationResult,
)
from llm_tuner.core.cmdline.generated import (
    FlagFields,
    GeneratedField,
    TextOnly,
    classify,
    help_tooltip,
    read_value,
    unlisted_flags,
    value_problem,
    write_value,
)
from llm_tuner.core.cmdline.help import FlagCatalog, FlagSpec, parse_help
from llm_tuner.core.cmdline.paste import PASTE_LIMIT_CHARS, SplitCommand, posix_split, split_command_text

__all__ = [
    "FIELD_BY_NAME",
    "FIELD_FLAGS",
    "FieldFlag",
    "FlagCatalog",
    "FlagFields",
    "FlagSpec",
    "GeneratedField",
    "ImportResult",
    "Kind",
    "MASK",
    "PASTE_LIMIT_CHARS",
    "REMOVED_FLAGS",
    "RemovedFlag",
    "SECRET_ENV_WORDS",
    "SECTIONS",
    "SplitCommand",
    "TextOnly",
    "ValidationResult",
    "apply_fix",
    "classify",
    "describe_env",
    "effective_profile",
    "field_tokens",
    "field_value_text",
    "format_number",
    "help_tooltip",
    "import_command",
    "parse_field_value",
    "parse_help",
    "posix_split",
    "profile_diff",
    "profile_to_argv",
    "read_value",
    "respell",
    "set_flag",
    "render_shell",
    "split_command_text",
    "unlisted_flags",
    "validate",
    "value_problem",
    "write_value",
]
