"""Imports every table module so Base.metadata is complete (Alembic and tests rely on it)."""

from llm_tuner.store import model_cache, profiles, runs, sessions, speed, tunes  # noqa: F401
