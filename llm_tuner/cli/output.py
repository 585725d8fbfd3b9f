"""What every command shares: its one JSON printer, its user-facing error and the database exit code.

A leaf of the cli package (the commands import it; it imports none of them), so the package has no import
circle.
"""

from __future__ import annotations

import json
import math
import sys

DATABASE_EXIT = 4  # the history database is damaged, from a newer version, or its disk is full (see store.db)


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
