"""A scripted measurer for tune runner tests (no server): each run's speed from a function of its argv, stored as a
real run in a real SQLite history; each run costs 10 s of an injected clock. Returns what BenchRunner.run does: the
run with its server's log lines. The one ScriptedBench of the tune's unit tests (final, budget, placement, pruning)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from llm_tuner.core.bench_spec import BenchRun, Repetition
from llm_tuner.services.bench import RunOutcome


class Clock:
    """A clock the test moves (the runner's `clock`)."""

    t = 0.0

    def __call__(self) -> float:
        return self.t


class ScriptedBench:
    """`speed(argv)`: the generation t/s of a run, times `wobble(i)` for its i-th repetition (by default each 0.1 %
    faster than the one before); `fail(argv)`: (error, server log lines) when the run fails, else None; `lines`:
    a run's server log lines when it does not; `other_cpu(argv)`: the CPU share other processes took while it
    measured (a busy machine: the runner re-measures). Every started argv is kept in `started`."""

    current_process = None

    def __init__(self, repo, clock: Clock, speed: Callable[[tuple[str, ...]], float],
                 fail: Callable[[tuple[str, ...]], tuple[str, Sequence[str]] | None] = lambda argv: None,
                 lines: Sequence[str] = (), wobble: Callable[[int], float] = lambda i: 1 + 0.001 * i,
                 other_cpu: Callable[[tuple[str, ...]], float | None] = lambda argv: None) -> None:
        self.repo, self.clock, self.speed, self.fail, self.lines = repo, clock, speed, fail, tuple(lines)
        self.wobble, self.other_cpu = wobble, other_cpu
        self.started: list[tuple[str, ...]] = []

    def default_cool_down(self):  # no GPU: the final's runs wait for nothing (services.bench.heat)
        return None

    def heat_gated(self, _cool):
        return contextlib.nullcontext()

    def run(self, target, spec, *, progress=None, cancelled=None, group_id=None, sweep_value=None, **_):
        argv = tuple(target.argv)
        self.started.append(argv)
        start = datetime(2026, 1, 1) + timedelta(seconds=self.clock.t)
        self.clock.t += 10.0
        run_id = self.repo.create_run(BenchRun(server_argv=argv, group_id=group_id, spec=spec,
                                               sweep_value=sweep_value, started_at=start))
        failed = self.fail(argv)
        if failed is not None:
            self.repo.finish_run(run_id, "failed", failed[0])
            return RunOutcome(self.repo.get_run(run_id), tuple(failed[1]))
        speed, busy = self.speed(argv), self.other_cpu(argv)
        for i in range(spec.reps):
            self.repo.add_rep(run_id, Repetition(seq=i, rep=i, prompt_tokens=16, predicted_n=8,
                                                 predicted_per_second=speed * self.wobble(i), other_cpu_pct=busy))
        self.repo.finish_run(run_id, "complete")
        self.repo.update_run(run_id, finished_at=start + timedelta(seconds=10))
        return RunOutcome(self.repo.get_run(run_id), self.lines)
