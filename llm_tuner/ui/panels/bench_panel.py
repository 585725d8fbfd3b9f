"""Benchmarks panel: benchmark the edited profile (or the demo model) on the real server path, and the
History of every run (filter, sort, re-run, delete, export, send two runs to Compare)."""

from __future__ import annotations

import logging
import shlex
from pathlib import Path

from PySide6.QtCore import QCoreApplication, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core.bench_report import metric_label, metric_samples, pooled, run_summary, speculative_ab
from llm_tuner.core.bench_spec import BenchRun, BenchSpec
from llm_tuner.qt.bench_models import SummaryTableModel
from llm_tuner.qt.bench_session import BenchSession, parse_sweep_values, run_notes
from llm_tuner.qt.context import AppContext
from llm_tuner.qt.workers import state_run
from llm_tuner.services import bench as bench_service
from llm_tuner.services.demo_model import find_demo_model
from llm_tuner.services.preflight import refusal_text
from llm_tuner.services.router_bench import bench_router_models
from llm_tuner.services.speed import load_basis
from llm_tuner.state.bench import BenchSpeed
from llm_tuner.state.speed import SpeedModel
from llm_tuner.store.profiles import ProfileRepository
from llm_tuner.store.runs import RunRepository
from llm_tuner.ui.panels.bench_history import RunHistoryTab
from llm_tuner.ui.panels.bench_tables import make_table
from llm_tuner.ui.plots.bench_plots import ErrorBarChart, HintStack, SweepChart, run_chart_groups
from llm_tuner.ui.shortcuts import with_shortcut
from llm_tuner.ui.widgets import ElidedLabel

log = logging.getLogger(__name__)


