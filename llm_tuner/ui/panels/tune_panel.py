"""Tune panel: find the fastest settings that fit, measured on the real server (issue 13).

The form (tune_form.TuneForm) on the left with Run / Cancel / Resume, the progress with the time left and the
status below it; on the right the trials (table and the objective over trials) and the result
(tune_result.TuneResultView). The tune runs in qt/tune_session.TuneSession on the long-job pool; every store
call and the knob proposal (which reads the model's header) run as short jobs: the window never waits.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QCoreApplication, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core.tune import OBJECTIVES, TuneResult, TuneSpec
from llm_tuner.qt.context import AppContext
from llm_tuner.qt.tune_models import TrialTableModel
from llm_tuner.qt.tune_session import (
    DEMO,
    EDITED,
    TuneSession,
    base_target,
    candidate_preview,
    load_choices,
    proposed_knobs,
    save_result_profile,
)
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.services import binaries
from llm_tuner.ui.panels.bench_tables import make_table
from llm_tuner.ui.panels.tune_candidates import CandidateView
from llm_tuner.ui.panels.tune_form import TuneForm
from llm_tuner.ui.panels.tune_result import TuneResultView
from llm_tuner.ui.plots.bench_plots import HintStack
from llm_tuner.ui.plots.tune_plots import TrialChart

log = logging.getLogger(__name__)
PROPOSE_AFTER_EDIT_MS = 600  # the knob proposal reads the model and runs the binary: not on every keystroke


class TunePanel(QWidget):
    """Inputs, Run/Cancel/Resume with progress, trials (table + plot) and the result."""

    server_log_lines = Signal(list)  # logparse.LogLine of the trial's server (for the log dock)
    profile_saved = Signal(object)  # SavedProfile: a tune's result saved as a profile version

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.result: TuneResult | None = None
        self._base = None  # (choice, extra) -> the resolved ServerTarget, for the result's profile name
        self._proposal_seq = 0  # only the newest proposal fills the knobs
        self._candidates_seq = 0  # only the newest candidate plan fills the Candidates tab
        self._save_name = ""  # the profile name "Save as new profile version" suggests for the running tune
        self._objective_text = ""  # the running tune's objective, for the report
        self.session = TuneSession(ctx, self)
        self.session.progressed.connect(self._on_session_progressed)
        self.session.trials_recorded.connect(self._on_session_trials_recorded)
        self.session.tune_succeeded.connect(self._on_session_tune_succeeded)
        self.session.tune_failed.connect(self._on_session_tune_failed)
        self.session.tune_cancelled.connect(self._on_session_tune_cancelled)
        self.session.tune_finished.connect(self._on_session_tune_finished)
        self.session.server_log_lines.connect(self.server_log_lines)
        self.server_log_lines.connect(ctx.state.server_log_lines_posted)  # the log dock, through the workspace
        self.profile_saved.connect(ctx.state.profile_saved)  # the Profile tab's lists show the saved version

        self._seen_profile = (getattr(ctx.state, "profile_name", None), ctx.state.profile is not None)
        self._user_chose_base = False  # until then the base follows the profile the Profile tab shows
        self._propose_timer = QTimer(self)  # profile edits re-propose the knobs once they pause
        self._propose_timer.setSingleShot(True)
        self._propose_timer.setInterval(PROPOSE_AFTER_EDIT_MS)
        self._propose_timer.timeout.connect(self._on_base_changed)
        self.form = TuneForm()
        self.form.base_combo.activated.connect(self._on_base_combo_activated)
        self.form.base_combo.currentIndexChanged.connect(self._on_base_changed)
        self.form.extra_edit.editingFinished.connect(self._on_base_changed)
        self.run_button = QPushButton("Run tune")
        self.run_button.clicked.connect(self._on_run_clicked)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self._on_cancel_clicked)
        self.resume_combo = QComboBox()
        self.resume_combo.setToolTip("Tunes interrupted by Cancel, a quit or a crash keep their trials; so do tunes "
                                     "whose budget ran out before any candidate was measured")
        self.resume_button = QPushButton("Resume")
        self.resume_button.clicked.connect(self._on_resume_clicked)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.status_label = QLabel("Press Run to tune; every trial is kept in the Benchmarks History.")
        self.status_label.setWordWrap(True)

        self.trial_model = TrialTableModel(self)
        self.trial_view, _ = make_table(self.trial_model)
        self.chart = TrialChart()
        self.chart_stack = HintStack(self.chart, "The objective over trials shows here as the tune runs.")
        self.result_view = TuneResultView()
        self.result_view.save_requested.connect(self._on_result_save_requested)
        trials = QSplitter(Qt.Orientation.Vertical)
        trials.addWidget(self.trial_view)
        trials.addWidget(self.chart_stack)
        self.candidates = CandidateView()
        self.candidates.check_requested.connect(self._on_candidates_check_requested)
        self.right_tabs = QTabWidget()
        self.right_tabs.addTab(trials, "Trials")
        self.right_tabs.addTab(self.result_view, "Result")
        self.right_tabs.addTab(self.candidates, "Candidates")

        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(self.form)
        scroll.setMinimumWidth(340)
        buttons = QHBoxLayout()  # one row: a 768 px screen needs the height for the form and the knobs
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.progress, 2)
        self.resume_row = QWidget()  # shown while a tune can be resumed
        resume = QHBoxLayout(self.resume_row)
        resume.setContentsMargins(8, 0, 0, 0)
        resume.addWidget(QLabel("Interrupted:"))
        resume.addWidget(self.resume_combo, 1)
        resume.addWidget(self.resume_button)
        # the row stays narrow enough for a 1366 px window: the progress and the tune's name give way (its list
        # shows it whole)
        self.resume_combo.setMinimumContentsLength(4)
        self.resume_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.progress.setMinimumWidth(40)
        self.resume_row.hide()
        buttons.addWidget(self.resume_row, 3)
        inputs = QSplitter(Qt.Orientation.Vertical)  # the form scrolls; the knob table keeps its own room
        inputs.addWidget(scroll)
        inputs.addWidget(self.form.knobs_box)
        inputs.setSizes([420, 260])
        inputs.setCollapsible(1, False)  # the knob table keeps its minimum (six rows): the form above scrolls
        left = QWidget()
        ll = QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.addWidget(inputs, 1)
        ll.addLayout(buttons)
        ll.addWidget(self.status_label)
        split = QSplitter()
        split.addWidget(left)
        split.addWidget(self.right_tabs)
        split.setStretchFactor(0, 1)  # the form and its knob table widen with the window too (the reasons wrap)
        split.setStretchFactor(1, 1)
        split.setSizes([560, 440])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.addWidget(split)

        ctx.state.profile_changed.connect(self._on_state_profile_changed)
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)
        self.reload_choices()
        self._set_running(False)

    # -- short jobs ----------------------------------------------------------------------------------
    @staticmethod
    def _job(fn, on_succeeded, on_failed=None, *, what: str) -> None:
        """`fn` off the GUI thread; its result to a bound slot (dropped when this widget is gone); a failure to
        `on_failed` when the view shows it, else to the app's error surface as `what` failing."""
        job = BackgroundJob(fn, what=what, on_failed=on_failed)
        job.succeeded.connect(on_succeeded)
        job.start()

    def reload_choices(self) -> None:
        """Saved profiles for the base combo, interrupted tunes for Resume (SQL off the GUI thread)."""
        engine = self.ctx.engine
        self._job(lambda _ctl: load_choices(engine), self._on_choices_loaded,
                  what="Loading the saved profiles and tunes")

    def _on_choices_loaded(self, choices) -> None:
        state = self.ctx.state
        self.form.set_base_choices(choices.profiles, state.profile is not None,
                                   prefer=getattr(state, "profile_name", None) or (EDITED if state.profile else None),
                                   keep=self._user_chose_base)
        self.resume_combo.clear()
        for t in choices.resumable:
            why = "no candidate measured" if t.status == "complete" else t.status
            self.resume_combo.addItem(f"tune #{t.number or t.id} {t.label} ({why}, {t.n_trials} trials)", t)
        self.resume_button.setEnabled(self.resume_combo.count() > 0 and not self.session.is_running())
        self.resume_row.setVisible(self.resume_combo.count() > 0)

    def _base_args(self):
        state = self.ctx.state
        return (self.form.base_combo.currentData(), state.profile, getattr(state, "profile_name", None),
                self.form.extra_edit.text())

    def _on_base_changed(self, *_args) -> None:
        """Resolve the base and propose its knobs (a job: SQL and the model's header)."""
        choice, profile, name, extra = args = self._base_args()
        if choice is None:
            return
        self._proposal_seq += 1
        seq, engine, ctx = self._proposal_seq, self.ctx.engine, self.ctx

        objective, headroom = self.form.objective(), self.form.headroom_spin.value()

        def work(_ctl):
            target = base_target(engine, choice, profile, name, extra)
            return seq, args, target, proposed_knobs(ctx, target, objective, headroom)

        self.form.knobs_hint.setText("Proposing knobs…")
        self._job(work, self._on_proposal_ready, self._on_proposal_failed, what="Proposing the knobs")

    def _on_proposal_ready(self, loaded) -> None:
        seq, args, target, knobs = loaded
        if seq != self._proposal_seq:
            return
        self._base = (args, target)
        self.form.set_proposed_knobs(knobs)
        self._on_candidates_check_requested()

    def _on_candidates_check_requested(self) -> None:
        """The knobs as the form has them now, each value planned against the devices (a job: no server)."""
        if self._base is None:
            self.candidates.set_message("Choose a base profile: its candidates show here before you run the tune.")
            return
        target, knobs, headroom = self._base[1], self.form.knobs(), self.form.headroom_spin.value()
        objective, engine = self.form.objective(), self.ctx.engine
        self._candidates_seq += 1
        seq = self._candidates_seq
        self.candidates.set_message("Planning the candidates…")
        self._job(lambda _ctl: (seq, candidate_preview(target, knobs, headroom, objective, engine)),
                  self._on_candidates_ready,
                  lambda exc: self.candidates.set_message(f"The candidates could not be planned: {exc}"),
                  what="Planning the candidates")

    def _on_candidates_ready(self, loaded) -> None:
        seq, cands = loaded
        if seq == self._candidates_seq:
            self.candidates.set_candidates(cands)

    def _on_proposal_failed(self, exc) -> None:
        self.form.knobs_hint.setText(f"No knobs proposed: {exc}")

    def _on_state_profile_changed(self, _profile) -> None:
        """A profile saved under a new name, or one being edited, changes the choices (reloaded from the store);
        edits to the profile chosen as "being edited" propose its knobs again, once the edits pause."""
        state = self.ctx.state
        seen = (getattr(state, "profile_name", None), state.profile is not None)
        if seen != self._seen_profile:
            self._seen_profile = seen
            self.reload_choices()
        elif self.form.base_combo.currentData() == EDITED:
            self._propose_timer.start()

    def _on_base_combo_activated(self, _index: int) -> None:
        self._user_chose_base = True  # from now on a reload keeps this choice instead of following the Profile tab

    # -- running ------------------------------------------------------------------------------------
    def spec_builder(self):
        """A function for the job's thread that builds the TuneSpec from the form as it is now."""
        choice, profile, name, extra = self._base_args()
        if choice is None:
            raise ValueError("choose a base profile first")
        objective, knobs, constraints = self.form.objective(), self.form.knobs(), self.form.constraints()
        if not knobs:
            raise ValueError("check at least one knob (or add a custom one)")
        engine = self.ctx.engine

        def build() -> TuneSpec:
            target = base_target(engine, choice, profile, name, extra)
            return TuneSpec(base_argv=tuple(target.argv), base_env=dict(target.env), binary=target.binary,
                            label=target.label, profile_version_id=target.profile_version_id,
                            objective=objective, knobs=knobs, **constraints)

        return build

    def _on_run_clicked(self) -> None:
        if self.session.is_running():
            return
        try:
            build = self.spec_builder()
        except ValueError as exc:
            self.status_label.setText(f"Cannot start: {exc}.")
            return
        choice, base = self.form.base_combo.currentData(), self._base[1] if self._base else None
        self._user_chose_base = True  # the base of a tune stays chosen; the Profile tab no longer moves it
        self._objective_text = self.form.objective().describe()
        # the result is saved as a new version of the saved profile tuned, else as a new profile
        self._save_name = choice if choice not in (EDITED, DEMO) else (
            f"{getattr(self.ctx.state, 'profile_name', None) or (base.label if base else 'profile')} tuned")
        self._start(build, None, "Tune")

    def _on_resume_clicked(self) -> None:
        tune = self.resume_combo.currentData()
        if tune is None or self.session.is_running():
            return
        if tune.spec is None:
            self.status_label.setText(f"Tune #{tune.number or tune.id} has no stored spec: it cannot be resumed.")
            return
        spec = tune.spec.model_copy(update={"budget_s": float(self.form.budget_spin.value())})  # for what is left
        self._save_name = spec.label  # a saved profile's tune is labelled with its name
        self._objective_text = spec.objective.describe()
        self._start(lambda: spec, tune.id, f"Resuming tune #{tune.number or tune.id}")

    def _start(self, build, resume_tune_id, what: str) -> None:
        if not self.session.start(build, resume_tune_id):
            self.status_label.setText(f"{what} not started: a tune is running.")
            return
        self.trial_model.clear()
        self.chart_stack.show_content(False)
        self.result = None
        self.result_view.set_result(None)
        self.right_tabs.setCurrentIndex(0)
        self.progress.setValue(0)
        self.progress.setFormat("%p%")
        self._set_running(True)
        self.status_label.setText(f"{what}: starting…")

    def _on_cancel_clicked(self) -> None:
        if self.session.is_running():
            self.session.cancel()
            self.status_label.setText("Cancelling after the current request… (trials are kept: Resume continues)")

    def _set_running(self, running: bool) -> None:
        self.run_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        self.resume_button.setEnabled(not running and self.resume_combo.count() > 0)

    def is_running(self) -> bool:
        return self.session.is_running()

    def _y_label(self) -> str:
        row = OBJECTIVES.get(self.form.objective_combo.currentData())
        return row.label if row is not None else "score"

    def _on_session_progressed(self, fraction: float, text: str) -> None:
        if fraction >= 0:
            self.progress.setValue(int(fraction * 1000))
        self.status_label.setText(text)

    def _on_session_trials_recorded(self, trials: list) -> None:
        self.trial_model.add_trials(trials)
        self.chart.set_trials(self.trial_model.trials(), self._y_label())
        self.chart_stack.show_content(True)

    def _on_session_tune_succeeded(self, result: TuneResult) -> None:
        self.result = result
        if result.trials:
            self.trial_model.set_trials(list(result.trials))
            self.chart.set_trials(list(result.trials), self._y_label())
            self.chart_stack.show_content(True)
        self.result_view.set_result(result, self._save_name, self.trial_model.trials(), self._y_label(),
                                    self._objective_text)
        self.right_tabs.setCurrentWidget(self.result_view)
        self.progress.setValue(1000)
        self.status_label.setText(f"Tune #{result.tune_number or result.tune_id} finished: {result.verdict}. "
                                  f"{len(self.trial_model.trials())} trial(s) kept in the History.")

    def _on_session_tune_failed(self, exc) -> None:
        log.error("tune failed: %s", exc)
        self.status_label.setText(f"The tune failed: {exc}. Its trials are kept; check the log, then Resume or "
                                  "Run again.")

    def _on_session_tune_cancelled(self) -> None:
        self.progress.setFormat("cancelled at %p%")  # where it stopped (the session drops the runner's last 100 %)
        self.status_label.setText("Cancelled. The trials are kept: Resume continues this tune.")

    def _on_session_tune_finished(self) -> None:
        self._set_running(False)
        self.reload_choices()

    # -- the result's actions --------------------------------------------------------------------------
    def _on_result_save_requested(self, name: str) -> None:
        result = self.result
        if result is None:
            return
        engine = self.ctx.engine
        catalog = binaries.catalog_for(self.ctx.state.binaries.get(binaries.SERVER))
        self.result_view.save_button.setEnabled(False)
        self._job(lambda _ctl: save_result_profile(engine, name, result, catalog),
                  self._on_profile_saved, self._on_profile_save_failed, what="Saving the tune's profile")

    def _on_profile_saved(self, answer) -> None:
        saved, created = answer
        self.result_view.save_button.setEnabled(True)
        if not created:
            self.result_view.action_label.setText(f"{saved.name} version {saved.version} has these settings "
                                                  "already: no new version.")
            return
        self.result_view.action_label.setText(f"Saved {saved.name} version {saved.version}.")
        self.ctx.state.status_message_posted.emit(f"Saved {saved.name} version {saved.version} from the tune.")
        self.profile_saved.emit(saved)
        self.reload_choices()

    def _on_profile_save_failed(self, exc) -> None:
        self.result_view.save_button.setEnabled(True)
        self.result_view.action_label.setText(f"Could not save: {exc}")

    def shutdown(self) -> None:
        """Cancel a tune in progress (the runner stops its server; the trials stay for Resume)."""
        self._propose_timer.stop()
        self.session.cancel()
