"""The Compare tab's "vs another build" row: one saved profile on its own llama-server (A) and on another
build (B), interleaved A B A B on the real server path (services.bench.builds), heat-gated on GPUs; the pooled
sides are then shown by the Compare panel (verdict, interval, flags and build rows, heat warning). When the
profile is slower on B by more than the noise, "Re-tune for this build" asks the Tune tab (through the shared
state's `tune_requested`) for a tune of that profile run by build B."""

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
from llm_tuner.services import binaries
from llm_tuner.services.bench import target_from_profile
from llm_tuner.services.bench.builds import BuildsVerdict, builds_ab, builds_verdict
from llm_tuner.store.profiles import ProfileRepository

# What a build A/B from the window measures: short, like the Benchmarks tab's default
BUILDS_SPEC = BenchSpec(prompt_tokens=(512,), gen_tokens=128, reps=3, warmup=1)


class BuildsRow(QWidget):
    """Profile + another llama-server + rounds -> Run; `shown(verdict)` gets the result on the GUI thread."""

    def __init__(
        self, ctx: AppContext, shown: Callable[[BuildsVerdict], None], parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self._shown = shown
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
        self._pending: tuple[str, str] = ("", "")  # the profile and build of the A/B running
        self._retune: tuple[str, str] | None = None  # the profile and build a re-tune is offered for
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
        self.refresh_profiles()

    def refresh_profiles(self) -> None:
        engine = self.ctx.engine
        job = BackgroundJob(lambda _ctl: ProfileRepository(engine).names(), what="Loading the saved profiles")
        job.succeeded.connect(self._on_profiles_loaded)
        job.start()
        self._names_job = job

    def _on_profiles_loaded(self, names) -> None:
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
        if not name or not other.strip():
            self.status_label.setText("Choose a saved profile and another llama-server first.")
            return False
        engine, settings = self.ctx.engine, self.ctx.settings

        def work(runner, progress, cancelled):
            saved = ProfileRepository(engine).latest(name)
            if saved is None:
                raise ValueError(f"no saved profile named {name!r}")
            binaries.check_executable(Path(other))
            runner.settings = binaries.trust_binary(other, settings, save=False)
            group_id, runs = builds_ab(
                runner,
                target_from_profile(saved),
                spec,
                other,
                rounds=rounds,
                progress=progress,
                cancelled=cancelled,
            )
            return builds_verdict(runs, group_id, getattr(settings, "ab_threshold_pct", 2.0))

        started = self.session.start(work)
        if started:
            self._pending = (name, other.strip())
            self.run_button.setEnabled(False)
            self.retune_button.setVisible(False)
            self.status_label.setText("starting…")
        return started

    def show_verdict(self, verdict: BuildsVerdict, name: str, other: str) -> None:
        """Show the A/B of profile `name` against the build at `other`, and offer a re-tune for that build
        when the profile is slower there by more than the noise."""
        self.status_label.setText("done: " + verdict.text[:200])
        self.status_label.setToolTip(verdict.text)
        self._shown(verdict)
        self._retune = (name, other) if verdict.b_slower and name and other else None
        self.retune_button.setVisible(self._retune is not None)
        if self._retune is not None:
            self.retune_button.setToolTip(
                f"{name} is slower on this build by more than the noise: the settings tuned before may no "
                f"longer be best. Opens the Tune tab with {name} as the base, run by {other}."
            )

    def _on_retune_clicked(self) -> None:
        if self._retune is not None:
            self.ctx.state.tune_requested.emit(*self._retune)

    def _on_run_clicked(self) -> None:
        self.start(self.profile_combo.currentText(), self.binary_edit.text(), self.rounds_spin.value())

    def _on_session_progressed(self, _fraction: float, text: str) -> None:
        self.status_label.setText(text[:160])

    def _on_session_run_succeeded(self, verdict) -> None:
        self.show_verdict(verdict, *self._pending)

    def _on_session_run_failed(self, exc) -> None:
        self.status_label.setText(f"The build A/B failed: {exc}")

    def _on_session_run_finished(self) -> None:
        self.run_button.setEnabled(True)
