"""`llm-tuner estimate ...` (added by its issue)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands."""
