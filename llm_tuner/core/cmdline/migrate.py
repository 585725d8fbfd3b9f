"""A saved profile moved to another llama-server build: the flags its build knew that the new one renamed or
removed.

A profile keeps the flags the app does not model as written (`extra_args`), so a profile saved with a build
before 2026-04-26 keeps `--draft-max 8`, which a newer llama-server refuses ("the argument has been removed.
use --spec-draft-n-max or --spec-ngram-mod-n-max"). `plan_migration` compares the profile with the new build's
`--help` (and the old build's, when it was kept with the profile version) and proposes one `FlagMove` per such
flag: its replacement(s), read from the new `--help`'s own words, from `core.flags.REMOVED` (flags a build no
longer lists at all: `--mlock` -> `--load-mode mmap+mlock`), from another spelling of the same flag in the old
`--help`, or from the same description under a new name. A move with several candidates is ambiguous and is
never decided here: `apply_migration` applies it only with the user's choice.

The profile's environment is read the same way: llama-server reads a flag from `LLAMA_ARG_<NAME>` too (and a
removed flag's variable makes the new build refuse to start, as the flag does), so each `LLAMA_ARG_*` variable
whose flag the new build renamed or removed is a move of its own (`FlagMove.env`, keyed by the variable's
name), with the same rule for a split; applied, it becomes the replacement's variable (`LLAMA_ARG_MLOCK=1` ->
`LLAMA_ARG_LOAD_MODE=mmap+mlock`), or the replacement's flag on the command line where that flag has none.

Pure: the CLI (`profile migrate`) and the Profile tab's banner (ui/panels/profile_migrate.py) show the moves
and the command before and after.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, replace

from llm_tuner.core import flags
from llm_tuner.core.cmdline.argv import import_command, profile_to_argv
from llm_tuner.core.cmdline.help import FlagCatalog, FlagSpec
from llm_tuner.core.profile import LaunchProfile

_FLAG_RE = re.compile(r"--?[A-Za-z0-9][A-Za-z0-9*_-]*")
_DEFAULT_RE = re.compile(r"\((?:default|env):[^)]*\)")


@dataclass(frozen=True)
class FlagMove:
    """One flag of the profile the new build does not accept, and what it could become."""

    old: str  # the spelling in the profile ('--draft-max')
    tokens: tuple[str, ...]  # the flag and its value as in the profile ('--draft-max', '8')
    choices: tuple[str, ...]  # new spellings that take its value: 1 a rename, several a choice, 0 none
    fix: tuple[
        str, ...
    ] = ()  # a whole replacement (flags.REMOVED: '--load-mode', 'mmap+mlock') instead of choices
    reason: str = ""  # what the new build's --help (or the table) says
    suggested: str | None = (
        None  # the choice the rest of the profile points at (a draft model: --spec-draft-*)
    )
    # an environment variable's move: its name ('LLAMA_ARG_DRAFT_MAX', also `old`) and value; "" for a flag
    env: str = ""
    value: str = ""
    # the new build's variable of each replacement flag that has one (flag, variable)
    new_env: tuple[tuple[str, str], ...] = ()

    @property
    def ambiguous(self) -> bool:
        return not self.fix and len(self.choices) > 1

    @property
    def resolvable(self) -> bool:
        return bool(self.fix) or bool(self.choices)

    def replacement(self, choice: str | None = None) -> tuple[str, ...] | None:
        """The tokens that replace `tokens`: the fix, the one choice, or `choice` (one of `choices`); None
        when ambiguous and not chosen (or no replacement is known)."""
        if self.fix:
            return self.fix
        pick = choice if choice in self.choices else (self.choices[0] if len(self.choices) == 1 else None)
        if pick is None:
            return None
        return (pick, *self.tokens[1:])

    def env_replacement(self, choice: str | None = None) -> tuple[dict[str, str], tuple[str, ...]] | None:
        """An environment move's replacement: the variables to set instead (the replacement flag's own
        variable) or, where that flag has none, the arguments to add to the command line; None as
        `replacement`."""
        new = self.replacement(choice)
        if new is None:
            return None
        var = dict(self.new_env).get(new[0])
        if var is None or len(new) > 2:
            return {}, new
        return {var: new[1] if len(new) == 2 else "1"}, ()

    def _right(self, choice: str | None) -> str | None:
        if not self.env:
            new = self.replacement(choice)
            return None if new is None else " ".join(new)
        found = self.env_replacement(choice)
        if found is None:
            return None
        variables, args = found
        if variables:
            return " ".join(f"{k}={v}" for k, v in variables.items())
        return f"{' '.join(args)} (on the command line: the new build reads no variable for it)"

    def text(self, choice: str | None = None) -> str:
        """'--draft-max 8 -> --spec-draft-n-max 8' or '--draft-max 8 -> one of: ...' in words (an environment
        move: 'LLAMA_ARG_MLOCK=1 (--mlock) -> LLAMA_ARG_LOAD_MODE=mmap+mlock')."""
        left = f"{self.env}={self.value} ({' '.join(self.tokens)})" if self.env else " ".join(self.tokens)
        right = self._right(choice)
        if right is not None:
            return f"{left}  ->  {right}"
        if self.choices:
            return f"{left}  ->  choose: " + " | ".join(
                f"{c} {' '.join(self.tokens[1:])}".strip() for c in self.choices
            )
        return (
            f"{left}  ->  removed, no replacement known ({self.reason or 'not in the new --help'}): dropped"
        )


@dataclass(frozen=True)
class Migration:
    """The moves that bring a profile to a new build (empty: nothing to do)."""

    moves: tuple[FlagMove, ...] = ()
    notes: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.moves)

    @property
    def ambiguous(self) -> tuple[FlagMove, ...]:
        return tuple(m for m in self.moves if m.ambiguous)


def _split_extra(extra: tuple[str, ...], old: FlagCatalog | None, new: FlagCatalog) -> list[tuple[str, ...]]:
    """extra_args as [flag, value...] groups, each flag's arity from the old --help, the new one, or the
    table."""
    out: list[tuple[str, ...]] = []
    i = 0
    while i < len(extra):
        tok = extra[i]
        if not tok.startswith("-") or re.match(r"^-\d", tok):
            out.append((tok,))
            i += 1
            continue
        if tok.startswith("--") and "=" in tok:
            out.append((tok,))
            i += 1
            continue
        spec = (old.lookup(tok) if old else None) or new.lookup(tok)
        removed = flags.REMOVED.get(tok)
        if spec is not None:
            n = spec.arity
        elif removed is not None:
            n = removed.arity
        else:
            n = 1 if i + 1 < len(extra) and not extra[i + 1].startswith("-") else 0
        out.append(tuple(extra[i : i + 1 + n]))
        i += 1 + n
    return out


def _known(catalog: FlagCatalog, name: str) -> bool:
    spec = catalog.lookup(name)
    return spec is not None and spec.removed is None


def _names_in(text: str, new: FlagCatalog) -> tuple[str, ...]:
    """The flags a 'use X or Y' text names that the new build has; `--spec-ngram-*-size-n` expands."""
    out: list[str] = []
    live = [n for f in new.flags if f.removed is None for n in f.names if n.startswith("--")]
    for word in _FLAG_RE.findall(text):
        hits = (
            [n for n in live if fnmatch.fnmatchcase(n, word)]
            if "*" in word
            else ([word] if _known(new, word) else [])
        )
        for h in hits:
            spec = new.lookup(h)
            canon = spec.canonical if spec is not None else h
            if canon not in out:
                out.append(canon)
    return tuple(out)


def _describe(spec: FlagSpec) -> str:
    return " ".join(_DEFAULT_RE.sub("", spec.help).split()).lower()


def _by_description(old_spec: FlagSpec, old: FlagCatalog, new: FlagCatalog) -> tuple[str, ...]:
    """New flags (not in the old --help) whose description is the old flag's: a rename."""
    want = _describe(old_spec)
    if len(want) < 12:
        return ()
    return tuple(
        f.canonical
        for f in new.flags
        if f.removed is None and _describe(f) == want and not any(old.lookup(n) for n in f.names)
    )


