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

from llm_tuner.core.tune import OBJECTIVES, TuneResult
from llm_tuner.qt.context import AppContext
from llm_tuner.qt.tune_models import TrialTableModel
from llm_tuner.qt.tune_session import TuneSession
from llm_tuner.qt.workers import state_run
from llm_tuner.services import binaries
from llm_tuner.state.benchmarks import ProfileFacts
from llm_tuner.state.tune import READY, Base, TuneState
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
        # the base, the knobs' proposal and candidates, the tune's progress and result (state/tune.py)
        self.state = TuneState(ctx.engine, profile=self._facts(), settings=lambda: ctx.settings,
                               run=state_run(self, "Reading the tunes, proposing knobs, planning candidates"))
        self.session = TuneSession(ctx, self)
        self.session.progressed.connect(self.state.progressed)
        self.session.trials_recorded.connect(self._on_session_trials_recorded)
        self.session.tune_succeeded.connect(self._on_session_tune_succeeded)
        self.session.tune_failed.connect(self._on_session_tune_failed)
        self.session.tune_cancelled.connect(self.state.cancelled)
        self.session.tune_finished.connect(self.state.finished)
        self.session.server_log_lines.connect(self.server_log_lines)
        self.server_log_lines.connect(ctx.state.server_log_lines_posted)  # the log dock (workspace)
        self.profile_saved.connect(ctx.state.profile_saved)  # the Profile tab's lists show the saved version
        ctx.state.tune_requested.connect(self.state.retune_for_build)  # Compare: re-tune for another build

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
        self.resume_combo.setToolTip("Tunes interrupted by Cancel, a quit or a crash keep their trials; so "
                                     "do tunes whose budget ran out before any candidate was measured")
        self.resume_button = QPushButton("Resume")
        self.resume_button.clicked.connect(self._on_resume_clicked)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.status_label = QLabel(READY)
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
        # the row stays narrow enough for a 1366 px window: the progress and the tune's name give way (its
        # list shows it whole)
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
        split.setStretchFactor(0, 1)  # the form and its knob table widen with the window (the reasons wrap)
        split.setStretchFactor(1, 1)
        split.setSizes([560, 440])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.addWidget(split)

        self.state.add_callback(self._on_tune_state_changed)
        ctx.state.profile_changed.connect(self._on_state_profile_changed)
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)
        self.reload_choices()
        self._set_running(False)

    @property
    def result(self) -> TuneResult | None:
        return self.state.result

    def _facts(self) -> ProfileFacts:
        st = self.ctx.state
        return ProfileFacts(st.profile, st.profile_name)

    def _base_now(self) -> Base:
        return Base(self.form.base_combo.currentData(), self.form.extra_edit.text())

    # -- binding ---------------------------------------------------------------------------------------
    def _on_tune_state_changed(self, what: str, *details: object) -> None:
        st = self.state
        if what == "choices":
            self._fill_choices()
        elif what == "running":
            self._set_running(st.running)
        elif what == "status":
            self.status_label.setText(st.status)
            self.progress.setValue(int(st.progress * 1000))
            self.progress.setFormat("cancelled at %p%" if st.progress_note else "%p%")
        elif what == "knobs_hint":
            self.form.knobs_hint.setText(str(details[0]))
        elif what == "knobs" and isinstance(details[0], list):
            self.form.set_proposed_knobs(details[0])
            self._on_candidates_check_requested()
        elif what == "candidates":
            if st.candidates_message:
                self.candidates.set_message(st.candidates_message)
            else:
                self.candidates.set_candidates(list(st.candidates))
        elif what == "result":
            self._show_result()
        elif what == "save_message":
            self.result_view.save_button.setEnabled(True)
            self.result_view.shown.message = str(details[0])
        elif what == "saved":
            saved = details[0]
            self.ctx.state.status_message_posted.emit(f"Saved {saved.name} version {saved.version} from the "
                                                      "tune.")
            self.profile_saved.emit(saved)

    # -- choices and the base --------------------------------------------------------------------------
    def reload_choices(self) -> None:
        """Saved profiles for the base combo, interrupted tunes for Resume (SQL off the GUI thread)."""
        self.state.reload_choices()

    def _fill_choices(self) -> None:
        st = self.state
        asked = st.requested_base if st.requested_base in st.profiles else None  # an older reload may lack it
        if asked is not None:
            st.requested_base = None
        self.form.set_base_choices(list(st.profiles), self.ctx.state.profile is not None,
                                   prefer=asked or st.preferred_base(self._facts()),
                                   keep=st.user_chose_base and asked is None)
        self.resume_combo.clear()
        for t in st.resumable:
            self.resume_combo.addItem(st.resumable_text(t), t)
        self.resume_button.setEnabled(self.resume_combo.count() > 0 and not self.session.is_running())
        self.resume_row.setVisible(self.resume_combo.count() > 0)

    def _on_base_changed(self, *_args) -> None:
        """Resolve the base and propose its knobs (a job: SQL and the model's header)."""
        f = self.form
        self.state.propose(self._base_now(), self._facts(), f.objective(), f.headroom_spin.value())

    def _on_candidates_check_requested(self) -> None:
        """The knobs as the form has them now, each value planned against the devices (a job: no server)."""
        self.state.plan_candidates(self.form.knobs(), self.form.headroom_spin.value(), self.form.objective())

    def _on_state_profile_changed(self, _profile) -> None:
        """A profile saved under a new name, or one being edited, changes the choices (reloaded from the
        store); edits to the profile chosen as "being edited" propose its knobs again once the edits pause."""
        if self.state.profile_changed(self._facts(), self._base_now()) == "propose":
            self._propose_timer.start()

    def _on_base_combo_activated(self, _index: int) -> None:
        self.state.user_chose_base = True  # a reload keeps this choice instead of following the Profile tab

    # -- running ------------------------------------------------------------------------------------
    def spec_builder(self):
        """A function for the job's thread that builds the TuneSpec from the form as it is now."""
        f = self.form
        return self.state.spec_builder(self._base_now(), self._facts(), f.objective(), f.knobs(),
                                       f.constraints())

    def _on_run_clicked(self) -> None:
        if self.session.is_running():
            return
        f = self.form
        build = self.state.prepare_run(self._base_now(), self._facts(), f.objective(), f.knobs(),
                                       f.constraints())
        if build is not None:
            self._start(build, None, "Tune")

    def _on_resume_clicked(self) -> None:
        tune = self.resume_combo.currentData()
        if self.session.is_running():
            return
        build = self.state.prepare_resume(tune, self.form.budget_spin.value())
        if build is not None:
            self._start(build, tune.id, f"Resuming tune #{tune.number or tune.id}")

    def _start(self, build, resume_tune_id, what: str) -> None:
        if not self.session.start(build, resume_tune_id):
            self.state.not_started(what)
            return
        self.trial_model.clear()
        self.chart_stack.show_content(False)
        self.right_tabs.setCurrentIndex(0)
        self.state.started(what)

    def _on_cancel_clicked(self) -> None:
        if self.session.is_running():
            self.session.cancel()
            self.state.cancelling()

    def _set_running(self, running: bool) -> None:
        self.run_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        self.resume_button.setEnabled(not running and self.resume_combo.count() > 0)

    def is_running(self) -> bool:
        return self.session.is_running()

    def _y_label(self) -> str:
        row = OBJECTIVES.get(self.form.objective_combo.currentData())
        return row.label if row is not None else "score"

    def _on_session_trials_recorded(self, trials: list) -> None:
        self.trial_model.add_trials(trials)
        self.chart.set_trials(self.trial_model.trials(), self._y_label())
        self.chart_stack.show_content(True)

    def _on_session_tune_succeeded(self, result: TuneResult) -> None:
        if result.trials:
            self.trial_model.set_trials(list(result.trials))
            self.chart.set_trials(list(result.trials), self._y_label())
            self.chart_stack.show_content(True)
        self.state.succeeded(result, len(self.trial_model.trials()))

    def _show_result(self) -> None:
        st = self.state
        result = st.result
        if result is None:
            self.result_view.set_result(None)
            return
        self.result_view.set_result(result, st.save_name, self.trial_model.trials(), self._y_label(),
                                    st.objective_text)
        self.right_tabs.setCurrentWidget(self.result_view)

    def _on_session_tune_failed(self, exc) -> None:
        log.error("tune failed: %s", exc)
        self.state.failed(exc)

    # -- the result's actions --------------------------------------------------------------------------
    def _on_result_save_requested(self, name: str) -> None:
        catalog = binaries.catalog_for(self.ctx.state.binaries.get(binaries.SERVER))
        if self.state.save_result(name, catalog):
            self.result_view.save_button.setEnabled(False)

    def shutdown(self) -> None:
        """Cancel a tune in progress (the runner stops its server; the trials stay for Resume)."""
        self._propose_timer.stop()
        self.session.cancel()