class BenchPanel(QWidget):
    """Spec form + Run/Cancel with progress and time left + results; History below in its own tab."""

    server_log_lines = Signal(list)  # logparse.LogLine of the server a benchmark starts (for the log dock)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.repo = RunRepository(ctx.engine)
        self._profile_store = None  # see follow_profile_store
        self._waiting_for = None  # the Run/Sweep action waiting for the profile store to settle
        self.last_run: BenchRun | None = None
        self.session = BenchSession(ctx, self.repo, self)
        self.session.progressed.connect(self._on_session_progressed)
        self.session.run_succeeded.connect(self._on_session_run_succeeded)
        self.session.run_failed.connect(self._on_session_run_failed)
        self.session.run_cancelled.connect(self._on_session_run_cancelled)
        self.session.run_finished.connect(self._on_session_run_finished)
        self.session.server_log_lines.connect(self.server_log_lines)
        # measured vs predicted after a run, and the calibration each run refines (state.bench)
        run = state_run(self, "Predicting the run's speed")
        self.bench_speed = BenchSpeed(SpeedModel(lambda: load_basis(ctx.engine), run=run), ctx.engine,
                                      inventory=lambda: ctx.state.inventory, run=run)
        self.bench_speed.add_callback(self._on_bench_speed_changed)

        self.history = RunHistoryTab(ctx, self.repo)
        self.history.run_opened.connect(self._on_history_run_opened)
        self.history.rerun_requested.connect(self._on_history_rerun_requested)
        # the names the window, the quick start and the tests use
        self.history_model, self.history_view = self.history.model, self.history.view
        self.rerun_button, self.delete_button = self.history.rerun_button, self.history.delete_button
        self.history_hint = self.history.hint

        self.tabs = QTabWidget()
        self.tabs.addTab(self._build_run_tab(), "Run")
        self.tabs.addTab(self.history, "History")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.addWidget(self.tabs)

        ctx.state.profile_changed.connect(self._on_state_profile_changed)
        # the workspace's wiring (no other panel reaches in): the log dock, the profile store, Server ▸ Benchmark
        self.server_log_lines.connect(ctx.state.server_log_lines_posted)
        self.follow_profile_store(ctx.state)
        ctx.state.benchmark_requested.connect(self._on_state_benchmark_requested)
        with_shortcut(self.run_button, "benchmark")
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)
        self._update_target_label()
        self.history.mark_interrupted_then_refresh()

    # -- construction ------------------------------------------------------------------------
    def _build_run_tab(self) -> QWidget:
        w = QWidget()
        target_box = QGroupBox("What to benchmark")
        tf = QFormLayout(target_box)
        self.target_label = ElidedLabel()  # one line: a long profile name must not push the form down
        self.label_edit = QLineEdit()
        self.label_edit.setPlaceholderText("name for this run, e.g. ub512 (default: the profile's name)")
        self.extra_edit = QLineEdit()
        self.extra_edit.setPlaceholderText("extra llama-server flags for this run, e.g. -ub 256 -fa on")
        self.url_edit = QLineEdit()
        self.url_edit.setPlaceholderText("optional: http://127.0.0.1:8080 to benchmark a server you started")
        tf.addRow("Server:", self.target_label)
        tf.addRow("Run name:", self.label_edit)
        tf.addRow("Extra flags:", self.extra_edit)
        tf.addRow("Attach to URL:", self.url_edit)
        self.router_model_edit = QLineEdit()
        self.router_model_edit.setObjectName("router_model_edit")
        self.router_model_edit.setPlaceholderText("a router's model, e.g. gemma-3-270m (router mode: no -m)")
        self.router_model_edit.setToolTip("For a server in router mode (--models-dir / --models-preset): the model "
                                          "measured, by its name in Live's Models tab. Each request names it; the "
                                          "run records that model's name and file.")
        tf.addRow("Router model:", self.router_model_edit)
        self.binary_edit = QLineEdit()
        self.binary_edit.setPlaceholderText("optional: another llama-server (an upgrade, a fork) for an A/B across builds")
        self.binary_edit.setToolTip("This run starts this program instead of the profile's (or Settings') "
                                    "llama-server; the run records its path and version, and Compare lists them.")
        tf.addRow("llama-server binary:", self.binary_edit)

        spec_box = QGroupBox("Benchmark")
        sf = QFormLayout(spec_box)
        self.prompt_edit = QLineEdit("512")
        self.prompt_edit.setToolTip("prompt lengths in tokens, comma-separated (each prompt has exactly this many)")
        self.gen_spin = self._spin(0, 32768, 128, " tokens")
        self.reps_spin = self._spin(1, 100, 3, "")
        self.warmup_spin = self._spin(0, 20, 1, "")
        self.cache_combo = QComboBox()
        self.cache_combo.addItems(["cold (prompt reprocessed)", "warm (prompt cached)"])
        self.depth_spin = self._spin(0, 1_000_000, 0, " tokens")
        self.clients_spin = self._spin(1, 64, 1, "")
        self.prompt_file_edit = QLineEdit()
        self.prompt_file_edit.setPlaceholderText("default: shipped prose + code (llm_tuner/data/prompts)")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._on_browse_clicked)
        pf = QHBoxLayout()
        pf.addWidget(self.prompt_file_edit)
        pf.addWidget(browse)
        self.llama_bench_check = QCheckBox("also run llama-bench")
        self.llama_bench_check.setToolTip("llama-bench with the same settings, before the server: its speeds beside "
                                          "the server's show what the server adds")
        sf.addRow("Prompt lengths:", self.prompt_edit)
        sf.addRow("Generated tokens:", self.gen_spin)
        sf.addRow("Repetitions:", self.reps_spin)
        sf.addRow("Warm-up requests:", self.warmup_spin)
        sf.addRow("Prompt cache:", self.cache_combo)
        sf.addRow("Context depth:", self.depth_spin)
        sf.addRow("Concurrent clients:", self.clients_spin)
        sf.addRow("Prompt text:", pf)
        sf.addRow("", self.llama_bench_check)
        self.sweep_param_edit = QLineEdit()
        self.sweep_param_edit.setPlaceholderText("flag, e.g. -ub")
        self.sweep_values_edit = QLineEdit()
        self.sweep_values_edit.setPlaceholderText("values, e.g. 256,512,1024 (';' between values containing ',')")
        sw = QHBoxLayout()
        sw.addWidget(self.sweep_param_edit, 1)
        sw.addWidget(self.sweep_values_edit, 3)
        sf.addRow("Sweep:", sw)

        self.run_button = QPushButton("Run benchmark")
        self.run_button.clicked.connect(self._on_run_clicked)
        self.sweep_button = QPushButton("Run sweep")
        self.sweep_button.clicked.connect(self._on_sweep_clicked)
        self.spec_ab_button = QPushButton("A/B vs no drafting")
        self.spec_ab_button.setToolTip("The profile as it is and with --spec-type none, interleaved over two rounds: "
                                       "speculative decoding's measured speed-up beside its ceiling")
        self.spec_ab_button.clicked.connect(self._on_spec_ab_clicked)
        self.router_all_button = QPushButton("Every router model")  # services.router_bench: side by side
        self.router_all_button.setToolTip("A router (no -m): measure each of its models with this spec, one after "
                                          "another, shown side by side")
        self.router_all_button.clicked.connect(self._on_router_all_clicked)
        self.anyway_button = QPushButton("Run anyway")  # shown when Run was refused for the profile's advice errors
        self.anyway_button.setToolTip("Start the server despite the errors (a fork may accept what this build refuses)")
        self.anyway_button.hide()
        self.anyway_button.clicked.connect(self._on_anyway_clicked)
        self._force = False
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self._on_cancel_clicked)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.status_label = QLabel("Set the benchmark and press Run. Every run is kept in the History.")
        self.status_label.setWordWrap(True)
        buttons = QHBoxLayout()
        for b in (self.run_button, self.anyway_button, self.sweep_button, self.spec_ab_button, self.cancel_button):
            buttons.addWidget(b)
        buttons.insertWidget(buttons.indexOf(self.cancel_button), self.router_all_button)
        buttons.addWidget(self.progress, 1)

        self.summary_model = SummaryTableModel(self)
        self.summary_view, _ = make_table(self.summary_model, stretch=0)
        self.gap_label = QLabel()
        self.gap_label.setWordWrap(True)
        self.gap_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.chart = ErrorBarChart()
        self.chart_combo = QComboBox()
        self.chart_combo.currentIndexChanged.connect(self._on_chart_combo_changed)
        self.chart_stack = HintStack.chart_with_picker(self.chart_combo, self.chart, "Run a benchmark to see its chart.")

        left = QWidget()
        ll = QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.addWidget(target_box)
        ll.addWidget(spec_box)
        ll.addStretch(1)
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        result_title = QLabel("Result of the last run (the server's own timings; TTFT and latency by the client):")
        result_title.setWordWrap(True)  # not the results column's minimum width
        rl.addWidget(result_title)
        rl.addWidget(self.summary_view, 2)
        rl.addWidget(self.gap_label)
        self.speed_label = QLabel()  # measured vs predicted, the roofline's share, what the calibration learnt
        self.speed_label.setObjectName("speed_vs_predicted")
        self.speed_label.setWordWrap(True)
        self.speed_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.speed_label.hide()
        rl.addWidget(self.speed_label)
        rl.addWidget(self.chart_stack, 2)
        self.sweep_box = QGroupBox("Sweep: median ± IQR per value")
        sl = QVBoxLayout(self.sweep_box)
        self.sweep_chart = SweepChart()
        self.sweep_table = QTableWidget(0, 0)
        self.sweep_table.verticalHeader().setVisible(False)
        sl.addWidget(self.sweep_chart, 2)
        sl.addWidget(self.sweep_table, 1)
        self.sweep_box.setVisible(False)
        rl.addWidget(self.sweep_box, 3)
        form_scroll = QScrollArea()  # the form scrolls on small screens (1366x768) instead of widening the window
        form_scroll.setWidgetResizable(True)
        form_scroll.setFrameShape(QFrame.Shape.NoFrame)
        form_scroll.setWidget(left)
        form_scroll.setMinimumWidth(320)
        self._form_scroll = form_scroll
        form_side = QWidget()  # Run/Cancel and the status stay in sight below the scrolling form
        fl = QVBoxLayout(form_side)
        fl.setContentsMargins(0, 0, 0, 0)
        fl.addWidget(form_scroll, 1)
        fl.addLayout(buttons)
        fl.addWidget(self.status_label)
        self.run_split = QSplitter()
        self.run_split.addWidget(form_side)
        self.run_split.addWidget(right)
        self.run_split.setStretchFactor(1, 1)
        self.run_split.setSizes([560, 440])  # the form first: the results widen after a run (_fit_results_width)
        lay = QVBoxLayout(w)
        lay.addWidget(self.run_split)
        return w

    def _fit_results_width(self) -> None:
        """Widen the results side so the summary table shows whole metric names, taking the width from the
        form down to the width its rows need; never narrows the results."""
        view, header = self.summary_view, self.summary_view.horizontalHeader()
        need = (sum(max(view.sizeHintForColumn(c), header.sectionSizeHint(c)) for c in range(header.count()))
                + view.verticalScrollBar().sizeHint().width() + 2 * view.frameWidth() + 8)
        form, results = self.run_split.sizes()
        spare = form - max(self._form_scroll.widget().minimumSizeHint().width()
                           + self._form_scroll.verticalScrollBar().sizeHint().width(),
                           self.run_split.widget(0).minimumSizeHint().width())  # the form never clips
        give = min(need - view.width(), spare)
        if give > 0:
            self.run_split.setSizes([form - give, results + give])

    @staticmethod
    def _spin(lo: int, hi: int, value: int, suffix: str) -> QSpinBox:
        s = QSpinBox()
        s.setRange(lo, hi)
        s.setValue(value)
        s.setSuffix(suffix)
        return s

    # -- what to run -------------------------------------------------------------------------
    def spec(self) -> BenchSpec:
        lengths = tuple(int(x) for x in self.prompt_edit.text().replace(" ", "").split(",") if x)
        return BenchSpec(prompt_tokens=lengths, gen_tokens=self.gen_spin.value(), reps=self.reps_spin.value(),
                         warmup=self.warmup_spin.value(), warm_cache=self.cache_combo.currentIndex() == 1,
                         depth=self.depth_spin.value(), clients=self.clients_spin.value(),
                         prompt_file=self.prompt_file_edit.text().strip() or None,
                         llama_bench=self.llama_bench_check.isChecked(),
                         model=self.router_model_edit.text().strip() or None)

    def target(self) -> bench_service.ServerTarget:
        """What Run benchmarks, read from the form and the shared state (no SQL: a profile's saved version id
        is filled in on the worker thread by `_resolve_profile_version`)."""
        url = self.url_edit.text().strip()
        label = self.label_edit.text().strip()
        if url:
            return bench_service.ServerTarget(attached_url=url, label=label or url)
        profile = self.ctx.state.profile
        problem = self.ctx.state.profile_problem
        if profile is not None and problem:
            raise bench_service.BenchError(problem)
        errors = self.ctx.state.profile_errors if profile is not None and not self._force else []
        self.anyway_button.setVisible(bool(errors))
        if errors:  # what would fail is not started only to read "ConnectError"

            raise bench_service.BenchError(refusal_text(errors, "Run anyway"))
        if profile is not None:
            name = getattr(self.ctx.state, "profile_name", None)
            target = bench_service.target_from_profile(profile, label=label or name or "unsaved profile")
        else:
            model = find_demo_model()
            if model is None:
                raise bench_service.BenchError("No profile yet and the demo model is missing: edit a profile in the "
                                               "Profile tab, or run `python -m llm_tuner.services.demo_model`.")
            target = bench_service.demo_target(model)
            if label:
                target.label = label
        binary = self.binary_edit.text().strip()
        if binary:
            target.binary = binary
        extra = shlex.split(self.extra_edit.text())
        if extra:
            target.argv = list(target.argv) + extra
            if not label:
                target.label = f"{target.label} {' '.join(extra)}"
        return target

    def _version_resolver(self, target: bench_service.ServerTarget):
        """A function for the worker thread that points `target` at the saved version of the edited profile,
        or marks its label "(unsaved edits)" when the editor differs from the newest saved version."""
        profile = self.ctx.state.profile
        name = getattr(self.ctx.state, "profile_name", None)
        if target.attached_url or profile is None or not name:
            return lambda: target
        engine, named_by_profile = self.ctx.engine, not self.label_edit.text().strip()

        def resolve() -> bench_service.ServerTarget:
            saved = ProfileRepository(engine).latest(name)
            if saved is not None and saved.profile == profile:
                target.profile_version_id = saved.version_id
            elif named_by_profile and target.label.startswith(name):
                target.label = f"{name} (unsaved edits){target.label[len(name):]}"
            return target

        return resolve

    def _update_target_label(self) -> None:
        profile = self.ctx.state.profile
        if profile is not None:
            name = getattr(self.ctx.state, "profile_name", None) or "the unsaved profile"
            self.target_label.set_parts("", name, ", as edited in the Profile tab")
        else:
            model = find_demo_model()
            self.target_label.set_parts("", f"demo model {model.name} with default flags (no profile edited yet)"
                                        if model else "no profile and no demo model: edit a profile first")

    def _on_state_profile_changed(self, _profile) -> None:
        self._update_target_label()

    # -- running (qt/bench_session.BenchSession) ------------------------------------------------
    def _start(self, work, what: str) -> None:
        if not self.session.start(work):
            self.status_label.setText(f"{what} not started: a benchmark is running; cancel it or let it finish.")
            return
        self.progress.setValue(0)
        self.progress.setFormat("%p%")
        self._set_running(True)
        self.status_label.setText(f"{what}: starting…")

    def _read_form(self):
        try:
            spec, target = self.spec(), self.target()
        except (ValueError, bench_service.BenchError) as exc:
            text = str(exc).splitlines()[-1] if "validation error" in str(exc) else str(exc)
            self.status_label.setText(f"Cannot start: {text}")
            return None
        return spec, target, self._version_resolver(target)

    # A profile saved just before Run is still on its way to the store (ProfilePanel saves on a worker
    # thread): Run waits for the store to settle so the run points at that saved version.
    def follow_profile_store(self, store) -> None:
        """Wait for `store` (an object with `store_busy` and a `store_settled` signal, i.e. the ProfilePanel)
        before a Run or Sweep reads the saved profile version."""
        self._profile_store = store

    def _after_profile_store_settles(self, action) -> bool:
        """True when the profile store is busy: `action` runs again once it has settled."""
        store = self._profile_store
        if store is None or not bool(getattr(store, "store_busy", False)):
            return False
        if self._waiting_for is None:
            store.store_settled.connect(self._on_profile_store_settled)
        self._waiting_for = action
        self._set_running(True)
        self.status_label.setText("Waiting for the profile save to finish…")
        return True

    def _on_profile_store_settled(self) -> None:
        self._profile_store.store_settled.disconnect(self._on_profile_store_settled)
        action, self._waiting_for = self._waiting_for, None
        self._set_running(False)
        if action is not None:
            action()

    def _on_anyway_clicked(self) -> None:
        """Run the benchmark the advice errors stopped (a fork's flags, a check that is wrong here)."""
        self._force = True
        try:
            self._on_run_clicked()
        finally:
            self._force = False
        self.anyway_button.hide()

    def _on_run_clicked(self) -> None:
        if self.session.is_running() or self._after_profile_store_settles(self._on_run_clicked):
            return
        form = self._read_form()
        if form is None:
            return
        spec, _target, resolve = form
        self._start(lambda runner, progress, cancelled: runner.run(resolve(), spec, progress=progress,
                                                                    cancelled=cancelled).run, "Benchmark")

    def _on_sweep_clicked(self) -> None:
        if self.session.is_running() or self._after_profile_store_settles(self._on_sweep_clicked):
            return
        form = self._read_form()
        if form is None:
            return
        spec, target, resolve = form
        flag = self.sweep_param_edit.text().strip()
        values = parse_sweep_values(self.sweep_values_edit.text())
        if not flag or not values or target.attached_url:
            self.status_label.setText("A sweep needs a flag, at least one value, and a server the app starts "
                                      "(not an attached URL).")
            return
        self._start(lambda runner, progress, cancelled: runner.sweep(resolve(), spec, flag, values, progress=progress,
                                                                      cancelled=cancelled)[1], "Sweep")

    def _on_spec_ab_clicked(self) -> None:
        if self.session.is_running() or self._after_profile_store_settles(self._on_spec_ab_clicked):
            return
        form = self._read_form()
        if form is None:
            return
        spec, target, resolve = form
        if target.attached_url:
            self.status_label.setText("An A/B against no drafting restarts the server: not with an attached URL.")
            return
        self._start(lambda runner, progress, cancelled: runner.speculative_ab(resolve(), spec, progress=progress,
                                                                               cancelled=cancelled), "A/B vs no drafting")

    def _on_router_all_clicked(self) -> None:
        if self.session.is_running() or self._after_profile_store_settles(self._on_router_all_clicked):
            return
        form = self._read_form()
        if form is not None:
            spec, _target, resolve = form
            self._start(lambda runner, progress, cancelled: bench_router_models(
                runner, resolve(), spec, progress=progress, cancelled=cancelled)[1], "Every router model")

    def _on_cancel_clicked(self) -> None:
        if self._waiting_for is not None:
            self._profile_store.store_settled.disconnect(self._on_profile_store_settled)
            self._waiting_for = None
            self._set_running(False)
            self.status_label.setText("Cancelled before the benchmark started.")
            return
        if self.session.is_running():
            self.session.cancel()
            self.status_label.setText("Cancelling after the current request…")

    def _set_running(self, running: bool) -> None:
        self.run_button.setEnabled(not running)
        self.sweep_button.setEnabled(not running)
        self.spec_ab_button.setEnabled(not running)
        self.router_all_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)

    def _on_state_benchmark_requested(self) -> None:
        """Server ▸ Benchmark (Ctrl+B): run the edited profile, unless a run is going already."""
        self.tabs.setCurrentIndex(0)
        if not self.is_running():
            self.run_button.click()

    def is_running(self) -> bool:
        """True while a benchmark runs or waits for a profile save to finish."""
        return self.session.is_running() or self._waiting_for is not None

    def _on_session_progressed(self, fraction: float, text: str) -> None:
        if fraction >= 0:
            self.progress.setValue(int(fraction * 1000))
        self.status_label.setText(text)

    def _on_session_run_succeeded(self, result) -> None:
        runs = result if isinstance(result, list) else [result]
        if isinstance(result, list):
            self.show_sweep(runs)
        if runs:
            ab = speculative_ab(runs) if isinstance(result, list) else None
            self.show_run(pooled([r for r in runs if r.sweep_value != "none"]) if ab else runs[-1], finished=True)
            if ab:  # the drafting side's rounds pooled, its figures, then the measured speed-up
                self.gap_label.setText(self.gap_label.text() + "\n" + ab["text"])
            bad = [r for r in runs if r.status != "complete"]
            if bad:
                self.status_label.setText(f"Run {bad[0].id} {bad[0].status}: {bad[0].error or ''}")
            else:
                self.status_label.setText(f"Run{'s' if len(runs) > 1 else ''} "
                                          f"{', '.join(str(r.id) for r in runs)} complete. "
                                          "Compare runs in the Compare tab.")

    def _on_session_run_failed(self, exc) -> None:
        log.error("benchmark failed: %s", exc)
        self.status_label.setText(f"The benchmark failed: {exc}. Check the flags and the log, then try again.")

    def _on_session_run_cancelled(self) -> None:
        self.progress.setFormat("cancelled at %p%")  # where it stopped (the session drops the runner's last 100 %)
        self.status_label.setText("Cancelled. Finished repetitions are kept in the History.")

    def _on_session_run_finished(self) -> None:
        self._set_running(False)

    def show_run(self, run: BenchRun, *, finished: bool = False) -> None:
        """A run's results; `finished`: it just ran here (its speed refines the calibration)."""
        self.last_run = run
        self.speed_label.hide()
        (self.bench_speed.after_run if finished else self.bench_speed.show_run)(run)
        self.summary_model.set_run(run)
        self._fit_results_width()
        self.gap_label.setText("\n".join(run_notes(run)))
        self._chart_groups = run_chart_groups([run])
        self.chart_combo.blockSignals(True)
        self.chart_combo.clear()
        self.chart_combo.addItems([f"{t} ({u})" for t, u, _, _ in self._chart_groups])
        self.chart_combo.blockSignals(False)
        self.chart_stack.show_content(bool(self._chart_groups), None if self._chart_groups else
                                      f"Run {run.id} has no prefill, generation or first-token timings to chart.")
        self._on_chart_combo_changed(0)

    def show_sweep(self, runs: list[BenchRun]) -> None:
        """A sweep's runs (one per value): generation and prefill medians ± IQR against the value."""
        self.sweep_box.setVisible(bool(runs))
        if not runs:
            return
        values = [r.sweep_value or str(r.id) for r in runs]
        samples = [run_summary(r)["metrics"] for r in runs]
        raw = [metric_samples(r) for r in runs]
        names = [n for n in raw[0] if n.startswith(("prefill_tps@", "gen_tps@"))]
        self.sweep_chart.set_data(values, [(metric_label(n), [list(m[n].values) if n in m else [] for m in raw])
                                           for n in names if n.startswith("gen_tps@")], "t/s")
        self.sweep_table.setColumnCount(1 + len(names))
        self.sweep_table.setHorizontalHeaderLabels(["Value", *[metric_label(n) for n in names]])
        self.sweep_table.setRowCount(len(runs))
        for i, (v, m) in enumerate(zip(values, samples, strict=True)):
            self.sweep_table.setItem(i, 0, QTableWidgetItem(f"{v} ({runs[i].status})"))
            for j, n in enumerate(names):
                s = m.get(n)
                text = "–" if not s or "median" not in s else f"{s['median']:.1f} (IQR {s['iqr']:.1f}, n={s['n']})"
                self.sweep_table.setItem(i, j + 1, QTableWidgetItem(text))
        self.sweep_table.resizeColumnsToContents()  # whole metric names in the headers (the table scrolls sideways)

    # -- the predicted speed (state.bench) ---------------------------------------------------------------
    def _on_bench_speed_changed(self, _what: str) -> None:
        st = self.bench_speed
        if self.last_run is None or st.run_id != self.last_run.id:
            return
        self.speed_label.setText(st.text())
        self.speed_label.setVisible(bool(st.text()))
        if st.refit_line:
            self.ctx.state.bench_runs_changed.emit()  # the Plan and the Profile read the refined calibration

    def _on_chart_combo_changed(self, index: int) -> None:
        groups = getattr(self, "_chart_groups", [])
        if 0 <= index < len(groups):
            _title, unit, cats, series = groups[index]
            self.chart.set_data(cats, series, unit)

    def _on_browse_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Prompt text", "", "Text (*.txt *.md *.py *.cpp);;All files (*)")
        if path:
            self.prompt_file_edit.setText(path)

    # -- history (bench_history.RunHistoryTab) -------------------------------------------------------
    def refresh_history(self) -> None:
        self.history.refresh()

    def selected_runs(self) -> list[BenchRun]:
        return self.history.selected_runs()

    def export_runs(self, runs: list[BenchRun], folder: Path, fmt: str) -> list[Path]:
        return self.history.export_runs(runs, folder, fmt)

    def _on_history_run_opened(self, run: BenchRun, group: list[BenchRun]) -> None:
        self.show_run(run)
        if group:
            self.show_sweep(group)
        else:
            self.sweep_box.setVisible(False)
        self.tabs.setCurrentIndex(0)

    def _on_history_rerun_requested(self, run: BenchRun) -> None:
        target = bench_service.ServerTarget(argv=list(run.server_argv), env=dict(run.server_env), label=run.label,
                                            attached_url=run.attached_url, profile_version_id=run.profile_version_id,
                                            binary=run.binary_path)
        self.tabs.setCurrentIndex(0)
        self._start(lambda runner, progress, cancelled: runner.run(target, run.spec, progress=progress,
                                                                    cancelled=cancelled).run, f"Re-run of run {run.id}")

    def shutdown(self) -> None:
        """Cancel a run in progress (the runner stops its server)."""
        self.session.cancel()
