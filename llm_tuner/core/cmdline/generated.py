"""Fields generated from a binary's own `--help` for the flags the profile has no hand-made field for.

llama-server lists ~255 flags; the profile models ~80 of them with hand-made fields (core.flags' FIELD_FLAGS:
split, -ot, -ngl and the like need more than one box). Every other flag the chosen binary lists becomes a
`GeneratedField` here, typed from its help text (a switch, an on/off toggle, a number, a choice list, a path
or text), or a `TextOnly` entry with the reason it cannot be a field (it takes two values, it repeats, it
prints and exits, it was removed). `classify` sorts a catalog into the three; `read_value` and `write_value`
read and set one generated flag in the profile's `extra_args`, where such flags live verbatim and in order: a
value is replaced where it stands (the user's spelling kept), a new flag is appended, a cleared one is
removed, and every other token (a fork's flag included) is left as it is, so a pasted command line reads back
the same.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from llm_tuner.core import flags
from llm_tuner.core.cmdline.argv import _lookup_field, parse_field_value
from llm_tuner.core.cmdline.fields import _FLOAT_RE, _INT_RE, _NEG_NUMBER
from llm_tuner.core.cmdline.help import FlagCatalog, FlagSpec

GenKind = Literal["switch", "toggle", "number", "choice", "path", "folder", "text", "secret"]

_NEGATIVE = re.compile(r"^--?no-")
_CHOICE_BRACES = re.compile(r"^[{\[<]([\w.+-]+(?:[,|][\w.+-]+)+)[}\]>]$")  # {a,b} [on|off|auto] <0|1>
_RANGE = re.compile(r"^<(-?\d+)\.\.\.(-?\d+)>$")  # <0...100>
_ALLOWED = re.compile(r"allowed values:\s*([\w.+-]+(?:,\s*[\w.+-]+)+)")
_BULLET = re.compile(r"(?:^|\s)- ([\w.+-]+):")  # '- distribute: spread execution ...'
_NUMBER_WORDS = frozenset({"N", "P", "L", "SEED", "INDEX", "PORT", "SECONDS", "SIMILARITY"})
_PATH_WORDS = frozenset({"FNAME", "FILE", "PATH", "JINJA_TEMPLATE_FILE"})
_LEADING_NUMBER = re.compile(r"\s*([+-]?\d+(?:\.\d+)?)(?![\w.])")
_PRINTS = re.compile(r"^(print|show)\b", re.I)  # --help, --version, --list-devices, --cache-list, ...


class GeneratedField(BaseModel):
    """One flag shown as a generated field: its catalog entry, its type and what it writes."""

    model_config = ConfigDict(frozen=True)

    spec: FlagSpec
    kind: GenKind
    choices: tuple[str, ...] = ()  # a choice list's values (the field stays editable: forks accept more)
    integer: bool = False  # a number that must be whole (its default is)

    @property
    def flag(self) -> str:
        """The spelling a new value is written with: the first long positive one."""
        return _positive_spelling(self.spec)

    @property
    def neg_flag(self) -> str | None:
        """A toggle's negative spelling (`--no-perf`), None for other kinds."""
        return _negative_spelling(self.spec) if self.kind == "toggle" else None

    @property
    def section(self) -> str:
        return self.spec.section or "other"

    def problem(self, text: str) -> str | None:
        """Why `text` is not a value llama-server takes for this flag, or None (empty text: the default)."""
        if not text or self.kind != "number":
            return None
        if self.integer and not _INT_RE.match(text):
            return f"{self.flag} needs a whole number, got {text!r}"
        if not (_INT_RE.match(text) or _FLOAT_RE.match(text)):
            return f"{self.flag} needs a number, got {text!r}"
        return None


class TextOnly(BaseModel):
    """A flag of the binary that no field can edit, and why; it is written in Extra arguments."""

    model_config = ConfigDict(frozen=True)

    spec: FlagSpec
    reason: str


class FlagFields(BaseModel):
    """A catalog sorted: flags with a hand-made field (by profile field), generated fields, text-only ones."""

    model_config = ConfigDict(frozen=True)

    hand_made: tuple[tuple[FlagSpec, str], ...] = ()
    generated: tuple[GeneratedField, ...] = ()
    text_only: tuple[TextOnly, ...] = ()


def _is_negative(name: str) -> bool:
    hit = flags.lookup(name)
    if hit is not None and (name in hit[0].names or name in hit[0].neg):
        return not hit[1]
    return bool(_NEGATIVE.match(name))


def _positive_spelling(spec: FlagSpec) -> str:
    pos = [n for n in spec.names if not _is_negative(n)] or list(spec.names)
    longs = [n for n in pos if n.startswith("--")]
    return (longs or pos)[0]


