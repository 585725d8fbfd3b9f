"""A benchmark run from the window: the runner on the long-job pool, its server's log and its progress as
Signals, and the History told at most a few times a second that runs changed.

The panel only binds widgets to this: it says what to run (`start`), shows `progressed`/`run_succeeded`/...,
and forwards `server_log_lines` to the log dock. The runner is built on the job's thread (finding GPUs
means NVML calls, which the GUI thread never waits on); the server's log lines are parsed on the runner's
log-reader thread and cross to the GUI thread already parsed.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from llm_tuner.qt.context import AppContext
from llm_tuner.qt.workers import BackgroundJob, emit_later
from llm_tuner.services import bench as bench_service
from llm_tuner.services.logparse import LogLine, LogParser
from llm_tuner.store.runs import RunRepository

RUNS_CHANGED_MS = 300  # during a run the History (and Compare) reload at most ~3 times a second
INTRO_LINE = "── the benchmark starts its own llama-server; its output follows ──"

# What the panel asks to run: gets the runner and the job's progress/cancelled callbacks, returns a BenchRun
# or a list of them (a sweep).
Work = Callable[[bench_service.BenchRunner, Callable, Callable[[], bool]], object]


def inventory_devices(ctx: AppContext) -> list[dict]:
    """The inventory's devices as a run records them (JSON), [] before the inventory is read."""
    inv = ctx.state.inventory
    if inv is None:
        return []
    return [d.model_dump(mode="json") if hasattr(d, "model_dump") else {"name": str(d)}
            for d in getattr(inv, "devices", [])]


def bench_runner_for(ctx: AppContext, repo: RunRepository, devices: list[dict],
                     emit_lines: Callable[[list], None]) -> bench_service.BenchRunner:
    """The benchmark engine the app's sessions (benchmarks, tunes) run: the user's settings, NVML/AMD
    telemetry (probed here: build it on the job's thread) and the server's output as LogLine batches for the
    log dock."""
    parser = LogParser()

    def on_server_line(line: str) -> None:  # the runner's log-reader thread
        lines = [ev for ev in parser.feed(line) if isinstance(ev, LogLine)]
        if lines:
            emit_lines(lines)

    return bench_service.BenchRunner(repo, settings=ctx.settings, telemetry=bench_service.default_telemetry(),
                                     devices=devices, on_server_line=on_server_line)


class LongJobSession(QObject):
    """One long job at a time on `long_pool()` (a benchmark, a tune): its state, Cancel, and how it is
    started. Subclasses keep their own Signals; `_launch` wires the job's to them."""

    def __init__(self, ctx: AppContext, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self._job: BackgroundJob | None = None
        # the running job's progress slot
        self._progressed: Callable[[float, str], None] = lambda _f, _t: None

    def is_running(self) -> bool:
        return self._job is not None

    def cancel(self) -> None:
        """Ask the job to stop after the current request (its runner stops its server; what it stored is
        kept)."""
        if self._job is not None:
            self._job.cancel()

    def _devices(self) -> list[dict]:
        return inventory_devices(self.ctx)

    def _launch(self, job: Callable, *, what: str, progressed, succeeded, failed, cancelled,
                finished) -> None:
        """Start `job(control)` on the long-job pool with its Signals connected to these slots (GUI thread).

        After Cancel the fractions are dropped (sent as -1, unknown) and the texts kept: the runners report
        1.0 as they wind up, and the bar must stay where the work stopped."""
        # the panel says it
        self._job = BackgroundJob(job, self, what=what, on_failed=getattr(failed, "emit", failed))
        self._progressed = getattr(progressed, "emit", progressed)  # a slot, or a Signal to pass it on
        self._job.progressed.connect(self._on_long_job_progressed)
        self._job.succeeded.connect(succeeded)
        self._job.cancelled.connect(cancelled)
        self._job.finished.connect(finished)
        self._job.start(long=True)

    def _on_long_job_progressed(self, fraction: float, text: str) -> None:
        cancelled = self._job is not None and self._job.control.cancelled()
        self._progressed(-1.0 if cancelled else fraction, text)


class BenchSession(LongJobSession):
    """One benchmark (or sweep) at a time, run on `long_pool()`; Signals arrive on the GUI thread."""

    progressed = Signal(float, str)  # fraction (-1: unknown), text
    run_succeeded = Signal(object)  # BenchRun, or list[BenchRun] for a sweep
    run_failed = Signal(object)  # the exception
    run_cancelled = Signal()
    run_finished = Signal()  # after any of the three above
    server_log_lines = Signal(list)  # logparse.LogLine of the server the benchmark starts

    def __init__(self, ctx: AppContext, repo: RunRepository | None = None,
                 parent: QObject | None = None) -> None:
        super().__init__(ctx, parent)
        self.repo = repo or RunRepository(ctx.engine)
        self._runs_changed = QTimer(self)  # coalesces "a repetition was stored" into a few reloads a second
        self._runs_changed.setSingleShot(True)
        self._runs_changed.setInterval(RUNS_CHANGED_MS)
        self._runs_changed.timeout.connect(ctx.state.bench_runs_changed)

    def start(self, work: Work) -> bool:
        """Run `work(runner, progress, cancelled)` on the long-job pool; False when one is running already."""
        if self._job is not None:
            return False
        devices = self._devices()
        self.server_log_lines.emit([LogLine("info", INTRO_LINE)])

        def job(ctl):
            return work(self._runner(devices), ctl.progress, ctl.cancelled)

        self._launch(job, what="The benchmark", progressed=self._on_job_progressed,
                     succeeded=self.run_succeeded, failed=self.run_failed, cancelled=self.run_cancelled,
                     finished=self._on_job_finished)
        return True

    def _runner(self, devices: list[dict]) -> bench_service.BenchRunner:
        return bench_runner_for(self.ctx, self.repo, devices,
                                lambda lines: emit_later(self, "server_log_lines", lines))

    def _on_job_progressed(self, fraction: float, text: str) -> None:
        self.progressed.emit(fraction, text)
        if not self._runs_changed.isActive():  # repetitions are stored as they finish
            self._runs_changed.start()

    def _on_job_finished(self) -> None:
        self._job = None
        self._runs_changed.stop()
        self.run_finished.emit()
        self.ctx.state.bench_runs_changed.emit()