def _suggest(profile: LaunchProfile, choices: tuple[str, ...]) -> str | None:
    """The choice the rest of the profile points at: a draft model or a draft-* type -> the --spec-draft-*
    flag, an ngram-* type -> the --spec-ngram-* one; None when nothing points either way."""
    types = " ".join(profile.spec_type)
    drafting = bool(profile.draft_model) or "draft-" in types
    ngram = "ngram" in types
    if drafting == ngram:
        return None
    want = "--spec-draft-" if drafting else "--spec-ngram-"
    hits = [c for c in choices if c.startswith(want)]
    return hits[0] if len(hits) == 1 else None


def _move(
    tok: str, group: tuple[str, ...], profile: LaunchProfile, new: FlagCatalog, old: FlagCatalog | None
) -> FlagMove | str:
    """The move of one flag the new build does not accept (`group`: it and its value), or a note when neither
    build knows it."""
    new_spec = new.lookup(tok)
    hard = flags.REMOVED.get(tok)
    old_spec = old.lookup(tok) if old is not None else None
    if new_spec is not None and new_spec.removed is not None:
        choices = _names_in(new_spec.removed, new)
        reason = f"{tok}: the argument has been removed. use {new_spec.removed}"
        if hard is not None and hard.fix and not choices:
            return FlagMove(tok, group, (), _fix(hard, group), reason)
        return FlagMove(tok, group, choices, (), reason, _suggest(profile, choices))
    if hard is not None:
        if hard.fix and hard.arity == 0:
            return FlagMove(tok, group, (), _fix(hard, group), f"{tok} was removed: use {hard.replacement}")
        choices = _names_in(hard.replacement, new)
        return FlagMove(
            tok, group, choices, (), f"{tok} was removed: use {hard.replacement}", _suggest(profile, choices)
        )
    if old is not None and old_spec is not None:
        renamed = tuple(
            dict.fromkeys(
                spec.canonical
                for n in old_spec.names
                if _known(new, n) and (spec := new.lookup(n)) is not None
            )
        )
        choices = renamed or _by_description(old_spec, old, new)
        how = "another spelling of the same flag" if renamed else "the same description under a new name"
        return FlagMove(
            tok,
            group,
            choices,
            (),
            f"{tok} is not in the new --help; " + (how if choices else "no replacement found"),
            _suggest(profile, choices),
        )
    hint = new.suggest(tok)
    did_you_mean = f" (did you mean {hint}?)" if hint else ""
    return f"{tok} is known to neither build{did_you_mean}: left as it is"


