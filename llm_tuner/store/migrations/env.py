"""Alembic environment: runs with the engine handed in by store.db (no ini file, no URL guessing)."""

from __future__ import annotations

from alembic import context

import llm_tuner.store.tables  # noqa: F401  (registers every table on Base.metadata)
from llm_tuner.store.base import Base

engine = context.config.attributes["engine"]
with engine.connect() as connection:
    context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
