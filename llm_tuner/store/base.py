"""The declarative base every table module shares (one MetaData for Alembic)."""

from __future__ import annotations

import os

import psutil
from sqlalchemy import Float, Integer, MetaData, String, text
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def process_started_unix(pid: int) -> float | None:
    """When process `pid` started (None when there is no such process): with the pid, names one process."""
    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.Error, OSError):
        return None


def owner_started_now() -> float | None:
    """This process's start time: what a row it owns records beside its pid."""
    return process_started_unix(os.getpid())


def owner_alive(pid: int | None, started_unix: float | None) -> bool:
    """Whether the process that wrote an owner (pid, start time) still runs. A pid alive under another start time
    was reused by an unrelated process: the owner is gone. Rows written before start times were kept
    (`started_unix` None) count the pid alone."""
    if not pid:
        return False
    now_started = process_started_unix(pid)
    if now_started is None:
        return False
    return started_unix is None or abs(now_started - started_unix) < 1.0


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class ServerTimingsColumns:
    """The server's own per-request `timings` (same key names), shared by session requests and bench repetitions."""

    cache_n: Mapped[int | None] = mapped_column(Integer, nullable=True)
    prompt_n: Mapped[int | None] = mapped_column(Integer, nullable=True)
    prompt_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    prompt_per_second: Mapped[float | None] = mapped_column(Float, nullable=True)
    predicted_n: Mapped[int | None] = mapped_column(Integer, nullable=True)
    predicted_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    predicted_per_second: Mapped[float | None] = mapped_column(Float, nullable=True)
    draft_n: Mapped[int | None] = mapped_column(Integer, nullable=True)
    draft_n_accepted: Mapped[int | None] = mapped_column(Integer, nullable=True)
    ttft_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    latency_ms: Mapped[float | None] = mapped_column(Float, nullable=True)


class IdCounterRow(Base):
    """The highest id ever given per table (and number per group kind): ids are never given twice, even after
    the newest row was deleted (SQLite alone gives max(id) + 1)."""

    __tablename__ = "id_counters"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    last_id: Mapped[int] = mapped_column(Integer)


def claim_number(s: Session, name: str, current_max_sql: str, **params: object) -> int:
    """The next id (or number) under counter `name`: one above both the highest ever given and the highest in use
    (`current_max_sql`, a fixed query of this package), recorded in the same transaction. One statement, so two
    processes writing at once are serialised by SQLite's write lock and never get the same one."""
    return int(s.execute(text(
        f"INSERT INTO id_counters (name, last_id) VALUES (:name, coalesce(({current_max_sql}), 0) + 1) "
        f"ON CONFLICT (name) DO UPDATE SET last_id = max(last_id, coalesce(({current_max_sql}), 0)) + 1 "
        "RETURNING last_id"), {"name": name, **params}).scalar_one())
