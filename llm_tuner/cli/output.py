"""What every command shares: its one JSON printer, its user-facing error, the database exit code and the help
formatter.

A leaf of the cli package (the commands import it; it imports none of them), so the package has no import
circle.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap

DATABASE_EXIT = 4  # the history database is damaged, from a newer version, or its disk is full (see store.db)


class HelpFormatter(argparse.HelpFormatter):
    """Help wrapped at spaces only, so a flag (`--models-max`, `llm-tuner`) is never broken at its hyphen.
    Every parser of the CLI uses it (cli.build_parser), or RawDescription for a description with its own
    lines."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False, break_long_words=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.fill(" ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False, break_long_words=False)


class RawDescription(HelpFormatter):
    """A description (a module's docstring: usage blocks, paragraphs) printed as written; option help as
    HelpFormatter wraps it."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "".join(indent + line for line in text.splitlines(keepends=True))


class CliError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


def emit_json(obj) -> None:
    """Print one JSON document (or line) and flush, so pipes see it at once.

    Always JSON: a float that is not finite (a lying server's figure, a rate over zero seconds) is written as
    null, never as Python's `Infinity`/`NaN`, which JSON readers refuse."""
    sys.stdout.write(json.dumps(_finite(obj), default=str, allow_nan=False) + "\n")
    sys.stdout.flush()


def _finite(obj):
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj
