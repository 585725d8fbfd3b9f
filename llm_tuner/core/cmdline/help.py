"""Parse a llama-server binary's `--help` text into a flag catalog."""

from __future__ import annotations

import difflib
import re
from typing import Any

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
    def arity(self) -> int:
        """How many words its value takes: 0 (a switch), 1, or 2 ('START END')."""
        if self.value is None:
            return 0
        return 2 if re.fullmatch(r"[A-Z_]+ [A-Z_]+", self.value) else 1

    @property
    def removed(self) -> str | None:
        """What `--help` says replaces a removed flag, without its leading "use"; None for a flag in use."""
        m = re.match(r"the argument has been removed\.?\s*(?:use\s+)?(.*)", self.help, re.I)
        return m.group(1).strip() if m else None

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

    def suggest(self, name: str) -> str | None:
        """The known spelling closest to a mistyped long flag (`--ctx-sise` -> `--ctx-size`), or None. Short
        names get none: one letter apart they are other flags (`-tbq`, a fork's, is not `-tb` threads-batch;
        `-ctk` is not `-ctv`), so the suggestion would change the meaning."""
        if not name.startswith("--") or len(name) < 4:
            return None
        name = name.split("=", 1)[0]
        pool = [n for n in self._index() if n.startswith("--")]
        hits = difflib.get_close_matches(name, pool, n=1, cutoff=0.8)
        return hits[0] if hits else None

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
    """'-hf, -hfr, --hf-repo <user>/<model>[:quant]' -> (('-hf', '-hfr', '--hf-repo'),
    '<user>/<model>[:quant]').

    Spellings are separated by a comma and whitespace (or just whitespace, as in llama-bench's
    '-ot --override-tensor'); commas inside placeholders ('N0,N1,...') do not separate.
    """
    names: list[str] = []
    value_parts: list[str] = []
    for part in re.split(r",\s+", head.strip()):
        for token in part.split():
            if not value_parts and _FLAG_TOKEN.match(token):
                names.append(token)
            else:
                value_parts.append(token)
    return tuple(names), (" ".join(value_parts) or None)


_FLAG_TOKEN = re.compile(r"^--?[A-Za-z][A-Za-z0-9_.-]*$")  # '.': --fim-qwen-1.5b-default
_GAP = re.compile(r"(?<![,\s])\s{2,}")  # the gap before help text: 2+ spaces not after a comma


def parse_help(text: str) -> FlagCatalog:
    """Parse llama.cpp's `--help` output into a FlagCatalog.

    Format (common/arg.cpp): a flag line starts at column 0 (llama-bench: column 2) with its spellings
    separated by ', ', then an optional value placeholder; the help text follows after a gap of 2+
    spaces (or on the next line when the spellings are long); continuation lines are indented;
    `(env: LLAMA_ARG_X)` and `(default: ...)` appear in the help text; '----- name -----' starts a section.
    """
    lines = text.splitlines()
    flags: list[FlagSpec] = []
    section = ""
    cur: dict[str, Any] | None = None

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
            if raw and cur is not None:  # a line of spaces inside a flag's help (before its "(env: ...)")
                continue
            flush()
            continue
        if not line.startswith(" "):
            m = _SECTION_RE.match(line)
            if m:
                flush()
                section = m.group(1)
                continue
        stripped = line.lstrip(" ")
        if stripped.startswith("-") and len(line) - len(stripped) <= 4:
            flush()
            parts = _GAP.split(stripped, maxsplit=1)
            head, rest = parts[0], (parts[1] if len(parts) > 1 else "")
            names, value = _split_names_and_value(head)
            if value and "(default:" in value:  # '<auto|none|...> (default: auto)' with one space
                value, _, tail = value.partition("(default:")
                value, rest = value.strip() or None, f"(default:{tail} {rest}"
            if names:
                cur = {"names": names, "value": value, "help": [rest.strip()]}
        elif line.endswith(":") and not line.startswith(" "):  # llama-bench: 'test parameters:'
            flush()
            section = line[:-1]
        elif cur is not None:
            cur["help"].append(line.strip())
    flush()
    return FlagCatalog(flags=tuple(flags))
