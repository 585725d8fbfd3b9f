"""Tunes: a bench group of kind "tune" (its spec, status, result) and its trials (table + repository).

A trial is written as soon as it is decided (pruned, failed) or measured, in its own transaction, so a tune
killed mid-way keeps every trial; `TuneRunner.run(..., resume_tune_id=...)` re-uses them. Measured trials
point at their runs (bench_runs.group_id = the tune's group), so they also show in History.
Rows never leave this module: the repository returns frozen core models (core/tune).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Float, ForeignKey, Integer, String, Text, func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Mapped, mapped_column

from llm_tuner.core import flags
from llm_tuner.core.tune import Trial, TuneRecord, TuneResult, TuneSpec
from llm_tuner.store.base import Base, owner_alive, owner_started_now
from llm_tuner.store.db import session_scope
from llm_tuner.store.runs import BenchGroupRow, number_group

KIND = "tune"


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class TuneTrialRow(Base):
    __tablename__ = "bench_tune_trials"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    group_id: Mapped[int] = mapped_column(ForeignKey("bench_groups.id", ondelete="CASCADE"), index=True)
    seq: Mapped[int] = mapped_column(Integer, default=0)
    knob: Mapped[str | None] = mapped_column(String(200), nullable=True)
    values_json: Mapped[dict[str, str | None]] = mapped_column(JSON, default=dict)
    argv: Mapped[list[str]] = mapped_column(JSON, default=list)
    status: Mapped[str] = mapped_column(String(16), default="measured")
    reason: Mapped[str] = mapped_column(Text, default="")
    run_id: Mapped[int | None] = mapped_column(Integer, nullable=True)  # no FK: a deleted run keeps the trial
    run_ids: Mapped[list[int]] = mapped_column(JSON, default=list)
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    samples: Mapped[list[float]] = mapped_column(JSON, default=list)
    flagged: Mapped[str | None] = mapped_column(Text, nullable=True)
    # the speed model's prediction, before it started
    predicted_json: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=_now)


_TRIAL_FIELDS = ("seq", "knob", "status", "reason", "run_id", "score", "flagged")


def _trial(row: TuneTrialRow) -> Trial:
    return Trial(id=row.id, tune_id=row.group_id, values=dict(row.values_json or {}), argv=tuple(row.argv or ()),
                 run_ids=tuple(row.run_ids or ()), samples=tuple(row.samples or ()),
                 predicted=dict(row.predicted_json) if row.predicted_json else None,
                 **{f: getattr(row, f) for f in _TRIAL_FIELDS})


# beside the stored spec (TuneSpec ignores it): the variables of the secrets left out, so a resume asks for them
_LEFT_OUT = "secrets_left_out"


class TuneBusy(ValueError):
    """The tune is running in another live process: a second one would write the same tune's trials."""


class TuneNeedsSecret(ValueError):
    """The tune's servers ran with a secret (the API key) the history does not keep, and none was given."""


def _spec_json(spec: TuneSpec) -> dict[str, Any]:
    """The spec as stored: secrets out of argv and environment (as run records keep them), the names of the
    variables they travel in (LLAMA_API_KEY) kept so that a resume starts its servers with them again."""
    argv, env = flags.strip_secrets(list(spec.base_argv), dict(spec.base_env))
    _rest, with_secrets = flags.secrets_to_env(list(spec.base_argv), dict(spec.base_env))
    left_out = sorted(k for k in with_secrets if k not in env and with_secrets[k])
    data = spec.model_copy(update={"base_argv": tuple(argv), "base_env": env}).model_dump(mode="json")
    return {**data, _LEFT_OUT: left_out} if left_out else data


def _record(row: BenchGroupRow, n_trials: int) -> TuneRecord:
    return TuneRecord(id=row.id, number=row.number or row.id, label=row.label, status=row.status or "running", created_at=row.created_at,
                      spec=TuneSpec(**row.spec_json) if row.spec_json else None,
                      result=TuneResult(**row.result_json) if row.result_json else None, n_trials=n_trials)


