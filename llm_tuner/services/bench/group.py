"""Runs kept as one group: each a real run (BenchRunner.run), one after another, with its share of progress.

A sweep over a flag's values (BenchRunner.sweep), one profile on two builds (builds.builds_ab) and every
model of a router (services.router_bench) each measure a list of targets and keep the runs as one RunGroup,
told apart by their `sweep_value`. `run_group` is that loop: it stores the group, runs each step with its
span of the overall progress (the step's name and "i/n" before the run's own text, then the whole's time
left), stops between runs when `cancelled`, and, when `heat_gate` is on and the runner has no gate of its
own, waits before each run for the GPUs to cool (BenchRunner.heat_gated).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from llm_tuner.core.bench_spec import BenchRun, BenchSpec, RunGroup
from llm_tuner.services.bench.heat import CoolDown
from llm_tuner.services.bench.target import CancelFn, ProgressFn, ServerTarget
from llm_tuner.store.runs import RunRepository


class _Outcome(Protocol):
    @property
    def run(self) -> BenchRun: ...


class GroupRunner(Protocol):
    """What `run_group` asks of its runner (BenchRunner; a test's scripted one): the history, the heat gate
    and one run."""

    repo: RunRepository
    cool_down: CoolDown | None

    def default_cool_down(self) -> CoolDown | None: ...

    def heat_gated(self, cool: CoolDown | None) -> contextlib.AbstractContextManager[Any]: ...

    def run(
        self,
        target: ServerTarget,
        spec: BenchSpec,
        *,
        progress: ProgressFn | None = None,
        cancelled: CancelFn | None = None,
        group_id: int | None = None,
        sweep_value: str | None = None,
        progress_span: tuple[float, float] = (0.0, 1.0),
    ) -> _Outcome: ...


@dataclass(frozen=True)
class GroupStep:
    """One run of a group: its `sweep_value`, how progress names it, and what it measures."""

    value: str
    name: str
    target: ServerTarget
    spec: BenchSpec


def about_left(seconds: float) -> str:
    """The time left in words ("about 2 min 05 s left", "about 40 s left") of a run, a group or a tune."""
    m, s = divmod(max(0, int(seconds + 0.5)), 60)
    return f"about {m} min {s:02d} s left" if m else f"about {s} s left"


def _time_left(whole: str, started: float, f: float | None) -> str:
    """The text " · sweep: about 40 s left", from the start and the fraction done; "" too early to tell."""
    if f is None or f <= 0.02:
        return ""
    return f" · {whole}: " + about_left((time.monotonic() - started) * (1 - f) / f)


def run_group(
    runner: GroupRunner,
    group: RunGroup,
    steps: Sequence[GroupStep],
    *,
    heat_gate: bool = False,
    whole: str | None = None,
    progress: ProgressFn | None = None,
    cancelled: CancelFn | None = None,
) -> tuple[int, list[BenchRun]]:
    """Store `group` (now as its time when it has none) and run `steps` in order into it; returns the group's
    id and the runs measured (fewer than the steps when cancelled between them). Progress names the time left
    of the whole as `whole` (default: the group's kind, "sweep")."""
    cancelled = cancelled or (lambda: False)
    if group.created_at is None:
        group = group.model_copy(update={"created_at": datetime.now(UTC).replace(tzinfo=None)})
    group_id = runner.repo.create_group(group)
    runs: list[BenchRun] = []
    started = time.monotonic()
    n = len(steps)
    whole = whole or group.kind
    gated = heat_gate and runner.cool_down is None
    with runner.heat_gated(runner.default_cool_down()) if gated else contextlib.nullcontext():
        for i, step in enumerate(steps):
            if cancelled():
                break

            def report(f: float | None, text: str, name: str = step.name, i: int = i) -> None:
                if progress is not None:
                    progress(f, f"{name} ({i + 1}/{n}): {text}{_time_left(whole, started, f)}")

            outcome = runner.run(
                step.target,
                step.spec,
                progress=report,
                cancelled=cancelled,
                group_id=group_id,
                sweep_value=step.value,
                progress_span=(i / n, (i + 1) / n),
            )
            runs.append(outcome.run)
    return group_id, runs
