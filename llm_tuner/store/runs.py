"""runs: tables and repository (filled in by its issue)."""

from __future__ import annotations