class TuneRepository:
    """Tunes in the app's SQLite file. Thread-safe: one short session per call."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # -- writing --------------------------------------------------------------------------------
    def create(self, spec: TuneSpec) -> int:
        """A new tune in state "running"; returns its id (the bench group id its runs carry)."""
        with session_scope(self.engine) as s:
            row = BenchGroupRow(kind=KIND, param="tune", values_json=[k.key for k in spec.knobs], label=spec.label,
                                created_at=_now(), spec_json=_spec_json(spec),
                                knobs_json=[k.model_dump(mode="json") for k in spec.knobs], status="running",
                                owner_pid=os.getpid(), owner_started_unix=owner_started_now())
            number_group(s, row)
            s.add(row)
            s.flush()
            return row.id

    def set_status(self, tune_id: int, status: str) -> None:
        with session_scope(self.engine) as s:
            row = s.get(BenchGroupRow, tune_id)
            if row is not None:
                row.status = status
                running = status == "running"
                row.owner_pid, row.owner_started_unix = (os.getpid(), owner_started_now()) if running else (None, None)

    def resume(self, tune_id: int, environ: Mapping[str, str] | None = None) -> TuneRecord | None:
        """Take a stored tune over to continue it: its record (None when there is none), now "running" and owned
        by this process, its spec's secrets (the API key its servers ran with) from the environment again.

        Raises:
            TuneBusy: it runs in another live process (pid and start time): two would write one tune's trials.
            TuneNeedsSecret: its servers ran with an API key the history does not keep and $LLAMA_API_KEY is
                unset (asked again rather than stored in plain text, as runs leave it out too).
        """
        environ = os.environ if environ is None else environ
        with session_scope(self.engine) as s:
            row = s.get(BenchGroupRow, tune_id)
            if row is None or row.kind != KIND or not row.spec_json:
                return None
            mine = row.owner_pid == os.getpid() and owner_alive(row.owner_pid, row.owner_started_unix)
            if row.status == "running" and not mine and owner_alive(row.owner_pid, row.owner_started_unix):
                raise TuneBusy(f"tune {tune_id} is running in another process (pid {row.owner_pid}): wait for it "
                               "to finish, or stop it, then resume")
            missing = [k for k in row.spec_json.get(_LEFT_OUT, []) if not environ.get(k)]
            if missing:
                raise TuneNeedsSecret(f"tune {tune_id}'s servers ran with {', '.join(missing)}, which the history "
                                      f"does not keep: set {missing[0]} in the environment (`ps` does not show it) "
                                      "and resume again")
            row.status, row.owner_pid, row.owner_started_unix = "running", os.getpid(), owner_started_now()
            s.flush()
            n = s.scalar(select(func.count()).select_from(TuneTrialRow).where(TuneTrialRow.group_id == tune_id))
            rec = _record(row, n or 0)
        assert rec.spec is not None  # the row has a spec_json (checked above)
        env = {**rec.spec.base_env, **{k: environ[k] for k in row.spec_json.get(_LEFT_OUT, [])}}
        return rec.model_copy(update={"spec": rec.spec.model_copy(update={"base_env": env})})

    def add_trial(self, trial: Trial) -> int:
        """Store one decided trial at once (its own transaction); returns its id."""
        argv, _env = flags.strip_secrets(list(trial.argv), {})
        with session_scope(self.engine) as s:
            row = TuneTrialRow(group_id=trial.tune_id, values_json=dict(trial.values), argv=argv,
                               run_ids=list(trial.run_ids), samples=list(trial.samples), created_at=_now(),
                               predicted_json=dict(trial.predicted) if trial.predicted else None,
                               **{f: getattr(trial, f) for f in _TRIAL_FIELDS})
            s.add(row)
            s.flush()
            return row.id

    def update_trial(self, trial_id: int, **fields: Any) -> None:
        """Change a trial (more samples after a re-race, a flag, "final")."""
        with session_scope(self.engine) as s:
            row = s.get(TuneTrialRow, trial_id)
            if row is None:
                return
            for key, value in fields.items():
                if key in ("samples", "run_ids"):
                    value = list(value)
                elif key == "values":
                    key, value = "values_json", dict(value)
                setattr(row, key, value)

    def finish(self, tune_id: int, status: str, result: TuneResult | None = None) -> None:
        """The final status (complete, cancelled, failed) and the result when there is one."""
        with session_scope(self.engine) as s:
            row = s.get(BenchGroupRow, tune_id)
            if row is None:
                return
            row.status = status
            row.owner_pid = row.owner_started_unix = None
            if result is not None:
                row.result_json = result.model_copy(update={"trials": ()}).model_dump(mode="json")

    def mark_interrupted(self) -> int:
        """Tunes left "running" by a process that is gone become "interrupted" (resumable)."""
        n = 0
        with session_scope(self.engine) as s:
            q = select(BenchGroupRow).where(BenchGroupRow.kind == KIND, BenchGroupRow.status == "running")
            for row in s.scalars(q):
                if not owner_alive(row.owner_pid, row.owner_started_unix):
                    row.status, row.owner_pid, row.owner_started_unix = "interrupted", None, None
                    n += 1
        return n

    # -- reading --------------------------------------------------------------------------------
    def list_trials(self, tune_id: int) -> list[Trial]:
        with session_scope(self.engine) as s:
            rows = s.scalars(select(TuneTrialRow).where(TuneTrialRow.group_id == tune_id)
                             .order_by(TuneTrialRow.seq, TuneTrialRow.id))
            return [_trial(r) for r in rows]

    def get(self, tune_id: int) -> TuneRecord | None:
        with session_scope(self.engine) as s:
            row = s.get(BenchGroupRow, tune_id)
            if row is None or row.kind != KIND:
                return None
            n = s.scalar(select(func.count()).select_from(TuneTrialRow).where(TuneTrialRow.group_id == tune_id))
            return _record(row, n or 0)

    def id_of_number(self, number: int) -> int | None:
        """The id of tune `number` (the number `tune list` and the Tune view show), None when there is none."""
        with session_scope(self.engine) as s:
            return s.scalar(select(BenchGroupRow.id).where(BenchGroupRow.kind == KIND,
                                                           func.coalesce(BenchGroupRow.number, BenchGroupRow.id) == number))

    def list_tunes(self, limit: int = 200) -> list[TuneRecord]:
        """Tunes newest first, with their trial counts."""
        with session_scope(self.engine) as s:
            rows = list(s.scalars(select(BenchGroupRow).where(BenchGroupRow.kind == KIND)
                                  .order_by(BenchGroupRow.created_at.desc(), BenchGroupRow.id.desc()).limit(limit)))
            counts = dict(s.execute(select(TuneTrialRow.group_id, func.count()).where(
                TuneTrialRow.group_id.in_([r.id for r in rows])).group_by(TuneTrialRow.group_id)).all()) if rows else {}
            return [_record(r, counts.get(r.id, 0)) for r in rows]