def plan_migration(profile: LaunchProfile, new: FlagCatalog, old: FlagCatalog | None = None) -> Migration:
    """The moves that bring `profile` (saved with the build whose --help gave `old`, None when not kept) to
    the build whose --help gave `new`: one per flag in its extra arguments that `new` does not accept, then
    one per LLAMA_ARG_* variable of its environment whose flag `new` renamed or removed."""
    moves: list[FlagMove] = []
    notes: list[str] = []
    for group in _split_extra(tuple(profile.extra_args), old, new):
        tok = group[0]
        if not tok.startswith("-") or tok.startswith("--") and "=" in tok or _known(new, tok):
            continue
        found = _move(tok, group, profile, new, old)
        if isinstance(found, FlagMove):
            moves.append(found)
        else:
            notes.append(found)
    for name, value in profile.env.items():
        env_move = _env_move(name, value, profile, new, old)
        if env_move is not None:
            moves.append(env_move)
    return Migration(tuple(moves), tuple(notes))


def _env_flag(name: str, value: str, new: FlagCatalog, old: FlagCatalog | None) -> tuple[str, ...] | None:
    """The flag (and value) a LLAMA_ARG_* variable set in the build that read it: from the old --help's
    `(env: ...)`, else the new one's (a removed flag keeps its variable there), else the variable's name
    spelled as a flag when core.flags.REMOVED knows it (`LLAMA_ARG_MLOCK` -> `--mlock`). A switch's variable
    with a false value sets nothing (None), a toggle's sets its negative spelling; `LLAMA_ARG_NO_<NAME>` is
    the negative one. None: not a flag's variable."""
    negative = False
    spec = (old.by_env(name) if old else None) or new.by_env(name)
    if spec is None and name.startswith(flags.ENV_PREFIX + "NO_"):
        base = flags.ENV_PREFIX + name[len(flags.ENV_PREFIX + "NO_") :]
        spec = (old.by_env(base) if old else None) or new.by_env(base)
        negative = spec is not None
    guess = "--" + name[len(flags.ENV_PREFIX) :].lower().replace("_", "-")
    if spec is None:
        hard = flags.REMOVED.get(guess)
        if hard is None:
            return None
        if hard.arity:
            return (guess, value)
        if value.strip().lower() not in flags.FALSE_WORDS:
            return (guess,)
        negative_flag = "--no-" + guess[2:]  # a toggle's variable set false: its negative spelling
        return (negative_flag,) if negative_flag in flags.REMOVED else None
    if spec.arity:  # the spelling the variable is named after, where the flag has it (--draft-max)
        words = value.split()[:2] if spec.arity == 2 else [value]  # one value stays whole (a path, spaces)
        return (guess if guess in spec.names else spec.canonical, *words)
    on = not negative and value.strip().lower() not in flags.FALSE_WORDS
    positive = [n for n in spec.names if n.startswith("--") and not n.startswith("--no-")]
    negatives = [n for n in spec.names if n.startswith("--no-")]
    if on:
        return ((positive or list(spec.names))[0],)
    return tuple(negatives[:1]) or None


