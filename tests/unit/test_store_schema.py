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


def test_the_heads_read_without_alembic_are_alembics_and_an_open_at_head_never_imports_it(tmp_path):
    import subprocess
    import sys

    from alembic.script import ScriptDirectory

    from llm_tuner.store.db import alembic_config, schema_heads

    path = tmp_path / "t.sqlite"
    engine = open_engine(path)
    assert schema_heads() == frozenset(ScriptDirectory.from_config(alembic_config(engine)).get_heads())
    engine.dispose()
    code = ("import sys; from llm_tuner.store.db import open_engine; open_engine(sys.argv[1]).dispose(); "
            "print('alembic' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
