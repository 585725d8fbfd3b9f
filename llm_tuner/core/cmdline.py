"""Command lines: a binary's --help text -> flag catalog; profile <-> llama-server argv/env.

The flag catalog is read from the chosen binary's own `--help`, so forks and newer builds are
understood and removed flags are caught.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict


class FlagSpec(BaseModel):
    """One flag of a binary: every spelling, its value placeholder, env var, default and help text."""

    model_config = ConfigDict(frozen=True)

    names: tuple[str, ...]
    value: str | None = None  # placeholder ('N', 'FNAME', '[on|off|auto]'); None for switches
    env: str | None = None
    default: str | None = None
    help: str = ""
    section: str = ""

    @property
    def canonical(self) -> str:
        """The long spelling where one exists ('--ctx-size'), else the first."""
        longs = [n for n in self.names if n.startswith("--")]
        return longs[0] if longs else self.names[0]


class FlagCatalog(BaseModel):
    model_config = ConfigDict(frozen=True)

    flags: tuple[FlagSpec, ...] = ()

    def lookup(self, name: str) -> FlagSpec | None:
        """Find a flag by any spelling; `_` is accepted for `-` in long flags as llama.cpp does."""
        index = self._index()
        spec = index.get(name)
        if spec is None and name.startswith("--"):
            spec = index.get(name.replace("_", "-"))
        return spec

    def _index(self) -> dict[str, FlagSpec]:
        # Frozen model: cache the name index in the instance dict on first use.
        cached = self.__dict__.get("_idx")
        if cached is None:
            cached = {n: f for f in self.flags for n in f.names}
            self.__dict__["_idx"] = cached
        return cached

    def by_env(self, env: str) -> FlagSpec | None:
        for f in self.flags:
            if f.env == env:
                return f
        return None


_SECTION_RE = re.compile(r"^-{3,}\s*(.+?)\s*-{3,}\s*$")
_ENV_RE = re.compile(r"\(env:\s*([A-Z0-9_]+)\)")


def _default_of(help_text: str) -> str | None:
    """The text inside '(default: ...)', parentheses balanced ('(default: 0, 0 = loaded from model)')."""
    i = help_text.find("default:")
    if i < 0:
        return None
    depth, j = 0, i + len("default:")
    for k in range(j, len(help_text)):
        ch = help_text[k]
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                return help_text[j:k].strip().strip("'\"")
            depth -= 1
    return help_text[j:].strip().split(")")[0].strip("'\"") or None


def _split_names_and_value(head: str) -> tuple[tuple[str, ...], str | None]:
    """'-hf, -hfr, --hf-repo <user>/<model>[:quant]' -> (('-hf', '-hfr', '--hf-repo'), '<user>/<model>[:quant]').

    Spellings are separated by a comma *and* whitespace; commas inside placeholders ('N0,N1,...') are not.
    """
    names: list[str] = []
    value: str | None = None
    for part in re.split(r",\s+", head.strip()):
        tokens = part.split(None, 1)
        if not tokens:
            continue
        names.append(tokens[0])
        if len(tokens) > 1:
            value = tokens[1].strip()
    return tuple(names), value


def _help_column(lines: list[str]) -> int:
    """The column where help text starts: the most common indent of continuation lines (40 in llama.cpp)."""
    counts: dict[int, int] = {}
    for line in lines:
        if line.startswith(" ") and line.strip():
            indent = len(line) - len(line.lstrip(" "))
            counts[indent] = counts.get(indent, 0) + 1
    return max(counts, key=counts.get) if counts else 40


def parse_help(text: str) -> FlagCatalog:
    """Parse llama.cpp's `--help` output into a FlagCatalog.

    Format (common/arg.cpp): a flag line starts at column 0 with its spellings separated by ', ',
    then an optional value placeholder; the help text starts at a fixed column (or on the next line
    when the spellings are longer); continuation lines are indented to that column;
    `(env: LLAMA_ARG_X)` and `(default: ...)` appear in the help text; '----- name -----' starts a section.
    """
    lines = text.splitlines()
    col = _help_column(lines)
    flags: list[FlagSpec] = []
    section = ""
    cur: dict | None = None

    def flush() -> None:
        nonlocal cur
        if cur is None:
            return
        help_text = " ".join(h for h in cur["help"] if h).strip()
        env = _ENV_RE.search(help_text)
        flags.append(FlagSpec(
            names=cur["names"], value=cur["value"], env=env.group(1) if env else None,
            default=_default_of(help_text), help=_ENV_RE.sub("", help_text).strip(), section=section,
        ))
        cur = None

    for raw in lines:
        line = raw.rstrip()
        if not line.strip():
            flush()
            continue
        if not line.startswith(" "):
            m = _SECTION_RE.match(line)
            if m:
                flush()
                section = m.group(1)
                continue
        if line.startswith("-"):
            flush()
            if len(line) > col and line[col - 1] == " " and line[col] != " " and line[:col].endswith("  "):
                head, rest = line[:col], line[col:]
            else:
                head, rest = line, ""
            names, value = _split_names_and_value(head)
            if names and all(n.startswith("-") for n in names):
                cur = {"names": names, "value": value, "help": [rest.strip()]}
        elif cur is not None:
            cur["help"].append(line.strip())
    flush()
    return FlagCatalog(flags=tuple(flags))
