"""The Compare tab's "vs another build" row: one saved profile on its own llama-server (A) and on another
build (B), interleaved A B A B on the real server path (services.bench.builds), heat-gated on GPUs; the pooled
sides are then shown by the Compare panel (verdict, interval, flags and build rows, heat warning). When the
profile is slower on B by more than the noise, "Re-tune for this build" asks the Tune tab (through the
workspace's `request_tune`) for a tune of that profile run by build B. Widgets only: the rules and words are
state.compare_builds.BuildsAB's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QWidget,
)

from llm_tuner.core.bench_spec import BenchSpec
from llm_tuner.qt.bench_session import BenchSession
from llm_tuner.qt.context import AppContext
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.services.bench.builds import BuildsVerdict
from llm_tuner.state.compare_builds import BUILDS_SPEC, BuildsAB
from llm_tuner.store.profiles import ProfileRepository


class BuildsRow(QWidget):
    """Profile + another llama-server + rounds -> Run; `shown(verdict)` gets the result on the GUI thread."""

    def __init__(
        self, ctx: AppContext, shown: Callable[[BuildsVerdict], None], parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self._shown = shown
        self.state = BuildsAB(ProfileRepository(ctx.engine), ctx.state.workspace,
                              settings=lambda: ctx.settings, run=self._run)
        self.session = BenchSession(ctx, parent=self)
        self.profile_combo = QComboBox()
        self.profile_combo.setMinimumWidth(180)
        self.binary_edit = QLineEdit()
        self.binary_edit.setPlaceholderText("another llama-server (a newer or older build)")
        self.browse_button = QPushButton("Browse…")
        self.browse_button.clicked.connect(self._on_browse_clicked)
        self.rounds_spin = QSpinBox()
        self.rounds_spin.setRange(1, 10)
        self.rounds_spin.setValue(2)
        self.rounds_spin.setPrefix("rounds ")
        self.run_button = QPushButton("Run A/B")
        self.run_button.setToolTip(
            "the profile on its own llama-server (A) and on this one (B), A B A B; on GPUs "
            "each run waits until they are back near the temperature the A/B began at"
        )
        self.run_button.clicked.connect(self._on_run_clicked)
        self.status_label = QLabel("")
        # the verdict is shown in full below the row: its line here never squeezes the path field
        self.status_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.retune_button = QPushButton("Re-tune for this build")
        self.retune_button.setVisible(False)
        self.retune_button.clicked.connect(self._on_retune_clicked)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(QLabel("vs another build:"))
        lay.addWidget(self.profile_combo)
        lay.addWidget(self.binary_edit, 1)
        lay.addWidget(self.browse_button)
        lay.addWidget(self.rounds_spin)
        lay.addWidget(self.run_button)
        lay.addWidget(self.status_label, 1)
        lay.addWidget(self.retune_button)
        self.session.progressed.connect(self._on_session_progressed)
        self.session.run_succeeded.connect(self._on_session_run_succeeded)
        self.session.run_failed.connect(self._on_session_run_failed)
        self.session.run_finished.connect(self._on_session_run_finished)
        self.state.add_callback(self._on_state_changed)
        self.refresh_profiles()

    def _run(self, work, done, failed) -> None:
        job = BackgroundJob(lambda _ctl: work(), self, what="Loading the saved profiles", on_failed=failed)
        job.succeeded.connect(done)
        job.start()
        self._names_job = job

    def _on_state_changed(self, what: str, *_details) -> None:
        st = self.state
        if what == "names":
            self._show_names(st.names)
        elif what == "status":
            self.status_label.setText(st.status)
            self.status_label.setToolTip(st.status_tip)
        elif what == "running":
            self.run_button.setEnabled(not st.running)
        elif what == "retune":
            self.retune_button.setVisible(st.retune is not None)
            self.retune_button.setToolTip(st.retune_tip)

    def refresh_profiles(self) -> None:
        self.state.load_names()

    def _show_names(self, names) -> None:
        keep = self.profile_combo.currentText()
        self.profile_combo.clear()
        self.profile_combo.addItems(list(names))
        if keep in names:
            self.profile_combo.setCurrentText(keep)

    def _on_browse_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Another llama-server", str(Path.home()), "All files (*)")
        if path:
            self.binary_edit.setText(path)

    def start(self, name: str, other: str, rounds: int, spec: BenchSpec = BUILDS_SPEC) -> bool:
        """Measure profile `name` against the build at `other` (the user chose it: that confirms it may
        run)."""
        work = self.state.ab_work(name, other, rounds, spec)
        if work is None:
            return False
        started = self.session.start(work)
        if started:
            self.state.started(name, other)
        return started

    def show_verdict(self, verdict: BuildsVerdict, name: str, other: str) -> None:
        """Show the A/B of profile `name` against the build at `other` (the panel shows it in full), and
        offer a re-tune for that build when the profile is slower there by more than the noise."""
        self.state.show_verdict(verdict, name, other)
        self._shown(verdict)

    def _on_retune_clicked(self) -> None:
        self.state.ask_retune()

    def _on_run_clicked(self) -> None:
        self.start(self.profile_combo.currentText(), self.binary_edit.text(), self.rounds_spin.value())

    def _on_session_progressed(self, _fraction: float, text: str) -> None:
        self.state.progressed(text)

    def _on_session_run_succeeded(self, verdict) -> None:
        self.show_verdict(verdict, *self.state.pending)

    def _on_session_run_failed(self, exc) -> None:
        self.state.failed(exc)

    def _on_session_run_finished(self) -> None:
        self.state.finished()
