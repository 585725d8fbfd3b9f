"""A tune run from the window: the TuneRunner on the long-job pool, its trials and progress as Signals.

Like `bench_session.BenchSession`: the panel says what to tune (`start`, with a function that builds the
TuneSpec on the job's thread, where reading a saved profile is no SQL on the GUI thread), shows
`progressed` / `trials_recorded` / `tune_succeeded`, and forwards `server_log_lines` to the log dock. Trials
arrive from the runner's thread one by one and reach the GUI in batches, at most ~3 times a second; the
History is told that runs changed at the same rate.

The short jobs the Tune view needs off the GUI thread (the base profile's target, the proposed knobs, the
choices, saving a result as a profile version) are state.tune's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from llm_tuner.core.tune import Trial, TuneResult, TuneSpec
from llm_tuner.qt.bench_session import RUNS_CHANGED_MS, LongJobSession, bench_runner_for
from llm_tuner.qt.context import AppContext
from llm_tuner.qt.workers import emit_later
from llm_tuner.services.logparse import LogLine
from llm_tuner.services.tune import (
    TuneRunner,
)
from llm_tuner.store.runs import RunRepository
from llm_tuner.store.tunes import TuneRepository

log = logging.getLogger(__name__)

TRIALS_MS = RUNS_CHANGED_MS  # trials reach the table and the plot at most ~3 times a second
INTRO_LINE = "── the tune starts its own llama-server for every trial; their output follows ──"

SpecFn = Callable[[], TuneSpec]  # builds the TuneSpec on the job's thread


class TuneSession(LongJobSession):
    """One tune at a time, run on `long_pool()`; Signals arrive on the GUI thread."""

    progressed = Signal(float, str)  # fraction (-1: unknown), text with the time left
    trials_recorded = Signal(list)  # Trial batch (a trial can come again with a new status)
    tune_succeeded = Signal(object)  # TuneResult
    tune_failed = Signal(object)  # the exception
    tune_cancelled = Signal()
    tune_finished = Signal()  # after any of the three above
    server_log_lines = Signal(list)  # logparse.LogLine of the trial's server
    _trial_arrived = Signal(object)  # from the runner's thread; queued to the GUI thread

    def __init__(self, ctx: AppContext, parent: QObject | None = None) -> None:
        super().__init__(ctx, parent)
        self._pending: list[Trial] = []
        self._flush = QTimer(self)
        self._flush.setSingleShot(True)
        self._flush.setInterval(TRIALS_MS)
        self._flush.timeout.connect(self._on_flush_timeout)
        self._trial_arrived.connect(self._on_trial_arrived)

    def start(self, make_spec: SpecFn, resume_tune_id: int | None = None) -> bool:
        """Tune what `make_spec()` (called on the job's thread) returns; False when one is running already."""
        if self._job is not None:
            return False
        devices = self._devices()
        self.server_log_lines.emit([LogLine("info", INTRO_LINE)])

        def job(ctl):
            spec = make_spec()
            return self._runner(devices).run(spec, progress=ctl.progress, cancelled=ctl.cancelled,
                                             on_trial=lambda t: emit_later(self, "_trial_arrived", t),
                                             resume_tune_id=resume_tune_id)

        self._launch(job, what="The tune", progressed=self.progressed, succeeded=self._on_job_succeeded,
                     failed=self.tune_failed, cancelled=self.tune_cancelled, finished=self._on_job_finished)
        return True

    def _runner(self, devices: list[dict]) -> TuneRunner:
        """Built on the job's thread: the app's benchmark engine (its server lines to the log dock) under the
        TuneRunner."""
        bench = bench_runner_for(self.ctx, RunRepository(self.ctx.engine), devices,
                                 lambda lines: emit_later(self, "server_log_lines", lines))
        return TuneRunner(TuneRepository(self.ctx.engine), settings=self.ctx.settings, bench_runner=bench)

    def _on_trial_arrived(self, trial: Trial) -> None:
        self._pending.append(trial)
        if not self._flush.isActive():
            self._flush.start()

    def _on_flush_timeout(self) -> None:
        batch, self._pending = self._pending, []
        if batch:
            self.trials_recorded.emit(batch)
            self.ctx.state.bench_runs_changed.emit()  # measured trials are runs in the History

    def _on_job_succeeded(self, result: TuneResult) -> None:
        self._flush.stop()
        self._on_flush_timeout()  # the last trials before the result
        self.tune_succeeded.emit(result)

    def _on_job_finished(self) -> None:
        self._job = None
        self._flush.stop()
        self._on_flush_timeout()
        self.tune_finished.emit()
        self.ctx.state.bench_runs_changed.emit()