def _negative_spelling(spec: FlagSpec) -> str | None:
    negs = [n for n in spec.names if _is_negative(n)]
    if not negs:
        return None
    wanted = "--no-" + _positive_spelling(spec).lstrip("-")
    longs = [n for n in negs if n.startswith("--")]
    return wanted if wanted in negs else (longs or negs)[0]


def _hand_made_field(spec: FlagSpec) -> str | None:
    for name in spec.names:
        hit = flags.lookup(name)
        if hit is not None and hit[0].field is not None:
            return hit[0].field
    return None


def _repeats(spec: FlagSpec) -> bool:
    for name in spec.names:
        hit = flags.lookup(name)
        if hit is not None and hit[0].repeats:
            return True
    return False


def _choices(spec: FlagSpec) -> tuple[str, ...]:
    value = spec.value or ""
    m = _CHOICE_BRACES.match(value)
    if m:
        return tuple(re.split(r"[,|]", m.group(1)))
    m = _ALLOWED.search(spec.help)
    if m:
        return tuple(v.strip() for v in m.group(1).split(","))
    if value.isupper() and value not in _NUMBER_WORDS:  # TYPE, MODE: the help's '- word: ...' list
        bullets = tuple(dict.fromkeys(_BULLET.findall(spec.help)))
        if len(bullets) >= 2:
            return bullets
    return ()


def _is_integer(spec: FlagSpec) -> bool:
    """A default written as a whole number ('64', '-1; -1 = disabled'): the flag takes whole numbers only."""
    m = _LEADING_NUMBER.match(spec.default or "")
    return m is not None and "." not in m.group(1)


def _generated(spec: FlagSpec) -> GeneratedField:
    value = spec.value
    if value is None:
        both = _negative_spelling(spec) is not None and any(not _is_negative(n) for n in spec.names)
        return GeneratedField(spec=spec, kind="toggle" if both else "switch")  # a lone --no-x is a switch
    if any(flags.is_secret_flag(n) for n in spec.names):
        return GeneratedField(spec=spec, kind="secret")
    if _RANGE.match(value):
        return GeneratedField(spec=spec, kind="number", integer=True)
    choices = _choices(spec)
    if choices:
        return GeneratedField(spec=spec, kind="choice", choices=choices)
    if value in _NUMBER_WORDS:
        return GeneratedField(spec=spec, kind="number", integer=_is_integer(spec))
    flag = _positive_spelling(spec)
    if value == "DIR" or flag.lstrip("-").split("-")[-1] in ("dir", "path"):  # --models-dir, --slot-save-path
        return GeneratedField(spec=spec, kind="folder")
    if value in _PATH_WORDS:
        return GeneratedField(spec=spec, kind="path")
    return GeneratedField(spec=spec, kind="text")


def _text_only_reason(spec: FlagSpec) -> str | None:
    if spec.removed is not None:
        return f"removed from llama-server: use {spec.removed}"
    if _PRINTS.match(spec.help):
        return "prints information and exits instead of serving: run it in a terminal"
    if spec.arity == 2:
        return f"takes two values ({spec.value}): write it in Extra arguments"
    if _repeats(spec):
        return "each use adds one more value (give it several times): write it in Extra arguments"
    return None


def classify(catalog: FlagCatalog) -> FlagFields:
    """Every flag of the catalog, exactly once: with its hand-made field, as a generated field, or
    text-only."""
    hand: list[tuple[FlagSpec, str]] = []
    gen: list[GeneratedField] = []
    text: list[TextOnly] = []
    for spec in catalog.flags:
        field = _hand_made_field(spec)
        if field is not None:
            hand.append((spec, field))
            continue
        reason = _text_only_reason(spec)
        if reason is not None:
            text.append(TextOnly(spec=spec, reason=reason))
        else:
            gen.append(_generated(spec))
    return FlagFields(hand_made=tuple(hand), generated=tuple(gen), text_only=tuple(text))


# -- the generated flags in extra_args ----------------------------------------------------------------

def _spans(args: Sequence[str], catalog: FlagCatalog) -> list[tuple[int, int, FlagSpec | None]]:
    """(start, end, spec) of each flag in `args`, values counted as the catalog says (a flag it does not
    list takes the next word when that word is a value, as the importer reads a fork's flag)."""
    out: list[tuple[int, int, FlagSpec | None]] = []
    i = 0
    while i < len(args):
        tok = args[i]
        if not tok.startswith("-") or _NEG_NUMBER.match(tok):
            i += 1
            continue
        spec = catalog.lookup(tok)
        if spec is not None:
            n = spec.arity
        else:
            n = 1 if i + 1 < len(args) and flags.looks_like_value(args[i + 1]) else 0
        end = min(len(args), i + 1 + n)
        out.append((i, end, spec))
        i = end
    return out


