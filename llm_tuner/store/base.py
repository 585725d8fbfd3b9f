"""The declarative base every table module shares (one MetaData for Alembic)."""

from __future__ import annotations

from sqlalchemy import Float, Integer, MetaData
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


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
