"""Benchmarks panel: benchmark the edited profile (or the demo model) on the real server path, and the
History of every run (filter, sort, re-run, delete, export, send two runs to Compare)."""

from __future__ import annotations

import logging
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

from llm_tuner.core.bench_spec import BenchRun, BenchSpec
from llm_tuner.qt.bench_models import SummaryTableModel
from llm_tuner.qt.bench_session import BenchSession
from llm_tuner.qt.context import AppContext
from llm_tuner.qt.workers import state_run
from llm_tuner.services.router_bench import bench_router_models
from llm_tuner.services.speed import load_basis
from llm_tuner.state.bench import BenchSpeed
from llm_tuner.state.benchmarks import ACTIONS, READY, BenchmarksState, Prepared, ProfileFacts
from llm_tuner.state.speed import SpeedModel
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
        self._chart_groups: list = []
        self.session = BenchSession(ctx, self.repo, self)
        self.session.run_finished.connect(self._on_session_run_finished)
        self.session.server_log_lines.connect(self.server_log_lines)
        # measured vs predicted after a run, and the calibration each run refines (state.bench)
        run = state_run(self, "Predicting the run's speed")
        self.bench_speed = BenchSpeed(SpeedModel(lambda: load_basis(ctx.engine), run=run), ctx.engine,
                                      inventory=lambda: ctx.state.inventory, run=run)
        self.bench_speed.add_callback(self._on_bench_speed_changed)
        # the form's rules, the job's progress, the run shown (state.benchmarks)
        self.state = BenchmarksState(ctx.engine, self.bench_speed, workspace=ctx.state.workspace)
        # the workspace outlives the panel: the state stops following it when the panel goes
        self.destroyed.connect(lambda _obj=None, st=self.state: st.close())
        self.session.progressed.connect(self.state.progressed)
        self.session.run_succeeded.connect(self.state.succeeded)
        self.session.run_failed.connect(self._on_session_run_failed)
        self.session.run_cancelled.connect(self.state.cancelled)

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
        # the workspace's wiring (no panel reaches in): the log dock, the profile store, Server ▸ Benchmark
        self.server_log_lines.connect(ctx.state.server_log_lines_posted)
        ctx.state.benchmark_requested.connect(self._on_state_benchmark_requested)
        with_shortcut(self.run_button, "benchmark")
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)
        self.state.add_callback(self._on_bench_state_changed)
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
        self.router_model_edit.setToolTip("For a server in router mode (--models-dir / --models-preset): "
                                          "the model measured, by its name in Live's Models tab. Each "
                                          "request names it; the run records that model's name and file.")
        tf.addRow("Router model:", self.router_model_edit)
        self.binary_edit = QLineEdit()
        self.binary_edit.setPlaceholderText("optional: another llama-server (an upgrade, a fork) for an A/B "
                                            "across builds")
        self.binary_edit.setToolTip("This run starts this program instead of the profile's (or Settings') "
                                    "llama-server; the run records its path and version, and Compare lists "
                                    "them.")
        tf.addRow("llama-server binary:", self.binary_edit)

        spec_box = QGroupBox("Benchmark")
        sf = QFormLayout(spec_box)
        self.prompt_edit = QLineEdit("512")
        self.prompt_edit.setToolTip("prompt lengths in tokens, comma-separated (each prompt has exactly this "
                                    "many)")
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
        self.llama_bench_check.setToolTip("llama-bench with the same settings, before the server: its speeds "
                                          "beside the server's show what the server adds")
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
        self.sweep_values_edit.setPlaceholderText("values, e.g. 256,512,1024 (';' between values containing "
                                                  "',')")
        sw = QHBoxLayout()
        sw.addWidget(self.sweep_param_edit, 1)
        sw.addWidget(self.sweep_values_edit, 3)
        sf.addRow("Sweep:", sw)

        self.run_button = QPushButton("Run benchmark")
        self.run_button.clicked.connect(self._on_run_clicked)
        self.sweep_button = QPushButton("Run sweep")
        self.sweep_button.clicked.connect(self._on_sweep_clicked)
        self.spec_ab_button = QPushButton("A/B vs no drafting")
        self.spec_ab_button.setToolTip("The profile as it is and with --spec-type none, interleaved over two "
                                       "rounds: speculative decoding's measured speed-up beside its ceiling")
        self.spec_ab_button.clicked.connect(self._on_spec_ab_clicked)
        self.router_all_button = QPushButton("Every router model")  # services.router_bench: side by side
        self.router_all_button.setToolTip("A router (no -m): measure each of its models with this spec, one "
                                          "after another, shown side by side")
        self.router_all_button.clicked.connect(self._on_router_all_clicked)
        self.anyway_button = QPushButton("Run anyway")  # shown when Run was refused for the advice's errors
        self.anyway_button.setToolTip("Start the server despite the errors (a fork may accept what this "
                                      "build refuses)")
        self.anyway_button.hide()
        self.anyway_button.clicked.connect(self._on_anyway_clicked)
        self._force = False
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self._on_cancel_clicked)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.status_label = QLabel(READY)
        self.status_label.setWordWrap(True)
        buttons = QHBoxLayout()
        for b in (self.run_button, self.anyway_button, self.sweep_button, self.spec_ab_button,
                  self.cancel_button):
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
        self.chart_stack = HintStack.chart_with_picker(self.chart_combo, self.chart,
                                                       "Run a benchmark to see its chart.")

        left = QWidget()
        ll = QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.addWidget(target_box)
        ll.addWidget(spec_box)
        ll.addStretch(1)
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        result_title = QLabel("Result of the last run (the server's own timings; TTFT and latency by the "
                              "client):")
        result_title.setWordWrap(True)  # not the results column's minimum width
        rl.addWidget(result_title)
        rl.addWidget(self.summary_view, 2)
        rl.addWidget(self.gap_label)
        # measured vs predicted, the roofline's share, what the calibration learnt
        self.speed_label = QLabel()
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
        # the form scrolls on small screens (1366x768) instead of widening the window
        form_scroll = QScrollArea()
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
        # the form first: the results widen after a run (_fit_results_width)
        self.run_split.setSizes([560, 440])
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

    # -- what to run (state.benchmarks: the form's rules) ---------------------------------------------
    def _facts(self) -> ProfileFacts:
        """The workspace's profile as a benchmark reads it."""
        st = self.ctx.state
        return ProfileFacts(st.profile, st.profile_name, st.profile_problem, st.profile_errors)

    def _read_widgets(self) -> None:
        """The form's widgets into the state."""
        self.state.set_form(
            prompt_lengths=self.prompt_edit.text(), gen_tokens=self.gen_spin.value(),
            reps=self.reps_spin.value(), warmup=self.warmup_spin.value(),
            warm_cache=self.cache_combo.currentIndex() == 1, depth=self.depth_spin.value(),
            clients=self.clients_spin.value(), prompt_file=self.prompt_file_edit.text(),
            llama_bench=self.llama_bench_check.isChecked(), router_model=self.router_model_edit.text(),
            label=self.label_edit.text(), extra_flags=self.extra_edit.text(), url=self.url_edit.text(),
            binary=self.binary_edit.text(), sweep_flag=self.sweep_param_edit.text(),
            sweep_values=self.sweep_values_edit.text())

    def spec(self) -> BenchSpec:
        self._read_widgets()
        return self.state.spec()

    def _update_target_label(self) -> None:
        facts = self._facts()
        line = self.state.target_line(facts)
        if facts.profile is not None:  # the name stands out, the rest elides first
            name = facts.name or "the unsaved profile"
            self.target_label.set_parts("", name, line[len(name):])
        else:
            self.target_label.set_parts("", line)

    def _on_state_profile_changed(self, _profile) -> None:
        self._update_target_label()

    # -- binding ---------------------------------------------------------------------------------------
    def _on_bench_state_changed(self, what: str, *_details: object) -> None:
        st = self.state
        if what == "running":
            self._set_running(st.running)
        elif what == "status":
            self.status_label.setText(st.status)
            self.progress.setValue(int(st.progress * 1000))
            self.progress.setFormat("cancelled at %p%" if st.progress_note else "%p%")
        elif what == "refused":
            self.anyway_button.setVisible(st.refused)
        elif what == "run":
            self._show_state_run()
        elif what == "sweep":
            self._show_state_sweep()

    # -- running (qt/bench_session.BenchSession) ------------------------------------------------
    def _start(self, work, what: str) -> None:
        if not self.session.start(work):
            self.state.not_started(what)
            return
        self.state.started(what)

    def _on_anyway_clicked(self) -> None:
        """Run the benchmark the advice errors stopped (a fork's flags, a check that is wrong here)."""
        self._force = True
        try:
            self._on_run_clicked()
        finally:
            self._force = False

    def _prepare(self, action: str, again) -> Prepared | None:
        """The form read for `action`, unless a job runs or the profile store is still saving (then `again`
        runs once it has settled)."""
        if self.session.is_running() or self.state.wait_for_profile_store(again):
            return None
        self._read_widgets()
        return self.state.prepare(action, self._facts(), force=self._force)

    def _on_run_clicked(self) -> None:
        p = self._prepare("run", self._on_run_clicked)
        if p is not None:
            spec, resolve = p.spec, p.resolve
            self._start(lambda runner, progress, cancelled: runner.run(
                resolve(), spec, progress=progress, cancelled=cancelled).run, ACTIONS["run"])

    def _on_sweep_clicked(self) -> None:
        p = self._prepare("sweep", self._on_sweep_clicked)
        if p is not None:
            spec, resolve, flag, values = p.spec, p.resolve, p.sweep_flag, list(p.sweep_values)
            self._start(lambda runner, progress, cancelled: runner.sweep(
                resolve(), spec, flag, values, progress=progress, cancelled=cancelled)[1], ACTIONS["sweep"])

    def _on_spec_ab_clicked(self) -> None:
        p = self._prepare("spec_ab", self._on_spec_ab_clicked)
        if p is not None:
            spec, resolve = p.spec, p.resolve
            self._start(lambda runner, progress, cancelled: runner.speculative_ab(
                resolve(), spec, progress=progress, cancelled=cancelled), ACTIONS["spec_ab"])

    def _on_router_all_clicked(self) -> None:
        p = self._prepare("router_all", self._on_router_all_clicked)
        if p is not None:
            spec, resolve = p.spec, p.resolve
            self._start(lambda runner, progress, cancelled: bench_router_models(
                runner, resolve(), spec, progress=progress, cancelled=cancelled)[1], ACTIONS["router_all"])

    def _on_cancel_clicked(self) -> None:
        if self.state.cancel_wait():
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
        return self.session.is_running() or self.state.waiting

    def _on_session_run_failed(self, exc) -> None:
        log.error("benchmark failed: %s", exc)
        self.state.failed(exc)

    def _on_session_run_finished(self) -> None:
        self.state.set_running(False)

    @property
    def last_run(self) -> BenchRun | None:
        """The run shown."""
        return self.state.last_run

    def show_run(self, run: BenchRun, *, finished: bool = False) -> None:
        """A run's results; `finished`: it just ran here (its speed refines the calibration)."""
        self.state.show_run(run, finished=finished)

    def _show_state_run(self) -> None:
        run = self.state.last_run
        if run is None:
            return
        self.speed_label.hide()
        self.summary_model.set_run(run)
        self._fit_results_width()
        self.gap_label.setText("\n".join(self.state.notes))
        self._chart_groups = run_chart_groups([run])
        self.chart_combo.blockSignals(True)
        self.chart_combo.clear()
        self.chart_combo.addItems([f"{t} ({u})" for t, u, _, _ in self._chart_groups])
        self.chart_combo.blockSignals(False)
        self.chart_stack.show_content(bool(self._chart_groups), None if self._chart_groups else
                                      f"Run {run.id} has no prefill, generation or first-token timings to "
                                      "chart.")
        self._on_chart_combo_changed(0)

    def show_sweep(self, runs: list[BenchRun]) -> None:
        """A sweep's runs (one per value): generation and prefill medians ± IQR against the value."""
        self.state.show_sweep(runs)

    def _show_state_sweep(self) -> None:
        table = self.state.sweep_table()
        self.sweep_box.setVisible(bool(table.values))
        if not table.values:
            return
        self.sweep_chart.set_data(table.values, table.series, "t/s")
        self.sweep_table.setColumnCount(len(table.headers))
        self.sweep_table.setHorizontalHeaderLabels(table.headers)
        self.sweep_table.setRowCount(len(table.rows))
        for i, cells in enumerate(table.rows):
            for j, text in enumerate(cells):
                self.sweep_table.setItem(i, j, QTableWidgetItem(text))
        self.sweep_table.resizeColumnsToContents()  # whole metric names in the headers (it scrolls sideways)

    # -- the predicted speed (state.bench) ---------------------------------------------------------------
    def _on_bench_speed_changed(self, _what: str) -> None:
        text = self.state.speed_text()
        if not text and self.bench_speed.run_id != (self.last_run.id if self.last_run else None):
            return
        self.speed_label.setText(text)
        self.speed_label.setVisible(bool(text))
        if self.bench_speed.refit_line:
            self.ctx.state.bench_runs_changed.emit()  # the Plan and the Profile read the refined calibration

    def _on_chart_combo_changed(self, index: int) -> None:
        groups = self._chart_groups
        if 0 <= index < len(groups):
            _title, unit, cats, series = groups[index]
            self.chart.set_data(cats, series, unit)

    def _on_browse_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Prompt text", "",
                                              "Text (*.txt *.md *.py *.cpp);;All files (*)")
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
        self.show_sweep(group)
        self.tabs.setCurrentIndex(0)

    def _on_history_rerun_requested(self, run: BenchRun) -> None:
        target = self.state.rerun_target(run)
        self.tabs.setCurrentIndex(0)
        self._start(lambda runner, progress, cancelled: runner.run(
            target, run.spec, progress=progress, cancelled=cancelled).run, f"Re-run of run {run.id}")

    def shutdown(self) -> None:
        """Cancel a run in progress (the runner stops its server)."""
        self.session.cancel()