def _mine(gf: GeneratedField, spec: FlagSpec | None) -> bool:
    return spec is not None and spec.names == gf.spec.names


def read_value(args: Sequence[str], gf: GeneratedField, catalog: FlagCatalog) -> str | None:
    """The generated flag's value as `args` give it (the last one counts, as in llama-server): the value text,
    "on"/"off" for a toggle, "on" for a switch; None when absent."""
    value = None
    for start, end, spec in _spans(args, catalog):
        if not _mine(gf, spec):
            continue
        if gf.kind == "switch":
            value = "on"
        elif gf.kind == "toggle":
            value = "off" if _is_negative(args[start]) else "on"
        else:
            value = args[start + 1] if end > start + 1 else None
    return value


def write_value(args: Sequence[str], gf: GeneratedField, value: str | None,
                catalog: FlagCatalog) -> tuple[str, ...]:
    """`args` with the generated flag set to `value` (None or "": removed; a switch: any value sets it; a
    toggle: "on" or "off"). The first occurrence is replaced where it stands, in the spelling the user wrote
    (a toggle's sign aside); later ones are dropped; a flag not there yet is appended. Nothing else moves."""
    spans = [(s, e) for s, e, spec in _spans(args, catalog) if _mine(gf, spec)]
    if value in (None, ""):
        words: list[str] = []
    elif gf.kind == "switch":
        words = [args[spans[0][0]] if spans else gf.flag]
    elif gf.kind == "toggle":
        on = value == "on"
        written = args[spans[0][0]] if spans else None
        if written is not None and _is_negative(written) != on:
            words = [written]
        else:
            words = [gf.flag if on else (gf.neg_flag or gf.flag)]
    else:
        words = [args[spans[0][0]] if spans else gf.flag, str(value)]
    out = list(args)
    for start, end in reversed(spans[1:]):
        del out[start:end]
    if spans:
        start, end = spans[0]
        out[start:end] = words
    else:
        out += words
    return tuple(out)


def unlisted_flags(args: Sequence[str], catalog: FlagCatalog) -> list[str]:
    """The flags in `args` the binary's `--help` does not list (a fork's), each with its value: kept as
    text."""
    return [" ".join(args[s:e]) for s, e, spec in _spans(args, catalog) if spec is None]


def help_tooltip(spec: FlagSpec) -> str:
    """A flag's `--help` entry as a tooltip: its spellings and value, the help text, its variable."""
    lines = [", ".join(spec.names) + (f" {spec.value}" if spec.value else ""), "", spec.help]
    if spec.env:
        lines.append(f"env: {spec.env}")
    return "\n".join(lines)


def value_problem(flag: str, value: str, catalog: FlagCatalog | None) -> str | None:
    """Why the llama-server of `catalog` would refuse `flag value`, in plain words naming both; None when it
    takes it or this cannot tell (text, a path, a list, a switch). The checks of the profile's fields (a
    hand-made field's parse), the generated fields' numbers, and a choice the binary's `--help` lists: a value
    a sweep or a tune would otherwise start a server for only to see it refused."""
    spec = catalog.lookup(flag) if catalog is not None else None
    hit = _lookup_field(flag, catalog)
    if hit is None and spec is None:
        if catalog is not None and catalog.flags and flags.lookup(flag) is None:
            return f"{flag}: this llama-server has no such flag (its --help does not list it)"
        return None
    if hit is not None:
        ff = hit[0]
        if ff.kind in ("switch", "toggle", "list", "append", "overrides", "secret"):
            return None
        try:
            parse_field_value(ff, value, None, flag)
        except ValueError as exc:
            return str(exc)
    if _INT_RE.match(value) and not -2**31 <= int(value) < 2**31 and "seed" not in flag:  # --seed: std::stoul
        return f"{flag} {value} is beyond the numbers llama-server reads ({-2**31} to {2**31 - 1})"
    if spec is None or spec.arity != 1:
        return None
    gf = _generated(spec)
    if gf.kind == "number" and hit is None:
        return gf.problem(value)
    placeholder = spec.value or ""
    listed = "," in placeholder and not placeholder.startswith(("{", "[", "<"))  # --spec-type a,b: a list
    default = (spec.default or "").strip("'\" ")  # a '- word:' list may leave out the default ('auto')
    if gf.kind == "choice" and value not in gf.choices and value != default and not listed:
        return f"{flag} takes {', '.join(gf.choices)}, got {value!r}"
    return None
