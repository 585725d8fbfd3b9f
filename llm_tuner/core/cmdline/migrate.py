"""A saved profile moved to another llama-server build: the flags its build knew that the new one renamed or
removed.

A profile keeps the flags the app does not model as written (`extra_args`), so a profile saved with a build
before 2026-04-26 keeps `--draft-max 8`, which a newer llama-server refuses ("the argument has been removed.
use --spec-draft-n-max or --spec-ngram-mod-n-max"). `plan_migration` compares the profile with the new build's
`--help` (and the old build's, when it was kept with the profile version) and proposes one `FlagMove` per such
flag: its replacement(s), read from the new `--help`'s own words, from `core.flags.REMOVED` (flags a build no
longer lists at all: `--mlock` -> `--load-mode mmap+mlock`), from another spelling of the same flag in the old
`--help`, or from the same description under a new name. A move with several candidates is ambiguous and is
never decided here: `apply_migration` applies it only with the user's choice. Pure: the CLI (`profile
migrate`) and the Profile tab's banner (ui/panels/profile_migrate.py) show the moves and the command before
and after.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

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

    def text(self, choice: str | None = None) -> str:
        """'--draft-max 8 -> --spec-draft-n-max 8' or '--draft-max 8 -> one of: ...' in words."""
        new = self.replacement(choice)
        left = " ".join(self.tokens)
        if new is not None:
            return f"{left}  ->  {' '.join(new)}"
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


def plan_migration(profile: LaunchProfile, new: FlagCatalog, old: FlagCatalog | None = None) -> Migration:
    """The moves that bring `profile` (saved with the build whose --help gave `old`, None when not kept) to
    the build whose --help gave `new`: one per flag in its extra arguments that `new` does not accept."""
    moves: list[FlagMove] = []
    notes: list[str] = []
    for group in _split_extra(tuple(profile.extra_args), old, new):
        tok = group[0]
        if not tok.startswith("-") or tok.startswith("--") and "=" in tok or _known(new, tok):
            continue
        new_spec = new.lookup(tok)
        hard = flags.REMOVED.get(tok)
        old_spec = old.lookup(tok) if old is not None else None
        if new_spec is not None and new_spec.removed is not None:
            choices = _names_in(new_spec.removed, new)
            reason = f"{tok}: the argument has been removed. use {new_spec.removed}"
            if hard is not None and hard.fix and not choices:
                moves.append(FlagMove(tok, group, (), _fix(hard, group), reason))
                continue
            moves.append(FlagMove(tok, group, choices, (), reason, _suggest(profile, choices)))
        elif hard is not None:
            if hard.fix and hard.arity == 0:
                moves.append(
                    FlagMove(tok, group, (), _fix(hard, group), f"{tok} was removed: use {hard.replacement}")
                )
            else:
                choices = _names_in(hard.replacement, new)
                moves.append(
                    FlagMove(
                        tok,
                        group,
                        choices,
                        (),
                        f"{tok} was removed: use {hard.replacement}",
                        _suggest(profile, choices),
                    )
                )
        elif old_spec is not None:
            renamed = tuple(
                dict.fromkeys(
                    spec.canonical
                    for n in old_spec.names
                    if _known(new, n) and (spec := new.lookup(n)) is not None
                )
            )
            choices = renamed or _by_description(old_spec, old, new)  # type: ignore[arg-type]
            how = "another spelling of the same flag" if renamed else "the same description under a new name"
            moves.append(
                FlagMove(
                    tok,
                    group,
                    choices,
                    (),
                    f"{tok} is not in the new --help; " + (how if choices else "no replacement found"),
                    _suggest(profile, choices),
                )
            )
        else:
            hint = new.suggest(tok)
            notes.append(
                f"{tok} is known to neither build"
                + (f" (did you mean {hint}?)" if hint else "")
                + ": left as it is"
            )
    return Migration(tuple(moves), tuple(notes))


def _fix(hard: flags.Removed, group: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(hard.fix) + (group[1:] if hard.arity else ())


def apply_migration(
    profile: LaunchProfile, migration: Migration, new: FlagCatalog, choices: Mapping[str, str] | None = None
) -> tuple[LaunchProfile, tuple[FlagMove, ...]]:
    """The migrated profile and the moves left undone (ambiguous without a choice in `choices`, old spelling
    -> new). A move with no replacement at all drops the flag (the new build refuses it). Replacements the app
    models become fields (`--spec-draft-n-max 8` -> draft_n_max=8); the rest stay extra arguments."""
    choices = dict(choices or {})
    by_tokens = {m.tokens: m for m in migration.moves}
    kept: list[str] = []
    undone: list[FlagMove] = []
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
    lifted = import_command(kept, catalog=new)
    fields = {
        k: getattr(lifted.profile, k)
        for k in lifted.profile.model_fields_set
        if k not in ("binary", "env", "extra_args", "spellings")
    }
    spellings = {k: v for k, v in profile.spellings.items() if _known(new, v)}
    spellings.update(lifted.profile.spellings)
    migrated = profile.model_copy(
        update={**fields, "extra_args": tuple(lifted.profile.extra_args), "spellings": spellings}
    )
    return migrated, tuple(undone)


def command_lines(before: LaunchProfile, after: LaunchProfile, new: FlagCatalog) -> tuple[str, str]:
    """The two command lines (as the new build gets them, secrets masked) for the visible diff."""
    a, _ = profile_to_argv(before, new)
    b, _ = profile_to_argv(after, new)
    return shlex.join(flags.mask_argv(a)), shlex.join(flags.mask_argv(b))
