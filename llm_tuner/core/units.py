"""Sizes and counts as people read them; one place so every view writes a figure the same way."""

from __future__ import annotations

import math
import re

MIB = 1024 * 1024


def format_bytes(n_bytes: float | None) -> str:
    """A file or buffer size with binary units ('512 B', '1.0 KiB', '241.4 MiB', '4.37 GiB'); '—' if
    unknown."""
    if n_bytes is None:
        return "—"
    value = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            if unit == "B":
                return f"{value:.0f} B"
            return f"{value:.2f} {unit}" if unit in ("GiB", "TiB") else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_mib(mib: float | None) -> str:
    """A memory figure given in MiB, as plans show it ('374 MiB', '22.51 GiB'); '—' if unknown."""
    if mib is None or (isinstance(mib, float) and math.isnan(mib)):
        return "—"
    return f"{mib / 1024:.2f} GiB" if abs(mib) >= 1024 else f"{mib:.0f} MiB"


def format_params(n: int | None) -> str:
    """A parameter count ('268 M', '7.62 B'); '' if unknown."""
    if not n:
        return ""
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.0f} M"


# C0/C1 control characters and the bidirectional overrides (they reorder what follows on screen)
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def first_line(exc: BaseException) -> str:
    """An exception's message as one line for the user: its first line, or its type's name if it has none."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def printable(text: object, *, keep_lines: bool = False) -> str:
    """`text` safe to print on a terminal: control characters (ESC starting a sequence that retitles or clears
    the terminal, BEL, CR, newlines, C1, bidi overrides) shown as escapes (`\\x1b`, `\\n`, `\\u202e`), the
    rest as is. `keep_lines`: newlines and tabs stay (a model's reply, printed as text).

    For text output of strings that come from files or servers (a GGUF's `general.name`, a run's label): one
    such string must never act on the user's terminal. JSON output needs none of this (json.dumps escapes
    them).
    """
    def escape(m: re.Match[str]) -> str:
        c = m.group()
        return c if keep_lines and c in "\n\t" else c.encode("unicode_escape").decode("ascii")

    return _UNPRINTABLE.sub(escape, str(text))
