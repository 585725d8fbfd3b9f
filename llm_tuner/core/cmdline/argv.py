"""Profile <-> llama-server argv/env: write, read, diff, render, validate and fix."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

from pydantic import SecretStr

from llm_tuner.core import flags
from llm_tuner.core.cmdline.fields import (
    _BY_ENV,
    _BY_SPELLING,
    _FA_VALUES,
    _FALSE,
    _FLOAT_RE,
    _INT_RE,
    _NEG_NUMBER,
    _TRUE,
    FIELD_BY_NAME,
    FIELD_FLAGS,
    MASK,
    REMOVED_FLAGS,
    FieldFlag,
    ImportResult,
    RemovedFlag,
    ValidationResult,
)
from llm_tuner.core.cmdline.help import FlagCatalog, FlagSpec
from llm_tuner.core.cmdline.paste import _is_server_program, split_command_text
from llm_tuner.core.profile import ENV_NAME, LaunchProfile, OverrideRule
from llm_tuner.core.rpc import split_endpoints

# -- value formatting ---------------------------------------------------------------------------

def format_number(x: float | int) -> str:
    """Shortest text that reads back to the same number ('40' for 40.0, '0.95')."""
    if isinstance(x, bool):
        return "1" if x else "0"
    if isinstance(x, int):
        return str(x)
    if x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return repr(x)


def field_tokens(profile: LaunchProfile, ff: FieldFlag, known: Callable[[str], bool] | None = None) -> list[str]:
    """The argv tokens for one field (empty when the flag is absent), spelled as `known` (the binary's
    `--help`) allows: the user's own spelling (`profile.spellings`) when the binary knows it, else the long
    spelling, else an alias the binary lists (core.flags.spelling)."""
    field = ff.field
    assert field is not None  # FIELD_FLAGS: each names its LaunchProfile field
    v = getattr(profile, field)
    k = ff.kind
    name = flags.spelling(ff.key, known, prefer=profile.spellings.get(field))
    if k == "switch":
        return [name] if v else []
    if k == "toggle":
        if v is None:
            return []
        return [name] if v else [flags.neg_spelling(ff.key, known) if ff.neg else name]
    if k == "onoff":
        return [] if v is None else [name, "on" if v else "off"]
    if k in ("list", "append"):
        return [name, ",".join(v)] if v else []
    if k in ("floats", "ints"):
        return [name, ",".join(format_number(x) for x in v)] if v else []
    if k == "overrides":
        return [name, ",".join(str(r) for r in v)] if v else []
    if v is None:
        return []
    if k == "secret":
        return [name, v.get_secret_value()]
    if k in ("int", "float"):
        return [name, format_number(v)]
    if k == "layers":
        return [name, v if isinstance(v, str) else str(v)]
    return [name, str(v)]


def profile_to_argv(profile: LaunchProfile, catalog: FlagCatalog | None = None) -> tuple[list[str], dict[str, str]]:
    """The exact llama-server argument list (binary excluded) and extra environment of a profile.

    Modelled flags come first in a fixed order, with their long spelling (or, given the chosen binary's
    catalog, a spelling that binary lists); `extra_args` follow verbatim and in order. The environment is
    `profile.env` as is (LLAMA_ARG_* included): the caller adds it to the child's environment. The
    result is an argument list for exec, never a shell string.
    """
    known = (lambda n: catalog.lookup(n) is not None) if catalog is not None and catalog.flags else None
    argv: list[str] = []
    for ff in FIELD_FLAGS:
        argv += field_tokens(profile, ff, known)
    argv += list(profile.extra_args)
    return argv, dict(profile.env)


def respell(argv: Sequence[str], catalog: FlagCatalog | None) -> list[str]:
    """argv with every flag core.flags knows spelled as the chosen binary's `--help` lists it: a token the
    binary knows stays as written (the user's own spelling), one it lacks becomes a spelling it has (an
    older build or a fork that only knows `--cache-type-k-draft`, a newer one only `--spec-draft-type-k`).
    Values, `--flag=value` tokens and flags the table does not know are left as they are."""
    out = list(argv)
    if catalog is None or not catalog.flags:
        return out

    def known(n: str) -> bool:
        return catalog.lookup(n) is not None

    for i, tok, _value in flags.iter_flags(argv):
        hit = None if "=" in tok or known(tok) else flags.lookup(tok)
        if hit is not None:
            f, positive = hit
            out[i] = flags.spelling(f.key, known, prefer=tok) if positive else (
                flags.neg_spelling(f.key, known) if f.neg else tok)
    return out


def set_flag(argv: list[str], flag: str, value: str | None) -> list[str]:
    """argv with `flag value` replacing any earlier occurrence of the flag, in any spelling the flags table
    knows (so a profile's `--ubatch-size 512` is replaced by `-ub V`); a flag the table does not know (a
    fork's) replaces its exact spelling."""
    hit = flags.lookup(flag)
    if hit is not None:
        rest = flags.without(argv, hit[0].key)
    else:
        rest, i = [], 0
        while i < len(argv):
            if argv[i] == flag:
                i += 2 if i + 1 < len(argv) and flags.looks_like_value(argv[i + 1]) else 1
                continue
            rest.append(argv[i])
            i += 1
    return rest + ([flag] if value is None else [flag, value])


def field_value_text(profile: LaunchProfile, field: str, *, mask_secrets: bool = True) -> str | None:
    """A field as the command line shows it ('8192', 'on', 'q8_0'), None when the flag is absent."""
    ff = FIELD_BY_NAME[field]
    toks = field_tokens(profile, ff)
    if not toks:
        return None
    if ff.kind == "secret" and mask_secrets:
        return MASK
    if ff.kind in ("switch",):
        return "on"
    if ff.kind == "toggle":
        return "on" if getattr(profile, field) else "off"
    return " ".join(toks[1:])


def profile_diff(a: LaunchProfile, b: LaunchProfile) -> list[tuple[str, str | None, str | None]]:
    """Which flags differ between two profiles: (flag, value in a, value in b); None = absent.

    Modelled flags by their long spelling, then environment variables ('env NAME'), extra arguments
    and the binary. Secrets are masked.
    """
    out: list[tuple[str, str | None, str | None]] = []
    for ff in FIELD_FLAGS:
        assert ff.field is not None  # FIELD_FLAGS: each names its LaunchProfile field
        va, vb = field_value_text(a, ff.field), field_value_text(b, ff.field)
        if va != vb or (ff.kind == "secret" and a.api_key != b.api_key):
            out.append((ff.flag, va, vb))
    for name in dict.fromkeys([*a.env, *b.env]):
        va, vb = a.env.get(name), b.env.get(name)
        if va != vb:
            if flags.is_secret_env(name):
                va, vb = (MASK if va is not None else None), (MASK if vb is not None else None)
            out.append((f"env {name}", va, vb))
    if a.extra_args != b.extra_args:
        out.append(("extra arguments", shlex.join(a.extra_args) or None, shlex.join(b.extra_args) or None))
    if a.binary != b.binary:
        out.append(("binary", a.binary, b.binary))
    return out


# -- shell rendering ----------------------------------------------------------------------------

def render_shell(argv: Sequence[str], env: Mapping[str, str] | None = None, binary: str | None = None,
                 mask_secrets: bool = True, *, multiline: bool = False) -> str:
    """A POSIX shell line a user can copy: `VAR=value ... binary args...`, every word quoted as needed.

    Secrets (the value of a secret flag, variables named like *KEY*/*TOKEN*) are masked by core.flags'
    one masking unless `mask_secrets` is False. `multiline` breaks before each flag with backslash-newline.
    """
    env = dict(env or {})
    if mask_secrets:
        argv, env = flags.mask_argv(argv), flags.mask_env(env)
    # a name that is no name (core.profile.bad_env_names) is quoted with its value: one inert word, never code
    words: list[list[str]] = [[f"{name}={shlex.quote(value)}" if ENV_NAME.fullmatch(name)
                               else shlex.quote(f"{name}={value}")] for name, value in env.items()]
    words.append([shlex.quote(binary or "llama-server")])
    for tok in argv:
        q = shlex.quote(tok)
        if tok.startswith("-") and not _NEG_NUMBER.match(tok) or not words:
            words.append([q])
        else:
            words[-1].append(q)
    groups = [" ".join(g) for g in words]
    return (" \\\n  " if multiline else " ").join(groups)


# -- reading argv -------------------------------------------------------------------------------

def _removed_from_catalog(spec: FlagSpec | None) -> str | None:
    return None if spec is None else spec.removed


def _looks_like_value(tok: str) -> bool:
    return not tok.startswith("-") or bool(_NEG_NUMBER.match(tok)) or tok == "-"


def _is_flash_attn(tok: str) -> bool:
    hit = flags.lookup(tok)
    return hit is not None and hit[0].key == "flash_attn"


def _norm(name: str) -> str:
    return name.replace("_", "-") if name.startswith("--") else name


def _lookup_field(name: str, catalog: FlagCatalog | None) -> tuple[FieldFlag, bool] | None:
    hit = _BY_SPELLING.get(_norm(name))
    if hit is None and catalog is not None:
        spec = catalog.lookup(name)
        if spec is not None:
            for n in spec.names:
                if n in _BY_SPELLING:
                    ff, _pos = _BY_SPELLING[n]
                    # a catalog alias of a toggle: positive unless it reads like a negative spelling
                    neg = bool(re.match(r"^--?no-|^-n[a-z]", name)) and ff.kind == "toggle"
                    return ff, not neg
    return hit


class _Parsed:
    def __init__(self) -> None:
        self.values: dict[str, object] = {}
        self.extra: list[str] = []
        self.unknown: list[str] = []
        self.bad_values: list[str] = []
        self.removed: list[RemovedFlag] = []
        self.notes: list[str] = []
        self.spellings: dict[str, str] = {}  # field -> the spelling the user wrote (not the long one)


def parse_field_value(ff: FieldFlag, raw: str, current: object, name: str | None = None) -> object:
    """Convert one flag value; raises ValueError when it is not valid for the field (llama-server refuses it
    too). `name`: the flag as the user wrote it (`-c`), for the message; default the field's long flag."""
    k = ff.kind
    flag = name or ff.flag
    if k == "int":
        if not _INT_RE.match(raw):
            raise ValueError(f"{flag} needs a whole number, got {raw!r}")
        return int(raw)
    if k == "float":
        if not _FLOAT_RE.match(raw):
            raise ValueError(f"{flag} needs a number, got {raw!r}")
        return float(raw)
    if k == "layers":
        if raw in ("auto", "all"):
            return raw
        if not _INT_RE.match(raw):
            raise ValueError(f"{flag} needs a number, 'auto' or 'all', got {raw!r}")
        return int(raw)
    if k == "onoff":
        if raw in _TRUE:
            return True
        if raw in _FALSE:
            return False
        raise ValueError(f"{flag} needs on or off, got {raw!r}")
    if k == "fa" and raw not in _FA_VALUES:
        raise ValueError(f"{flag} takes on|off|auto, got {raw!r}")
    if k == "list":
        if ff.field == "rpc":  # each a worker's host:port (ValueError in plain words)

            return tuple(split_endpoints(raw))
        return tuple(raw.split(","))
    if k == "append":
        return tuple(cast(Iterable[Any], current or ())) + tuple(raw.split(","))
    if k in ("floats", "ints"):
        parts = re.split(r"[,/]", raw)
        rx = _INT_RE if k == "ints" else _FLOAT_RE
        if not all(rx.match(p) for p in parts):
            raise ValueError(f"{ff.flag} needs numbers separated by commas, got {raw!r}")
        return tuple(int(p) if k == "ints" else float(p) for p in parts)
    if k == "overrides":
        rules = []
        for part in raw.split(","):
            if "=" not in part:
                raise ValueError(f"{ff.flag} needs PATTERN=BUFFER rules, got {part!r}")
            pat, buf = part.split("=", 1)
            rules.append(OverrideRule(pattern=pat, buffer=buf))
        return tuple(cast(Iterable[Any], current or ())) + tuple(rules)
    if k == "secret":
        return SecretStr(raw)
    return raw


def _parse_argv(argv: Sequence[str], catalog: FlagCatalog | None, out: _Parsed) -> None:
    i, n = 0, len(argv)
    seen: set[str] = set()
    while i < n:
        tok = argv[i]
        name = _norm(tok)
        spec = catalog.lookup(tok) if catalog is not None else None
        # 1. removed flags: hard-coded ones (absent from --help) and those --help calls removed
        removed_help = _removed_from_catalog(spec)
        hard = REMOVED_FLAGS.get(name)
        if hard is not None and (spec is None or removed_help is not None):
            arity = hard.arity
            toks = list(argv[i:i + 1 + arity])
            fix = hard.fix + tuple(toks[1:]) if hard.fix and arity else hard.fix
            out.removed.append(RemovedFlag(tokens=tuple(toks), flag=tok, replacement=removed_help or hard.replacement,
                                           fix=fix))
            out.extra += toks
            out.notes.append(f"{tok} was removed from llama-server: use {hard.replacement}")
            i += len(toks)
            continue
        if removed_help is not None and spec is not None:  # a catalog's removed flag
            toks = list(argv[i:i + 1 + spec.arity])
            out.removed.append(RemovedFlag(tokens=tuple(toks), flag=tok, replacement=removed_help))
            out.extra += toks
            out.notes.append(f"{tok} was removed from llama-server: use {removed_help}")
            i += len(toks)
            continue
        # 2. modelled flags
        hit = _lookup_field(tok, catalog) if tok.startswith("-") else None
        if hit is not None:
            ff, positive = hit
            field = ff.field
            assert field is not None  # _lookup_field finds FIELD_FLAGS, each with its LaunchProfile field
            if ff.kind == "fa" and (i + 1 >= n or not _looks_like_value(argv[i + 1])):
                # old builds: -fa was a switch. This build needs a value: keep it as written, flag it.
                out.removed.append(RemovedFlag(tokens=(tok,), flag=tok, replacement=f"{flags.spelling('flash_attn')} on",
                                               fix=(flags.spelling("flash_attn"), "on")))
                out.extra.append(tok)
                out.notes.append(f"{tok} without a value is the old switch form: use --flash-attn on")
                i += 1
                continue
            if ff.kind in ("switch", "toggle"):
                out.values[field] = positive if ff.kind == "toggle" else True
                if field in seen:
                    out.notes.append(f"{ff.flag} given more than once: the last one counts, as in llama-server")
                seen.add(field)
                i += 1
                continue
            if i + 1 >= n:
                out.extra.append(tok)
                out.unknown.append(tok)
                out.notes.append(f"{tok} has no value: kept as written")
                i += 1
                continue
            raw = argv[i + 1]
            try:
                value = parse_field_value(ff, raw, out.values.get(field), tok)
            except ValueError as exc:  # a flag it knows with a value it refuses: not an unknown flag
                out.extra += [tok, raw]
                out.bad_values.append(f"{exc}: kept as written")
                i += 2
                continue
            if field in seen and ff.kind not in ("append", "overrides"):
                out.notes.append(f"{ff.flag} given more than once: the last value counts, as in llama-server")
            seen.add(field)
            out.values[field] = value
            spelled = flags.normalize(tok)
            # another long name (an older build's, a fork's):
            if spelled != ff.flag and spelled.startswith("--"):
                # written back as is (short aliases are alike in every build)
                out.spellings[field] = spelled
            else:
                out.spellings.pop(field, None)
            if isinstance(value, str) and ("$" in value or value.startswith("~")):
                out.notes.append(f"{raw!r} is kept as written: llama-server does not expand ~ or $VARIABLES "
                                 "(only an unquoted ~ and $HOME are expanded when a command is pasted); "
                                 "write the full path")
            i += 2
            continue
        # 3. flags the binary knows but the profile does not model: kept verbatim
        if spec is not None:
            toks = list(argv[i:i + 1 + spec.arity])
            out.extra += toks
            if "=" in tok and tok.startswith("--"):
                pass
            i += len(toks)
            continue
        # 4. unknown: a fork's flag (with the value that follows), or a stray word
        toks = [tok]
        if tok.startswith("-") and not _NEG_NUMBER.match(tok) and i + 1 < n and _looks_like_value(argv[i + 1]):
            toks.append(argv[i + 1])
        if tok.startswith("--") and "=" in tok:
            out.notes.append(f"{tok}: llama-server does not accept --flag=value; write the value as its own word")
        out.extra += toks
        out.unknown += toks
        i += len(toks)


def import_command(source: str | Sequence[str], catalog: FlagCatalog | None = None, *,
                   env: Mapping[str, str] | None = None, home: str | None = None) -> ImportResult:
    """Read a pasted command line (text) or an argument list into a LaunchProfile.

    Text may carry `export VAR=...` lines, leading `VAR=value` assignments, a program path
    (`./build/bin/llama-server`), backslash-newline continuations, quotes, pipes and redirections
    (ignored, with a note). It is tokenised with shlex and never run; an unquoted `~` and `$HOME` are
    expanded to `home` (default: this user's home folder) as the shell would have, since llama-server
    itself expands nothing. An argument list is taken as the shell already expanded it, and has no
    program unless its first word names one.

    Every alias maps to one field; a flag the catalog knows but the profile does not model is kept
    in `extra_args` verbatim; a removed flag is kept as written and reported with its replacement;
    unknown tokens (a fork's `-tbq 4`) are kept in order and reported. Without a catalog only the
    modelled flags count as known. `LLAMA_ARG_*` variables stay environment variables. Never raises
    on odd input.
    """
    out = _Parsed()
    env_out: dict[str, str] = dict(env or {})
    binary: str | None = None
    if isinstance(source, str):
        home = home or os.path.expanduser("~")
        split = split_command_text(source, home if home != "~" else None)  # "~": no home folder is known
        binary, argv = split.binary, list(split.argv)
        env_out.update(split.env)
        out.notes += split.notes
    else:
        argv = [str(a) for a in source]
        if argv and not argv[0].startswith("-") and _is_server_program(argv[0]):
            binary, argv = argv[0], argv[1:]
    try:
        _parse_argv(argv, catalog, out)
    except Exception as exc:  # noqa: BLE001 - the importer must never crash on odd input
        out.notes.append(f"could not read the arguments ({exc}); kept them as written")
        out.extra, out.unknown = list(argv), list(argv)
        out.values.clear()

    for name, value in env_out.items():
        if flags.is_llama_env(name):
            spec = catalog.by_env(name) if catalog is not None else None
            ff = _BY_ENV.get(name)
            flag = spec.canonical if spec is not None else (ff.flag if ff else None)
            removed = _removed_from_catalog(spec)
            if removed is not None:
                out.removed.append(RemovedFlag(tokens=(f"{name}={value}",), flag=name, replacement=removed))
                out.notes.append(f"{name} sets a removed flag: {removed}")
            elif flag is None:
                out.notes.append(f"{name} is not a variable this llama-server reads")
            else:
                out.notes.append(f"{name}={'…' if flags.is_secret_env(name) else value} sets {flag} (kept as a variable)")
    kept_binary = None
    if binary is not None:
        if binary.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", binary):
            kept_binary = binary
        # not a docker image
        elif re.match(r"^\.{1,2}[\\/]", binary) or ("/" in binary and ":" not in binary):
            kept_binary = binary
            out.notes.append(f"the program {binary} is a relative path: kept as the profile's program, which "
                             "runs only once you confirm it (choose the file in the Profile tab)")
    values = dict(out.values)
    spellings = {f: t for f, t in out.spellings.items() if f in values}
    profile = LaunchProfile(binary=kept_binary, env=env_out, extra_args=tuple(out.extra), spellings=spellings,
                            **values)
    return ImportResult(profile=profile, unknown=out.unknown, bad_values=out.bad_values, removed=out.removed,
                        notes=out.notes, binary=binary)


def validate(target: LaunchProfile | Sequence[str], catalog: FlagCatalog) -> ValidationResult:
    """Which flags of a profile (or argv) the binary whose catalog is given would refuse.

    Unknown flags are reported as their tokens (flag and the value that follows); removed flags with
    what replaces them. Environment variables of removed flags are reported too.
    """
    if isinstance(target, LaunchProfile):
        argv, env = profile_to_argv(target, catalog)  # spelled as this binary lists its flags
    else:
        argv, env = list(target), {}
    unknown: list[str] = []
    removed: list[RemovedFlag] = []
    bad_values: list[str] = []
    i, n = 0, len(argv)
    while i < n:
        tok = argv[i]
        spec = catalog.lookup(tok)
        removed_help = _removed_from_catalog(spec)
        hard = REMOVED_FLAGS.get(_norm(tok))
        if spec is None and hard is not None:
            gone = tuple(argv[i:i + 1 + hard.arity])
            removed.append(RemovedFlag(tokens=gone, flag=tok, replacement=hard.replacement,
                                       fix=hard.fix + gone[1:] if hard.arity else hard.fix))
            i += len(gone)
            continue
        if spec is not None:
            arity = spec.arity
            if _is_flash_attn(tok) and (i + 1 >= n or not _looks_like_value(argv[i + 1])):
                removed.append(RemovedFlag(tokens=(tok,), flag=tok, replacement=f"{flags.spelling('flash_attn')} on",
                                           fix=(flags.spelling("flash_attn"), "on")))
                i += 1
                continue
            toks = tuple(argv[i:i + 1 + arity])
            if removed_help is not None:
                removed.append(RemovedFlag(tokens=toks, flag=tok, replacement=removed_help))
            elif arity == 1 and len(toks) == 2:
                hit = _lookup_field(tok, catalog)
                if hit is not None and hit[0].kind not in ("switch", "toggle"):
                    try:
                        parse_field_value(hit[0], toks[1], None, tok)
                    except ValueError as exc:  # llama-server exits: "error while handling argument"
                        bad_values.append(str(exc))
            i += len(toks)
            continue
        written = [tok]
        hit = _BY_SPELLING.get(_norm(tok))
        takes_value = (hit is not None and hit[0].kind not in ("switch", "toggle")) or (
            hit is None and tok.startswith("-") and not _NEG_NUMBER.match(tok))
        if takes_value and i + 1 < n and (hit is not None or _looks_like_value(argv[i + 1])):
            written.append(argv[i + 1])
        unknown += written
        i += len(written)
    for name in env:
        spec = catalog.by_env(name)
        rem = _removed_from_catalog(spec)
        if rem is not None:
            removed.append(RemovedFlag(tokens=(f"{name}={env[name]}",), flag=name, replacement=rem))
    return ValidationResult(unknown=unknown, removed=removed, bad_values=bad_values)


def apply_fix(profile: LaunchProfile, removed: RemovedFlag, catalog: FlagCatalog | None = None) -> LaunchProfile:
    """Replace a removed flag's tokens in `extra_args` by its fix (the editor's "Fix" button).

    The fix is parsed like any imported argument, so `--mlock` sets `load_mode`. Returns the profile
    unchanged when the flag has no mechanical fix or its tokens are not in `extra_args`.
    """
    extra = list(profile.extra_args)
    k = len(removed.tokens)
    for i in range(len(extra) - k + 1):
        if tuple(extra[i:i + k]) == removed.tokens:
            if not removed.fix:
                return profile
            del extra[i:i + k]
            fixed = import_command(list(removed.fix), catalog)
            update = {f: getattr(fixed.profile, f) for f in fixed.profile.model_fields_set
                      if f not in ("extra_args", "env", "binary", "spellings")}
            return profile.model_copy(update={**update, "extra_args": tuple(extra + list(fixed.profile.extra_args)),
                                              "spellings": {**profile.spellings, **fixed.profile.spellings}})
    return profile


def effective_profile(profile: LaunchProfile) -> LaunchProfile:
    """The profile as llama-server will see it: LLAMA_ARG_* variables fill the flags argv leaves unset.

    (llama-server applies its variables first and lets flags override them: core.flags.env_to_argv, the
    one place that rule lives.) Used by advice and the memory plan; values that do not parse are ignored.
    """
    argv, env = profile_to_argv(profile)
    from_env = flags.env_to_argv(env, argv)
    if not from_env:
        return profile
    parsed = _Parsed()
    _parse_argv(from_env, None, parsed)
    return profile.model_copy(update=parsed.values) if parsed.values else profile


def describe_env(env: Mapping[str, str], catalog: FlagCatalog | None = None) -> list[tuple[str, str, str | None]]:
    """(name, value, flag it sets or None) for each variable, so LLAMA_ARG_* show the flag they set."""
    out = []
    for name, value in env.items():
        flag = None
        spec = catalog.by_env(name) if catalog is not None else None
        if spec is not None:
            flag = spec.canonical
        elif (known_flag := flags.by_env(name)) is not None:
            flag = known_flag.flag
        out.append((name, value, flag))
    return out
