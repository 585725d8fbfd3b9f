"""Benchmark history: runs, their repetitions and sweep groups (tables + repository).

Every repetition is written in its own short transaction as soon as it finishes, so a crash or a kill
mid-run keeps what was measured; `mark_interrupted()` (called when the app opens the history) turns
runs left "running" by a dead process into "incomplete". Rows never leave this module: the
repository returns frozen core models (core/bench_spec.py).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Engine,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    delete,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.orm import Mapped, Session, mapped_column

from llm_tuner.core.bench_spec import (
    BenchRun,
    BenchSpec,
    DevicePeak,
    LlamaBenchResult,
    Repetition,
    RunGroup,
)
from llm_tuner.core.build import BuildStamp
from llm_tuner.store.base import Base, ServerTimingsColumns, claim_number, owner_alive, owner_started_now
from llm_tuner.store.db import session_scope


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class BenchGroupRow(Base):
    __tablename__ = "bench_groups"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(32), default="sweep")
    param: Mapped[str] = mapped_column(String(200), default="")
    values_json: Mapped[list[Any]] = mapped_column(JSON, default=list)
    label: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=_now)
    number: Mapped[int | None] = mapped_column(Integer, nullable=True)  # among its kind: tune 1, sweep 3
    # A tune (kind "tune", store/tunes.py): its whole spec (every knob, the objective), status and result.
    spec_json: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    knobs_json: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)
    result_json: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    status: Mapped[str | None] = mapped_column(String(16), nullable=True)
    owner_pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    owner_started_unix: Mapped[float | None] = mapped_column(Float, nullable=True)  # with the pid: one process


def number_group(s: Session, row: BenchGroupRow) -> None:
    """A new group's id (never a deleted group's) and its number among the groups of its kind."""
    row.id = claim_number(s, "bench_groups", "SELECT max(id) FROM bench_groups")
    row.number = claim_number(s, f"bench_groups:{row.kind}", "SELECT max(number) FROM bench_groups WHERE kind = :kind",
                              kind=row.kind)


class BenchRunRow(Base):
    __tablename__ = "bench_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    group_id: Mapped[int | None] = mapped_column(ForeignKey("bench_groups.id", ondelete="SET NULL"),
                                                 nullable=True, index=True)
    label: Mapped[str] = mapped_column(String(200), default="")
    # Points at store/profiles' immutable profile version; no FK so runs survive a profile's deletion.
    profile_version_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    server_argv: Mapped[list[Any]] = mapped_column(JSON, default=list)
    server_env: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    attached_url: Mapped[str | None] = mapped_column(String(500), nullable=True)
    model_path: Mapped[str | None] = mapped_column(Text, nullable=True, index=True)
    model_size: Mapped[int | None] = mapped_column(Integer, nullable=True)
    model_mtime: Mapped[float | None] = mapped_column(Float, nullable=True)
    model_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    binary_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    binary_version: Mapped[str | None] = mapped_column(String(100), nullable=True)
    binary_backends: Mapped[list[Any]] = mapped_column(JSON, default=list)
    build_key: Mapped[str | None] = mapped_column(String(128), nullable=True, index=True)
    build_json: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    notes: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)
    devices: Mapped[list[Any]] = mapped_column(JSON, default=list)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    status: Mapped[str] = mapped_column(String(16), default="running", index=True)
    started_at: Mapped[datetime] = mapped_column(DateTime, default=_now, index=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    sweep_value: Mapped[str | None] = mapped_column(String(200), nullable=True)
    memory_predicted_mib: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    memory_measured_mib: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    llama_bench: Mapped[list[Any]] = mapped_column(JSON, default=list)
    llama_bench_skipped: Mapped[list[Any]] = mapped_column(JSON, default=list)
    llama_bench_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    owner_pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    owner_started_unix: Mapped[float | None] = mapped_column(Float, nullable=True)  # with the pid: one process


class BenchRepRow(ServerTimingsColumns, Base):
    __tablename__ = "bench_reps"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("bench_runs.id", ondelete="CASCADE"), index=True)
    seq: Mapped[int] = mapped_column(Integer, default=0)
    prompt_tokens: Mapped[int] = mapped_column(Integer)
    depth: Mapped[int] = mapped_column(Integer, default=0)
    rep: Mapped[int] = mapped_column(Integer, default=0)
    client: Mapped[int] = mapped_column(Integer, default=0)
    draft_steps: Mapped[int | None] = mapped_column(Integer, nullable=True)
    draft_accepted_per_pos: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)
    peaks: Mapped[list[Any]] = mapped_column(JSON, default=list)
    other_cpu_pct: Mapped[float | None] = mapped_column(Float, nullable=True)
    started_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    ok: Mapped[bool] = mapped_column(Boolean, default=True)


_RUN_FIELDS = ("group_id", "label", "profile_version_id", "attached_url", "model_path", "model_size",
               "model_mtime", "model_hash", "binary_path", "binary_version", "status", "started_at",
               "finished_at", "error", "sweep_value", "memory_predicted_mib", "memory_measured_mib",
               "llama_bench_error")
_REP_FIELDS = ("seq", "prompt_tokens", "depth", "rep", "client", "cache_n", "prompt_n", "prompt_ms",
               "prompt_per_second", "predicted_n", "predicted_ms", "predicted_per_second", "draft_n",
               "draft_n_accepted", "draft_steps", "ttft_ms", "latency_ms", "other_cpu_pct", "started_at", "error")


def _rep_model(row: BenchRepRow) -> Repetition:
    data = {f: getattr(row, f) for f in _REP_FIELDS}
    return Repetition(run_id=row.run_id, peaks=tuple(DevicePeak(**p) for p in row.peaks or []),
                      draft_accepted_per_pos=tuple(row.draft_accepted_per_pos or ()), **data)


def _run_model(row: BenchRunRow, reps: list[BenchRepRow]) -> BenchRun:
    data = {f: getattr(row, f) for f in _RUN_FIELDS}
    return BenchRun(
        id=row.id, server_argv=tuple(row.server_argv or []), server_env=dict(row.server_env or {}),
        binary_backends=tuple(row.binary_backends or []), devices=list(row.devices or []),
        spec=BenchSpec(**(row.spec or {})),
        llama_bench=tuple(LlamaBenchResult(**r) for r in row.llama_bench or []),
        llama_bench_skipped=tuple(row.llama_bench_skipped or []),
        build=BuildStamp(**row.build_json) if row.build_json else None, notes=tuple(row.notes or ()),
        reps=tuple(_rep_model(r) for r in sorted(reps, key=lambda r: r.seq)), **data)


class RunDeleted(Exception):
    """The run being measured was deleted (another window, `llm-tuner runs delete`): nothing more is stored in it."""

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        super().__init__(f"run {run_id} was deleted while it was being measured (by another window or "
                         "`llm-tuner runs delete`); its repetitions are gone")


class RunRepository:
    """Benchmark runs in the app's SQLite file. Thread-safe: one short session per call."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._add_columns_of_early_0004()

    def _add_columns_of_early_0004(self) -> None:
        """Databases migrated by the first, shorter 0004 (development builds of 2026-11-29) lack
        `bench_reps.other_cpu_pct`; add it so their history keeps working."""
        try:
            cols = {c["name"] for c in inspect(self.engine).get_columns("bench_reps")}
        except Exception:  # noqa: BLE001 - no table yet (not migrated): nothing to repair
            return
        if cols and "other_cpu_pct" not in cols:
            with self.engine.begin() as conn:
                conn.execute(text("ALTER TABLE bench_reps ADD COLUMN other_cpu_pct FLOAT"))

    # -- writing --------------------------------------------------------------------------------
    def create_run(self, run: BenchRun) -> int:
        """Insert a run in state "running" (or the given state); returns its id."""
        with session_scope(self.engine) as s:
            row = BenchRunRow(
                server_argv=list(run.server_argv), server_env=dict(run.server_env),
                binary_backends=list(run.binary_backends), devices=list(run.devices),
                spec=run.spec.model_dump(mode="json"), owner_pid=os.getpid(), owner_started_unix=owner_started_now(),
                llama_bench=[r.model_dump(mode="json") for r in run.llama_bench],
                llama_bench_skipped=list(run.llama_bench_skipped),
                build_key=run.build.key if run.build else None,
                build_json=run.build.model_dump(mode="json") if run.build else None, notes=list(run.notes) or None,
                **{f: getattr(run, f) for f in _RUN_FIELDS})
            if row.started_at is None:
                row.started_at = _now()
            row.id = claim_number(s, "bench_runs", "SELECT max(id) FROM bench_runs")  # never a deleted run's id
            s.add(row)
            s.flush()
            return row.id

    def add_rep(self, run_id: int, rep: Repetition) -> None:
        """Store one finished repetition at once (its own transaction).

        Raises:
            RunDeleted: the run is gone (deleted by another process while it was measured).
        """
        with session_scope(self.engine) as s:
            if s.get(BenchRunRow, run_id) is None:
                raise RunDeleted(run_id)
            s.add(BenchRepRow(run_id=run_id, peaks=[p.model_dump(mode="json") for p in rep.peaks],
                              draft_accepted_per_pos=list(rep.draft_accepted_per_pos) or None, ok=rep.error is None, **{f: getattr(rep, f) for f in _REP_FIELDS}))

    def finish_run(self, run_id: int, status: str, error: str | None = None, **extra: Any) -> None:
        """Set the final status (complete/incomplete/failed/cancelled) and any late facts
        (memory_measured_mib, llama_bench results, ...)."""
        with session_scope(self.engine) as s:
            row = s.get(BenchRunRow, run_id)
            if row is None:
                return
            row.status = status
            row.error = error
            row.finished_at = _now()
            row.owner_pid = row.owner_started_unix = None
            for key, value in extra.items():
                if key == "llama_bench":
                    value = [r.model_dump(mode="json") for r in value]
                elif key in ("llama_bench_skipped", "notes"):
                    value = list(value)
                setattr(row, key, value)

    def update_run(self, run_id: int, **fields: Any) -> None:
        with session_scope(self.engine) as s:
            row = s.get(BenchRunRow, run_id)
            if row is not None:
                for key, value in fields.items():
                    if key == "llama_bench":
                        value = [r.model_dump(mode="json") for r in value]
                    setattr(row, key, value)

    def create_group(self, group: RunGroup) -> int:
        with session_scope(self.engine) as s:
            row = BenchGroupRow(kind=group.kind, param=group.param, values_json=list(group.values),
                                label=group.label, created_at=group.created_at or _now())
            number_group(s, row)
            s.add(row)
            s.flush()
            return row.id

    def delete_run(self, run_id: int) -> None:
        with session_scope(self.engine) as s:
            s.execute(delete(BenchRepRow).where(BenchRepRow.run_id == run_id))
            s.execute(delete(BenchRunRow).where(BenchRunRow.id == run_id))

    def mark_interrupted(self) -> int:
        """Runs still "running" whose process is gone become "incomplete" (finished reps are kept)."""
        n = 0
        with session_scope(self.engine) as s:
            for row in s.scalars(select(BenchRunRow).where(BenchRunRow.status == "running")):
                if not owner_alive(row.owner_pid, row.owner_started_unix):
                    row.status = "incomplete"
                    row.error = row.error or "the run was interrupted (app closed or crashed); finished repetitions kept"
                    row.finished_at = row.finished_at or _now()
                    row.owner_pid = row.owner_started_unix = None
                    n += 1
        return n

    # -- reading --------------------------------------------------------------------------------
    def get_run(self, run_id: int) -> BenchRun | None:
        with session_scope(self.engine) as s:
            row = s.get(BenchRunRow, run_id)
            if row is None:
                return None
            reps = list(s.scalars(select(BenchRepRow).where(BenchRepRow.run_id == run_id)))
            return _run_model(row, reps)

    def list_runs(self, *, model: str | None = None, label: str | None = None, binary: str | None = None,
                  since: datetime | None = None, group_id: int | None = None, build: str | None = None,
                  with_reps: bool = True, limit: int = 1000) -> list[BenchRun]:
        """Runs newest first, filtered by model path/name substring, profile label, binary version, date, build
        (its key, `BuildStamp.key`; "" for runs that recorded none)."""
        with session_scope(self.engine) as s:
            q = select(BenchRunRow).order_by(BenchRunRow.started_at.desc(), BenchRunRow.id.desc())
            if model:
                q = q.where(BenchRunRow.model_path.contains(model))
            if label:
                q = q.where(BenchRunRow.label == label)
            if binary:
                q = q.where(BenchRunRow.binary_version.contains(binary))
            if since:
                q = q.where(BenchRunRow.started_at >= since)
            if group_id is not None:
                q = q.where(BenchRunRow.group_id == group_id)
            if build is not None:
                q = q.where(BenchRunRow.build_key == build if build else BenchRunRow.build_key.is_(None))
            rows = list(s.scalars(q.limit(limit)))
            reps: dict[int, list[BenchRepRow]] = {r.id: [] for r in rows}
            if with_reps and rows:
                for rep in s.scalars(select(BenchRepRow).where(BenchRepRow.run_id.in_(list(reps)))):
                    reps[rep.run_id].append(rep)
            return [_run_model(r, reps[r.id]) for r in rows]

    # What the History table shows of each repetition (speeds per prompt length, their count), and whether the
    # machine was busy (Compare learns how much starts differ from quiet runs only: core.bench_starts).
    OVERVIEW_REP_FIELDS = ("seq", "prompt_tokens", "prompt_n", "prompt_per_second", "predicted_n",
                           "predicted_per_second", "error", "other_cpu_pct")

    def list_overview(self, *, model: str | None = None, label: str | None = None, binary: str | None = None,
                      since: datetime | None = None, build: str | None = None, limit: int = 1000) -> list[BenchRun]:
        """Runs as `list_runs` filters them, with light repetitions: only OVERVIEW_REP_FIELDS are read (no
        peaks, no TTFT), enough for the History's medians and counts. A History refresh during a run stays
        cheap; open a run with `get_run` for its whole record."""
        runs = self.list_runs(model=model, label=label, binary=binary, since=since, build=build, with_reps=False,
                              limit=limit)
        if not runs:
            return runs
        cols = [getattr(BenchRepRow, f) for f in self.OVERVIEW_REP_FIELDS]
        reps: dict[int | None, list[Repetition]] = {r.id: [] for r in runs}  # stored runs: ids are there
        with session_scope(self.engine) as s:
            for row in s.execute(select(BenchRepRow.run_id, *cols).where(BenchRepRow.run_id.in_(list(reps)))):
                run_id, *values = row
                reps[run_id].append(Repetition(run_id=run_id, **dict(zip(self.OVERVIEW_REP_FIELDS, values,
                                                                         strict=True))))
        return [r.model_copy(update={"reps": tuple(sorted(reps[r.id], key=lambda x: x.seq))}) for r in runs]

    def builds(self) -> list[BuildStamp]:
        """Every build runs recorded, the newest run's first (the History's build filter)."""
        with session_scope(self.engine) as s:
            rows = s.execute(select(BenchRunRow.build_key, BenchRunRow.build_json)
                             .where(BenchRunRow.build_key.is_not(None))
                             .order_by(BenchRunRow.started_at.desc(), BenchRunRow.id.desc()))
            seen: dict[str, BuildStamp] = {}
            for key, data in rows:
                if key not in seen and data:
                    seen[key] = BuildStamp(**data)
            return list(seen.values())

    def latest_build(self) -> BuildStamp | None:
        """The build of the newest run that recorded one (to say when the chosen llama-server changed since)."""
        with session_scope(self.engine) as s:
            data = s.scalars(select(BenchRunRow.build_json).where(BenchRunRow.build_key.is_not(None))
                             .order_by(BenchRunRow.started_at.desc(), BenchRunRow.id.desc()).limit(1)).first()
            return BuildStamp(**data) if data else None

    def labels(self, *, newest_first: bool = False) -> list[str]:
        """The profile labels runs were made under, in name order; `newest_first`: the one run most recently
        first (Compare's profile choices take the newest two as A and B, as its run choices do)."""
        with session_scope(self.engine) as s:
            if not newest_first:
                return sorted({x for x in s.scalars(select(BenchRunRow.label).distinct()) if x})
            newest = func.max(BenchRunRow.id)
            rows = s.execute(select(BenchRunRow.label, newest).group_by(BenchRunRow.label).order_by(newest.desc()))
            return [label for label, _ in rows if label]

    def get_group(self, group_id: int) -> RunGroup | None:
        with session_scope(self.engine) as s:
            row = s.get(BenchGroupRow, group_id)
            if row is None:
                return None
            return RunGroup(id=row.id, number=row.number or row.id, kind=row.kind, param=row.param, values=tuple(row.values_json or []),
                            label=row.label, created_at=row.created_at)
