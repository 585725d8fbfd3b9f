"""The declarative base every table module shares (one MetaData for Alembic)."""

from __future__ import annotations

import os

import psutil
from sqlalchemy import Float, Integer, MetaData
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

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
