"""The modelled flags as the profile code reads them (views of core.flags), and the import/validate
results."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from llm_tuner.core import flags
from llm_tuner.core.flags import MASK as MASK  # re-exported: the package's names
from llm_tuner.core.flags import SECRET_ENV_WORDS as SECRET_ENV_WORDS
from llm_tuner.core.flags import SECTIONS as SECTIONS
from llm_tuner.core.flags import Kind as Kind
from llm_tuner.core.profile import LaunchProfile

# Every modelled flag is one row of core.flags' table (`Flag`, here also called `FieldFlag`): the profile
# field, its spellings (the first long one is written unless the binary lacks it), how its value is read
# and written, the editor section and its LLAMA_ARG_*. The lookups below are views of that table.

FieldFlag = flags.Flag
FIELD_FLAGS: tuple[FieldFlag, ...] = flags.FIELD_FLAGS
FIELD_BY_NAME: dict[str, FieldFlag] = {f.field: f for f in FIELD_FLAGS if f.field is not None}
# modelled flags only, by every spelling: (flag, positive spelling?)
_BY_SPELLING: dict[str, tuple[FieldFlag, bool]] = {
    **{n: (f, True) for f in FIELD_FLAGS for n in f.names},
    **{n: (f, False) for f in FIELD_FLAGS for n in f.neg}}
_BY_ENV: dict[str, FieldFlag] = {f.env: f for f in FIELD_FLAGS if f.env}
REMOVED_FLAGS = flags.REMOVED
_FA_VALUES = flags.FA_VALUES
_TRUE = flags.TRUE_WORDS
_FALSE = flags.FALSE_WORDS
# ASCII digits only (llama-server reads numbers with std::stoi/stof: "٣" is no number there), no trailing
# newline
_INT_RE = re.compile(r"^[+-]?[0-9]+\Z")
_FLOAT_RE = re.compile(r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\Z")
_ASSIGN_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_NEG_NUMBER = re.compile(r"^-\d")


class RemovedFlag(BaseModel):
    """A flag the binary no longer accepts, kept as written; `replacement` says what to use instead."""

    model_config = ConfigDict(frozen=True)

    tokens: tuple[str, ...]
    flag: str
    replacement: str
    fix: tuple[str, ...] = ()  # argv that replaces `tokens` (a value is appended for `--draft N`)


class ImportResult(BaseModel):
    """What `import_command` understood: the profile, and what it kept without understanding."""

    model_config = ConfigDict(frozen=True)

    profile: LaunchProfile
    unknown: list[str] = []  # tokens not known to the catalog, in order (also kept in profile.extra_args)
    # "-c needs a whole number, got 'abc'": a known flag, a value it refuses (kept too)
    bad_values: list[str] = []
    removed: list[RemovedFlag] = []
    notes: list[str] = []
    binary: str | None = None  # the program as written in the pasted text

    @property
    def problem(self) -> str | None:
        """Why the text is not a llama-server command at all (nothing in it is a model, a flag or a
        LLAMA_ARG_* variable: a wrong paste), or None. Such a text is refused, never saved as an empty
        profile."""
        p = self.profile
        fields = p.model_fields_set - {"extra_args", "env", "binary", "spellings"}
        known_extra = len(p.extra_args) > len(self.unknown)
        if fields or known_extra or self.removed or any(flags.is_llama_env(n) for n in p.env):
            return None
        if not self.unknown:
            return "nothing to import: the text holds no llama-server arguments"
        shown = " ".join(self.unknown[:6]) + (" …" if len(self.unknown) > 6 else "")
        return f"not a llama-server command: no model and no flag it knows (read: {shown})"


class ValidationResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    unknown: list[str] = []
    removed: list[RemovedFlag] = []
    bad_values: list[str] = []  # "-c needs a whole number, got 'abc'": llama-server refuses such a value

    @property
    def ok(self) -> bool:
        return not self.unknown and not self.removed and not self.bad_values
