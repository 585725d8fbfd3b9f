"""A tune run from the window: the TuneRunner on the long-job pool, its trials and progress as Signals.

Like `bench_session.BenchSession`: the panel says what to tune (`start`, with a function that builds the
TuneSpec on the job's thread, where reading a saved profile is no SQL on the GUI thread), shows
`progressed` / `trials_recorded` / `tune_succeeded`, and forwards `server_log_lines` to the log dock. Trials
arrive from the runner's thread one by one and reach the GUI in batches, at most ~3 times a second; the
History is told that runs changed at the same rate.

The module also holds the short jobs the Tune view needs off the GUI thread: the base profile's target
(`base_target`), the proposed knobs (`proposed_knobs`), the choices (`load_choices`), saving a result as a
profile version (`save_result_profile`).
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, QTimer, Signal

from llm_tuner.core import flags
from llm_tuner.core.tune import PLACEMENT_KNOB, Knob, Objective, Trial, TuneRecord, TuneResult, TuneSpec
from llm_tuner.core.tune.model import NOT_MEASURED
from llm_tuner.qt.bench_session import RUNS_CHANGED_MS, LongJobSession, bench_runner_for
from llm_tuner.qt.context import AppContext
from llm_tuner.services import bench as bench_service
from llm_tuner.services.demo_model import find_demo_model
from llm_tuner.services.logparse import LogLine
from llm_tuner.services.tune import (
    PlacementResolver,
    SpeedOracle,
    TuneRunner,
    default_knobs,
    make_plan_fn,
    preview_candidates,
    save_winner,
)
from llm_tuner.store.profiles import ProfileRepository
from llm_tuner.store.runs import RunRepository
from llm_tuner.store.tunes import TuneRepository

log = logging.getLogger(__name__)

TRIALS_MS = RUNS_CHANGED_MS  # trials reach the table and the plot at most ~3 times a second
INTRO_LINE = "── the tune starts its own llama-server for every trial; their output follows ──"

# The base profile choices besides saved profile names (the combo's data).
EDITED, DEMO = "\x00edited", "\x00demo"

RESUMABLE = ("interrupted", "cancelled", "failed")  # tune statuses Resume offers
SpecFn = Callable[[], TuneSpec]  # builds the TuneSpec on the job's thread


@dataclass
class Choices:
    """What the Tune view offers: saved profile names and tunes that can be resumed."""

    profiles: list[str] = field(default_factory=list)
    resumable: list[TuneRecord] = field(default_factory=list)  # tunes left unfinished, or with no candidate measured


def load_choices(engine) -> Choices:
    """Saved profile names and the tunes Resume can continue (a job: SQL). Tunes left "running" by a process
    that is gone become "interrupted" first, as the History does with runs."""
    tunes = TuneRepository(engine)
    tunes.mark_interrupted()
    return Choices(ProfileRepository(engine).names(),
                   [t for t in tunes.list_tunes() if t.status in RESUMABLE
                    or (t.result is not None and t.result.verdict == NOT_MEASURED)])  # the budget ran out first


def base_target(engine, choice: str, state_profile, state_name: str | None, extra: str) -> bench_service.ServerTarget:
    """The server the tune starts from: a saved profile's newest version, the profile edited in the
    Profile tab, or the demo model with default flags; `extra` llama-server flags appended (a job: SQL)."""
    if choice == EDITED:
        if state_profile is None:
            raise bench_service.BenchError("No profile is being edited: choose a saved profile or the demo model.")
        target = bench_service.target_from_profile(state_profile, label=state_name or "unsaved profile")
    elif choice == DEMO:
        model = find_demo_model()
        if model is None:
            raise bench_service.BenchError("The demo model is missing: run `python -m llm_tuner.services.demo_model`.")
        target = bench_service.demo_target(model)
    else:
        saved = ProfileRepository(engine).latest(choice)
        if saved is None:
            raise bench_service.BenchError(f"The profile {choice!r} is gone: choose another one.")
        target = bench_service.target_from_profile(saved)
    words = shlex.split(extra)
    if words:  # a flag given again replaces the profile's value (llama-server reads the last one anyway)
        keys = [f[0].key for w in words if (f := flags.lookup(w)) is not None]
        target.argv = [*flags.without(target.argv, *keys), *words] if keys else [*target.argv, *words]
    return target


def proposed_knobs(ctx: AppContext, target: bench_service.ServerTarget, objective: Objective,
                   headroom_mib: int) -> list[Knob]:
    """The knobs worth trying for this base (services.tune.default_knobs: the model, the binary's --help, its
    devices, whether the base fits with the headroom; placements ranked by the speed model where it is
    calibrated); a job: it reads the model's header and runs the binary."""
    plan_fn = make_plan_fn(headroom_mib, binary=target.binary)
    return default_knobs(list(target.argv), dict(target.env), binary=target.binary, objective=objective,
                         plan_fn=plan_fn, settings=ctx.settings,
                         speed=_speed(target, objective, ctx.engine))


def _speed(target: bench_service.ServerTarget, objective: Objective, engine) -> SpeedOracle | None:
    """The speed model of a base on this machine (None when it cannot be set up: the views show no prediction)."""
    try:
        return SpeedOracle.for_tune(list(target.argv), dict(target.env), objective, engine=engine,
                                    binary=target.binary)
    except Exception as exc:  # noqa: BLE001 - the plan's verdicts still show
        log.info("no speed predictions for the candidates: %s", exc)
        return None


def candidate_preview(target: bench_service.ServerTarget, knobs, headroom_mib: int, objective: Objective | None = None,
                      engine=None) -> list:
    """Each knob value as a candidate with the memory plan's verdict and the speed model's prediction (the history's
    calibration of this build), placements resolved at the headroom (services.tune.preview, the list
    `tune --dry-run` prints); a job: it reads the model and lists the devices."""
    resolver = None
    if any(k.flag == PLACEMENT_KNOB for k in knobs):
        resolver = PlacementResolver(list(target.argv), dict(target.env), binary=target.binary,
                                     margin_mib=headroom_mib)
    plan_fn = make_plan_fn(headroom_mib, binary=target.binary)
    speed = _speed(target, objective, engine) if objective is not None else None
    return preview_candidates(list(target.argv), dict(target.env), list(knobs), resolver, plan_fn, speed)


def save_result_profile(engine, name: str, result: TuneResult, catalog=None):
    """Save what the tune keeps (its winner: the baseline unless it won the final A/B) as the newest version of
    profile `name`, with the tune's stored spec (services.tune.save_winner); a job: SQL. Returns (the version,
    whether it is new): the store returns the newest version instead when that holds these settings already."""
    record = TuneRepository(engine).get(result.tune_id)
    if record is None or record.spec is None:
        raise ValueError(f"tune {result.tune_id} is not in the store any more")
    before = ProfileRepository(engine).latest(name)
    saved = save_winner(engine, name, result, record.spec, catalog)
    return saved, before is None or saved.version_id != before.version_id


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
                                             on_trial=self._trial_arrived.emit, resume_tune_id=resume_tune_id)

        self._launch(job, what="The tune", progressed=self.progressed, succeeded=self._on_job_succeeded, failed=self.tune_failed,
                     cancelled=self.tune_cancelled, finished=self._on_job_finished)
        return True

    def _runner(self, devices: list[dict]) -> TuneRunner:
        """Built on the job's thread: the app's benchmark engine (its server lines to the log dock) under the
        TuneRunner."""
        bench = bench_runner_for(self.ctx, RunRepository(self.ctx.engine), devices, self.server_log_lines.emit)
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