def _env_move(
    name: str, value: str, profile: LaunchProfile, new: FlagCatalog, old: FlagCatalog | None
) -> FlagMove | None:
    """The move of one environment variable whose flag the new build renamed or removed, or None (not a
    LLAMA_ARG_* variable, a flag the new build still reads from it, or one neither build knows)."""
    if not name.startswith(flags.ENV_PREFIX):
        return None
    group = _env_flag(name, value, new, old)
    if group is None:
        return None
    tok = group[0]
    if _known(new, tok):
        spec = new.lookup(tok)
        var = spec.env if spec is not None else None
        if var is None or var == name or name == flags.ENV_PREFIX + "NO_" + var[len(flags.ENV_PREFIX) :]:
            return None  # the same variable (a flag without one: llama-server ignores it, as before)
        found: FlagMove | str = FlagMove(tok, group, (tok,), (), f"{tok} is read from {var} in the new build")
    else:
        found = _move(tok, group, profile, new, old)
    if isinstance(found, str):
        return None
    targets = [*found.choices, *found.fix[:1]]
    new_env = tuple(
        (t, spec.env)
        for t in targets
        if (spec := new.lookup(t)) is not None and spec.env and spec.removed is None
    )
    reason = f"the variable {name} sets {' '.join(group)}; " + found.reason
    return replace(found, old=name, env=name, value=value, new_env=new_env, reason=reason)


def _fix(hard: flags.Removed, group: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(hard.fix) + (group[1:] if hard.arity else ())


def apply_migration(
    profile: LaunchProfile, migration: Migration, new: FlagCatalog, choices: Mapping[str, str] | None = None
) -> tuple[LaunchProfile, tuple[FlagMove, ...]]:
    """The migrated profile and the moves left undone (ambiguous without a choice in `choices`, old spelling
    -> new). A move with no replacement at all drops the flag (the new build refuses it). Replacements the app
    models become fields (`--spec-draft-n-max 8` -> draft_n_max=8); the rest stay extra arguments."""
    choices = dict(choices or {})
    by_tokens = {m.tokens: m for m in migration.moves if not m.env}
    kept: list[str] = []
    undone: list[FlagMove] = []
    env, added = _apply_env(profile.env, [m for m in migration.moves if m.env], choices, undone)
    for group in _split_extra(tuple(profile.extra_args), None, new):
        move = by_tokens.get(group)
        if move is None:
            kept += group
            continue
        repl = move.replacement(choices.get(move.old))
        if repl is None and move.resolvable:
            undone.append(move)
            kept += group
        elif repl is not None:
            kept += repl
    lifted = import_command([*kept, *added], catalog=new)
    fields = {
        k: getattr(lifted.profile, k)
        for k in lifted.profile.model_fields_set
        if k not in ("binary", "env", "extra_args", "spellings")
    }
    spellings = {k: v for k, v in profile.spellings.items() if _known(new, v)}
    spellings.update(lifted.profile.spellings)
    migrated = profile.model_copy(
        update={**fields, "extra_args": tuple(lifted.profile.extra_args), "spellings": spellings, "env": env}
    )
    return migrated, tuple(undone)


def _apply_env(
    env: Mapping[str, str], moves: list[FlagMove], choices: Mapping[str, str], undone: list[FlagMove]
) -> tuple[dict[str, str], list[str]]:
    """The environment with its moves applied (a variable the profile already sets is not overwritten) and
    the arguments to add where a replacement has no variable; undone moves are appended to `undone`."""
    out = dict(env)
    added: list[str] = []
    for move in moves:
        found = move.env_replacement(choices.get(move.old))
        if found is None and move.resolvable:
            undone.append(move)
            continue
        out.pop(move.env, None)
        if found is not None:
            variables, args = found
            for k, v in variables.items():
                out.setdefault(k, v)
            added += args
    return out, added


def command_lines(before: LaunchProfile, after: LaunchProfile, new: FlagCatalog) -> tuple[str, str]:
    """The two command lines (as the new build gets them, secrets masked) for the visible diff; each led by
    its LLAMA_ARG_* variables when the migration changed them."""
    a, env_a = profile_to_argv(before, new)
    b, env_b = profile_to_argv(after, new)
    llama_a = {k: v for k, v in (env_a or {}).items() if k.startswith(flags.ENV_PREFIX)}
    llama_b = {k: v for k, v in (env_b or {}).items() if k.startswith(flags.ENV_PREFIX)}
    if llama_a == llama_b:
        return shlex.join(flags.mask_argv(a)), shlex.join(flags.mask_argv(b))
    return _with_env(llama_a, a), _with_env(llama_b, b)


def _with_env(env: Mapping[str, str], argv: list[str]) -> str:
    words = [f"{k}={shlex.quote(v)}" for k, v in flags.mask_env(dict(env)).items()]
    return " ".join([*words, shlex.join(flags.mask_argv(argv))])
