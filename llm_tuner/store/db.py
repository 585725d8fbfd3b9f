"""One SQLAlchemy engine per app; SQLite in WAL mode; schema brought to head by Alembic on open.

Use `session_scope(engine)` for a short unit of work. ORM rows never leave store/: repositories
return frozen core models.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def _on_connect(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=5000")
    cur.close()


def alembic_config(engine: Engine) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["engine"] = engine
    return cfg


def open_engine(path: Path | str, *, migrate: bool = True) -> Engine:
    """Open (and create) the SQLite file at `path`, WAL mode, migrated to the newest schema."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(f"sqlite:///{path}", connect_args={"check_same_thread": False, "timeout": 10})
    event.listen(engine, "connect", _on_connect)
    if migrate:
        command.upgrade(alembic_config(engine), "head")
    return engine


_factories: dict[int, sessionmaker] = {}


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """A short-lived Session: commit on success, roll back on error, always closed."""
    factory = _factories.get(id(engine))
    if factory is None:
        factory = _factories[id(engine)] = sessionmaker(engine, expire_on_commit=False)
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
