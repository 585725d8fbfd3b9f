"""The benchmark's exceptions."""

from __future__ import annotations


class BenchCancelled(Exception):
    """The user cancelled; finished repetitions are kept."""


class BenchError(Exception):
    """A run could not go on; the message says what happened and what to do."""
