"""sessions: every server launch (or attach), its per-request records and a telemetry summary.

Requests are written as they finish (a watched session's writer batches those of a fraction of a second in
one transaction: `add_requests`), so a session killed mid-way (the server or the app) keeps what it saw.
A router's requests keep the model each named (`model`, 0009); older rows and a server of one model have none.
`profile_version_id` is nullable: a raw command line or an attach has none.
Each row names its owner (pid and that process's start time): `close_interrupted()` at the next start
closes rows whose owner is gone (a killed app never wrote their end); a reused pid does not count as alive.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Boolean, Engine, Float, ForeignKey, Integer, String, Text, delete, func, insert, select
from sqlalchemy.orm import Mapped, mapped_column

from llm_tuner.core.session import RequestRecord, SessionInfo
from llm_tuner.store.base import Base, ServerTimingsColumns, owner_alive, process_started_unix
from llm_tuner.store.db import session_scope


class ServerSessionRow(Base):
    __tablename__ = "server_sessions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    mode: Mapped[str] = mapped_column(String(16), default="launch")
    started_unix: Mapped[float] = mapped_column(Float, index=True)
    ended_unix: Mapped[float | None] = mapped_column(Float, nullable=True)
    argv_json: Mapped[str] = mapped_column(Text, default="[]")
    url: Mapped[str | None] = mapped_column(String(512), nullable=True)
    profile_version_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    exit_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    telemetry_json: Mapped[str] = mapped_column(Text, default="{}")
    owner_pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    owner_started_unix: Mapped[float | None] = mapped_column(Float, nullable=True)


class SessionRequestRow(ServerTimingsColumns, Base):
    __tablename__ = "session_requests"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_id: Mapped[int] = mapped_column(ForeignKey("server_sessions.id", ondelete="CASCADE"), index=True)
    time_unix: Mapped[float] = mapped_column(Float)
    slot: Mapped[int | None] = mapped_column(Integer, nullable=True)
    task: Mapped[int | None] = mapped_column(Integer, nullable=True)
    approximate: Mapped[bool] = mapped_column(Boolean, default=False)
    model: Mapped[str | None] = mapped_column(String(512), nullable=True)  # a router's model (0009)


_REQ_FIELDS = ("time_unix", "slot", "task", "cache_n", "prompt_n", "prompt_ms", "prompt_per_second", "predicted_n",
               "predicted_ms", "predicted_per_second", "draft_n", "draft_n_accepted", "ttft_ms", "latency_ms",
               "approximate", "model")


INTERRUPTED = "interrupted (the app was killed or crashed before the session ended)"


def _nan_to_none(v: object) -> object:
    return None if isinstance(v, float) and v != v else v


class SessionRepository:
    """Short units of work on the sessions tables; returns frozen core models."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def begin(self, argv: list[str] | tuple[str, ...], *, started_unix: float, mode: str = "launch",
              url: str | None = None, profile_version_id: int | None = None) -> int:
        with session_scope(self.engine) as s:
            row = ServerSessionRow(mode=mode, started_unix=started_unix, argv_json=json.dumps(list(argv)), url=url,
                                   profile_version_id=profile_version_id, owner_pid=os.getpid(),
                                   owner_started_unix=process_started_unix(os.getpid()))
            s.add(row)
            s.flush()
            return row.id

    def set_url(self, session_id: int, url: str) -> None:
        with session_scope(self.engine) as s:
            row = s.get(ServerSessionRow, session_id)
            if row is not None:
                row.url = url

    def add_request(self, session_id: int, rec: RequestRecord) -> None:
        self.add_requests(session_id, [rec])

    def add_requests(self, session_id: int, recs: Sequence[RequestRecord]) -> None:
        """Several requests in one transaction, one executemany (all or none are kept): a busy server's
        requests cost one commit per batch, not one ORM unit of work each (0.4 ms CPU a request)."""
        if not recs:
            return
        rows = [{"session_id": session_id, **{f: _nan_to_none(getattr(rec, f)) for f in _REQ_FIELDS}}
                for rec in recs]
        with session_scope(self.engine) as s:
            s.execute(insert(SessionRequestRow), rows)

    def end(self, session_id: int, *, ended_unix: float, exit_code: int | None, exit_reason: str | None,
            telemetry_summary: dict[str, Any] | None = None) -> None:
        with session_scope(self.engine) as s:
            row = s.get(ServerSessionRow, session_id)
            if row is None:
                return
            row.ended_unix = ended_unix
            row.exit_code = exit_code
            row.exit_reason = exit_reason
            row.telemetry_json = json.dumps(telemetry_summary or {})

    def close_interrupted(self) -> int:
        """Close sessions left open (no end) whose owning process is gone, as interrupted; return how many.

        Rows of a live owner (this process, a second running instance) are never touched; rows written before
        owners were recorded are left as they are (their owner cannot be told apart from a running one).
        """
        n = 0
        with session_scope(self.engine) as s:
            rows = s.scalars(select(ServerSessionRow).where(ServerSessionRow.ended_unix.is_(None),
                                                            ServerSessionRow.owner_pid.is_not(None)))
            for row in rows:
                if owner_alive(row.owner_pid, row.owner_started_unix):
                    continue
                last = s.scalar(select(func.max(SessionRequestRow.time_unix))
                                .where(SessionRequestRow.session_id == row.id))
                row.ended_unix = max(row.started_unix, last or 0.0)  # the last thing known to have happened
                row.exit_reason = INTERRUPTED
                n += 1
        return n

    def _info(self, row: ServerSessionRow, n: int) -> SessionInfo:
        return SessionInfo(id=row.id, started_unix=row.started_unix, argv=tuple(json.loads(row.argv_json)),
                           mode=row.mode, url=row.url, profile_version_id=row.profile_version_id,
                           ended_unix=row.ended_unix, exit_code=row.exit_code, exit_reason=row.exit_reason,
                           telemetry_summary=json.loads(row.telemetry_json or "{}"), n_requests=n)

    def get(self, session_id: int) -> SessionInfo | None:
        with session_scope(self.engine) as s:
            row = s.get(ServerSessionRow, session_id)
            if row is None:
                return None
            n = s.scalar(select(func.count()).where(SessionRequestRow.session_id == session_id)) or 0
            return self._info(row, n)

    def history(self, limit: int = 100) -> list[SessionInfo]:
        """Newest first, with request counts."""
        with session_scope(self.engine) as s:
            counts = (select(SessionRequestRow.session_id, func.count().label("n"))
                      .group_by(SessionRequestRow.session_id).subquery())
            q = (select(ServerSessionRow, func.coalesce(counts.c.n, 0))
                 .outerjoin(counts, counts.c.session_id == ServerSessionRow.id)
                 .order_by(ServerSessionRow.started_unix.desc()).limit(limit))
            return [self._info(row, n) for row, n in s.execute(q).all()]

    def requests(self, session_id: int) -> list[RequestRecord]:
        with session_scope(self.engine) as s:
            rows = s.scalars(select(SessionRequestRow).where(SessionRequestRow.session_id == session_id)
                             .order_by(SessionRequestRow.id)).all()
            return [RequestRecord(**{f: getattr(r, f) for f in _REQ_FIELDS}) for r in rows]

    def delete(self, session_id: int) -> None:
        with session_scope(self.engine) as s:
            s.execute(delete(SessionRequestRow).where(SessionRequestRow.session_id == session_id))
            s.execute(delete(ServerSessionRow).where(ServerSessionRow.id == session_id))
