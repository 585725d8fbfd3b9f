"""One SQLAlchemy engine per app; SQLite in WAL mode; schema brought to head by Alembic on open.

Use `session_scope(engine)` for a short unit of work. ORM rows never leave store/: repositories
return frozen core models.
"""

from __future__ import annotations

import ast
import errno
import functools
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.orm import Session, sessionmaker

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
BUSY_TIMEOUT_S = 5.0  # how long a statement waits for another connection's write lock before it fails


def _on_connect(dbapi_conn: Any, _record: Any, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
    cur.close()


def alembic_config(engine: Engine) -> Config:
    from alembic.config import Config  # noqa: PLC0415 - Alembic (0.9 s to import) only when the schema changes

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["engine"] = engine
    return cfg


class DatabaseError(Exception):
    """The history file cannot be used as it is: damaged, not a database, or written by a newer llm-tuner.

    `str()` is the one message users see (the file, what is wrong, what to do); `kind` is "damaged" or "newer".
    """

    def __init__(self, path: Path, kind: str, detail: str) -> None:
        self.path, self.kind, self.detail = path, kind, detail
        if kind == "newer":
            what = (f"the history database {path} was written by a newer llm-tuner ({detail}); "
                    "this version cannot read it")
            todo = "run the newer llm-tuner, or start with a fresh database (the old file is moved aside, not deleted)"
        else:
            what = f"the history database {path} is damaged or not a database ({detail})"
            todo = "restore it from a backup, or start with a fresh database (the old file is moved aside, not deleted)"
        super().__init__(f"{what}. To fix: {todo}.")


class StorageFullError(Exception):
    """The disk (or quota) holding the history database is full: nothing new can be saved there.

    SQLite rolls the failed write back, so what was saved before stays intact. `str()` is the one line users see
    (the CLI's error line, the window's message): what happened, where, what to do.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        super().__init__(f"the disk holding the history database {path} is full: nothing new could be saved "
                         "(what was saved before is intact). To fix: free space on that disk, or set "
                         "LLM_TUNER_DATA_DIR to a folder on a disk with room, then try again")


_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
_SQLITE_FULL, _SQLITE_IOERR = 13, 10  # SQLite's primary result codes
FULL_BELOW_BYTES = 256 * 1024  # an I/O error with less free space than this is a full disk (a WAL page is 4 KiB)


def disk_full(path: Path, exc: BaseException | None) -> bool:
    """Whether `exc` (raised writing the database at `path`, or its SQLAlchemy wrapper) means its disk is full.

    SQLite says "database or disk is full" when a write comes up short, but "disk I/O error" when it cannot even
    grow its WAL index (-shm) on a full disk: that one counts when the folder has (almost) no space left.
    """
    exc = getattr(exc, "orig", None) or exc
    if isinstance(exc, OSError):
        return exc.errno in _FULL_ERRNOS
    if not isinstance(exc, sqlite3.Error):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF == _SQLITE_FULL or "disk is full" in str(exc):
        return True
    if (code is not None and code & 0xFF == _SQLITE_IOERR) or "disk I/O error" in str(exc):
        try:
            st = os.statvfs(Path(path).parent)
        except OSError:
            return False
        return st.f_bavail * st.f_frsize < FULL_BELOW_BYTES
    return False


def _stamp(path: Path) -> str:
    """Size and mtime of the file and its WAL: what a successful check is remembered by."""
    parts = []
    for p in (path, path.with_name(path.name + "-wal")):
        try:
            st = p.stat()
            parts.append(f"{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            parts.append("-")
    return " ".join(parts)


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".checked")


def _quick_check(path: Path) -> None:
    """`PRAGMA quick_check` (O(pages), no index cross-check) and the header.

    Opened read-only through sqlite3 directly, so a plain-text file is never turned into a WAL database.
    It costs ~9 ms per MiB (benchmarks/results/fault_injection/fault_injection.txt), so a file unchanged since its last
    successful check (size and mtime of it and its WAL, kept in `<name>.checked`) is not read again.
    """
    if not path.exists() or path.stat().st_size == 0:
        return
    stamp = _stamp(path)
    try:
        if _stamp_path(path).read_text() == stamp:
            return
    except OSError:
        pass
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    except sqlite3.Error as exc:
        raise (StorageFullError(path) if disk_full(path, exc) else DatabaseError(path, "damaged", str(exc))) from None
    try:
        rows = con.execute("PRAGMA quick_check").fetchall()
    except sqlite3.DatabaseError as exc:  # a read-only open of a WAL file still writes its -shm
        raise (StorageFullError(path) if disk_full(path, exc) else DatabaseError(path, "damaged", str(exc))) from None
    finally:
        con.close()
    problems = [r[0] for r in rows if r[0] != "ok"]
    if problems:
        more = f" and {len(problems) - 1} more problems" if len(problems) > 1 else ""
        raise DatabaseError(path, "damaged", f"integrity check: {problems[0]}{more}")
    try:
        fd = os.open(_stamp_path(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(stamp)
    except OSError:
        pass  # checked again next time


@functools.cache
def schema_heads() -> frozenset[str] | None:
    """This build's newest schema revisions, read from the migration files' `revision = "..."` and
    `down_revision = ...` lines without importing Alembic. None when a file does not spell them that plainly:
    then Alembic reads them."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for file in (MIGRATIONS_DIR / "versions").glob("*.py"):
        found: dict[str, object] = {}
        for node in ast.parse(file.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                    and node.targets[0].id in ("revision", "down_revision"):
                try:
                    found[node.targets[0].id] = ast.literal_eval(node.value)
                except ValueError:
                    return None
        rev, down = found.get("revision"), found.get("down_revision", None)
        downs = down if isinstance(down, tuple) else () if down is None else (down,)
        if not isinstance(rev, str) or not all(isinstance(d, str) for d in downs):
            return None
        revisions.add(rev)
        parents.update(downs)
    return frozenset(revisions - parents) or None


def _current_revisions(engine: Engine) -> frozenset[str] | None:
    """The file's schema revisions; None for a file Alembic never stamped (new, or not ours yet)."""
    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        return frozenset(r[0] for r in conn.execute(text("SELECT version_num FROM alembic_version")))


def _check_revision(engine: Engine, path: Path, current: frozenset[str] | None) -> None:
    """A revision this build does not know means a newer llm-tuner wrote the file: never "upgrade" it."""
    from alembic.script import ScriptDirectory  # noqa: PLC0415 - Alembic only when the schema is not at head

    if current is None:
        return
    script = ScriptDirectory.from_config(alembic_config(engine))
    known = {rev.revision for rev in script.walk_revisions()}
    unknown = [rev for rev in current if rev not in known]
    if unknown:
        raise DatabaseError(path, "newer", f"schema revision {unknown[0]}, this build knows up to {script.get_current_head()}")


def open_engine(path: Path | str, *, migrate: bool = True, busy_timeout_s: float = BUSY_TIMEOUT_S) -> Engine:
    """Open (and create) the SQLite file at `path`, WAL mode, migrated to the newest schema.
    `busy_timeout_s`: how long a write waits for another connection's lock (tests shorten it).

    Raises:
        DatabaseError: the file is damaged, not a database, or from a newer version; it is left untouched.
    """
    path = Path(path)
    if not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # ours: private (a chosen one exists already)
    _quick_check(path)
    created = not path.exists()
    engine = create_engine(f"sqlite:///{path}", connect_args={"check_same_thread": False, "timeout": 10})
    event.listen(engine, "connect", lambda conn, record: _on_connect(conn, record, busy_timeout_s))

    @event.listens_for(engine, "handle_error")
    def _on_error(context: Any) -> None:  # every statement and commit: a full disk is said in one line, not SQL
        if disk_full(path, context.original_exception):
            raise StorageFullError(path) from context.original_exception

    try:
        current = _current_revisions(engine)
        if current is None or current != schema_heads():  # at this build's head (most opens) Alembic is not loaded
            _check_revision(engine, path, current)
            if migrate:
                from alembic import command  # noqa: PLC0415 - Alembic only when the schema changes

                command.upgrade(alembic_config(engine), "head")
    except (DatabaseError, StorageFullError):
        engine.dispose()
        raise
    except sqlite3.DatabaseError as exc:  # a page the quick check did not reach
        engine.dispose()
        if disk_full(path, exc):
            raise StorageFullError(path) from None
        raise DatabaseError(path, "damaged", str(exc)) from None
    except Exception as exc:
        engine.dispose()
        orig = getattr(exc, "orig", None)
        if disk_full(path, exc):
            raise StorageFullError(path) from None
        if isinstance(orig, sqlite3.DatabaseError) and not isinstance(orig, sqlite3.OperationalError):
            raise DatabaseError(path, "damaged", str(orig)) from None
        raise
    if created:
        _private(path)
    return engine


def _private(path: Path) -> None:
    """Our files are readable by their owner only (a saved profile may hold an API key)."""
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            if p.exists():
                os.chmod(p, 0o600)
        except OSError:
            pass


def move_aside(path: Path | str) -> Path:
    """Rename a database that cannot be used (and its -wal/-shm) to `<name>.unusable-<time>`; return the new path.

    The file is never overwritten or deleted: the user can still restore it or hand it to a newer version.
    """
    path = Path(path)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.unusable-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.unusable-{stamp}-{n}")
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.rename(target.with_name(target.name + suffix))
    path.rename(target)
    try:
        _stamp_path(path).unlink()
    except OSError:
        pass
    return target


_factories: dict[int, sessionmaker[Session]] = {}


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
