"""The Alembic migrations build exactly the schema the table modules declare, in WAL mode."""

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text

from llm_tuner.store.base import Base
from llm_tuner.store.db import open_engine


def test_migrations_match_tables_and_wal(tmp_path):
    engine = open_engine(tmp_path / "t.sqlite")
    import llm_tuner.store.tables  # noqa: F401

    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        assert diff == [], f"tables and migrations disagree: {diff}"
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"


def test_reopening_an_existing_database_keeps_it(tmp_path):
    path = tmp_path / "t.sqlite"
    open_engine(path).dispose()
    engine = open_engine(path)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() is not None
