"""Benchmarks panel: benchmark the edited profile (or the demo model) on the real server path, and the
History of every run (filter, sort, re-run, delete, export, send two runs to Compare)."""

from __future__ import annotations

import logging
import shlex
from datetime import datetime
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QDate, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDateEdit,
    QFileDialog,
    QFormLayout,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QSplitter,
    QTableView,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core.bench_report import llama_bench_gap, metric_label, metric_samples, run_summary
from llm_tuner.core.bench_spec import BenchRun, BenchSpec
from llm_tuner.qt.bench_models import COLOR_ROLE, RUN_ROLE, SORT_ROLE, RunTableModel, SummaryTableModel
from llm_tuner.qt.context import AppContext
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.services import bench as bench_service
from llm_tuner.services.bench_export import export_run
from llm_tuner.services.demo_model import find_demo_model
from llm_tuner.store.runs import RunRepository
from llm_tuner.ui.plots.bench_plots import (
    ErrorBarChart,
    HintStack,
    SweepChart,
    render_run_plots,
    run_chart_groups,
)
from llm_tuner.ui.widgets import ElidedLabel

log = logging.getLogger(__name__)


class SortProxy(QSortFilterProxyModel):
    """Sorts by SORT_ROLE and paints COLOR_ROLE as the text colour."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setSortRole(SORT_ROLE)

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if role == Qt.ItemDataRole.ForegroundRole:
            color = super().data(index, COLOR_ROLE)
            return QBrush(QColor(color)) if color else None
        return super().data(index, role)

    def lessThan(self, left, right) -> bool:  # noqa: N802 - Qt override
        a, b = left.data(SORT_ROLE), right.data(SORT_ROLE)
        try:
            return a < b
        except TypeError:
            return str(a) < str(b)


def make_table(model, stretch: int | None = None) -> tuple[QTableView, SortProxy]:
    """A sortable table; columns fit their contents, and column `stretch` (else the last) takes the rest
    of the width (its text elides when the view is narrow, so the other columns stay whole)."""
    proxy = SortProxy()
    proxy.setSourceModel(model)
    view = QTableView()
    view.setModel(proxy)
    view.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)  # the model's order until a click
    view.setSortingEnabled(True)
    view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    view.setAlternatingRowColors(True)
    view.verticalHeader().setVisible(False)
    view.verticalHeader().setDefaultSectionSize(view.fontMetrics().height() + 8)
    header = view.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    if stretch is None:
        header.setStretchLastSection(True)
    else:
        header.setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)
    return view, proxy


class BenchPanel(QWidget):
    """Spec form + Run/Cancel with progress and time left + results; History below in its own tab."""

    server_log_lines = Signal(list)  # logparse.LogLine of the server a benchmark starts (for the log dock)
    _server_line = Signal(str)  # emitted from the runner's log-reader thread, handled on the GUI thread

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.repo = RunRepository(ctx.engine)
        self._job: BackgroundJob | None = None
        self._profile_store = None  # see follow_profile_store
        self._waiting_for = None  # the Run/Sweep action waiting for the profile store to settle
        self.last_run: BenchRun | None = None
        self._log_parser = None
        self._server_line.connect(self._on_server_line)

        self.tabs = QTabWidget()
        self.tabs.addTab(self._build_run_tab(), "Run")
        self.tabs.addTab(self._build_history_tab(), "History")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.addWidget(self.tabs)

        ctx.state.profile_changed.connect(self._on_state_profile_changed)
        ctx.state.bench_runs_changed.connect(self.refresh_history)
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)
        self._update_target_label()
        self._mark_interrupted_then_refresh()

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
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self._on_cancel_clicked)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.status_label = QLabel("Set the benchmark and press Run. Every run is kept in the History.")
        self.status_label.setWordWrap(True)
        buttons = QHBoxLayout()
        for b in (self.run_button, self.sweep_button, self.cancel_button):
            buttons.addWidget(b)
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

    def _build_history_tab(self) -> QWidget:
        w = QWidget()
        self.filter_model = QLineEdit()
        self.filter_model.setPlaceholderText("model contains…")
        self.filter_profile = QComboBox()
        self.filter_profile.addItem("all profiles", None)
        self.filter_binary = QLineEdit()
        self.filter_binary.setPlaceholderText("binary version…")
        self.filter_since_check = QCheckBox("since")
        self.filter_since = QDateEdit(QDate.currentDate().addDays(-30))
        self.filter_since.setCalendarPopup(True)
        refresh = QPushButton("Apply filters")
        refresh.clicked.connect(self.refresh_history)
        fl = QHBoxLayout()
        for x in (self.filter_model, self.filter_profile, self.filter_binary, self.filter_since_check,
                  self.filter_since, refresh):
            fl.addWidget(x)

        self.history_model = RunTableModel(self)
        self.history_view, self.history_proxy = make_table(self.history_model)
        self.history_view.sortByColumn(0, Qt.SortOrder.DescendingOrder)
        self.history_view.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.history_view.doubleClicked.connect(self._on_history_double_clicked)
        self.history_hint = QLabel()
        self.history_hint.setWordWrap(True)

        self.rerun_button = QPushButton("Re-run")
        self.rerun_button.clicked.connect(self._on_rerun_clicked)
        self.delete_button = QPushButton("Delete…")
        self.delete_button.clicked.connect(self._on_delete_clicked)
        self.compare_button = QPushButton("Compare two selected")
        self.compare_button.clicked.connect(self._on_compare_clicked)
        self.export_combo = QComboBox()
        self.export_combo.addItems(["Markdown + PNG", "CSV", "JSON"])
        self.export_button = QPushButton("Export…")
        self.export_button.clicked.connect(self._on_export_clicked)
        bl = QHBoxLayout()
        for x in (self.rerun_button, self.delete_button, self.compare_button, self.export_combo, self.export_button):
            bl.addWidget(x)
        bl.addStretch(1)
        lay = QVBoxLayout(w)
        lay.addLayout(fl)
        lay.addWidget(self.history_hint)
        lay.addWidget(self.history_view, 1)
        lay.addLayout(bl)
        return w

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
                         llama_bench=self.llama_bench_check.isChecked())

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
            from llm_tuner.store.profiles import ProfileRepository  # noqa: PLC0415

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

    # -- running ---------------------------------------------------------------------------------
    def _runner(self) -> bench_service.BenchRunner:
        inv = self.ctx.state.inventory
        devices = []
        if inv is not None:
            devices = [d.model_dump(mode="json") if hasattr(d, "model_dump") else {"name": str(d)}
                       for d in getattr(inv, "devices", [])]
        from llm_tuner.services.logparse import LogLine, LogParser

        self._log_parser = LogParser()
        self.server_log_lines.emit([LogLine("info", "── the benchmark starts its own llama-server; its output follows ──")])
        return bench_service.BenchRunner(self.repo, settings=self.ctx.settings,
                                         telemetry=bench_service.default_telemetry(), devices=devices,
                                         on_server_line=self._server_line.emit)

    def _on_server_line(self, line: str) -> None:
        from llm_tuner.services.logparse import LogLine

        if self._log_parser is not None:
            lines = [ev for ev in self._log_parser.feed(line) if isinstance(ev, LogLine)]
            if lines:
                self.server_log_lines.emit(lines)

    def _start(self, work, what: str) -> None:
        self._job = BackgroundJob(work)
        self._job.progressed.connect(self._on_job_progressed)
        self._job.succeeded.connect(self._on_job_succeeded)
        self._job.failed.connect(self._on_job_failed)
        self._job.cancelled.connect(self._on_job_cancelled)
        self._job.finished.connect(self._on_job_finished)
        self._set_running(True)
        self.status_label.setText(f"{what}: starting…")
        self._job.start()

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

    def _on_run_clicked(self) -> None:
        if self._job is not None or self._after_profile_store_settles(self._on_run_clicked):
            return
        form = self._read_form()
        if form is None:
            return
        spec, _target, resolve = form
        runner = self._runner()
        self._start(lambda ctl: runner.run(resolve(), spec, progress=ctl.progress, cancelled=ctl.cancelled),
                    "Benchmark")

    def _on_sweep_clicked(self) -> None:
        if self._job is not None or self._after_profile_store_settles(self._on_sweep_clicked):
            return
        form = self._read_form()
        if form is None:
            return
        spec, target, resolve = form
        flag = self.sweep_param_edit.text().strip()
        raw = self.sweep_values_edit.text()
        values = [v.strip() for v in (raw.split(";") if ";" in raw else raw.split(",")) if v.strip()]
        if not flag or not values or target.attached_url:
            self.status_label.setText("A sweep needs a flag, at least one value, and a server the app starts "
                                      "(not an attached URL).")
            return
        runner = self._runner()
        self._start(lambda ctl: runner.sweep(resolve(), spec, flag, values, progress=ctl.progress,
                                             cancelled=ctl.cancelled)[1], "Sweep")

    def _on_cancel_clicked(self) -> None:
        if self._waiting_for is not None:
            self._profile_store.store_settled.disconnect(self._on_profile_store_settled)
            self._waiting_for = None
            self._set_running(False)
            self.status_label.setText("Cancelled before the benchmark started.")
            return
        if self._job is not None:
            self._job.cancel()
            self.status_label.setText("Cancelling after the current request…")

    def _set_running(self, running: bool) -> None:
        self.run_button.setEnabled(not running)
        self.sweep_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)

    def is_running(self) -> bool:
        """True while a benchmark runs or waits for a profile save to finish."""
        return self._job is not None or self._waiting_for is not None

    def _on_job_progressed(self, fraction: float, text: str) -> None:
        if fraction >= 0:
            self.progress.setValue(int(fraction * 1000))
        self.status_label.setText(text)
        self.ctx.state.bench_runs_changed.emit()  # repetitions are stored as they finish

    def _on_job_succeeded(self, result) -> None:
        runs = result if isinstance(result, list) else [result]
        if isinstance(result, list):
            self.show_sweep(runs)
        if runs:
            self.show_run(runs[-1])
            bad = [r for r in runs if r.status != "complete"]
            if bad:
                self.status_label.setText(f"Run {bad[0].id} {bad[0].status}: {bad[0].error or ''}")
            else:
                self.status_label.setText(f"Run{'s' if len(runs) > 1 else ''} "
                                          f"{', '.join(str(r.id) for r in runs)} complete. "
                                          "Compare runs in the Compare tab.")

    def _on_job_failed(self, exc) -> None:
        log.error("benchmark failed: %s", exc)
        self.status_label.setText(f"The benchmark failed: {exc}. Check the flags and the log, then try again.")

    def _on_job_cancelled(self) -> None:
        self.status_label.setText("Cancelled. Finished repetitions are kept in the History.")

    def _on_job_finished(self) -> None:
        self._job = None
        self._set_running(False)
        self.ctx.state.bench_runs_changed.emit()

    def show_run(self, run: BenchRun) -> None:
        self.last_run = run
        self.summary_model.set_run(run)
        self._fit_results_width()
        gaps = [g["text"] for g in llama_bench_gap(run)]
        if run.llama_bench_skipped:
            gaps.append("llama-bench lacks (not applied there): " + " ".join(run.llama_bench_skipped))
        if run.llama_bench_error:
            gaps.append(f"llama-bench: {run.llama_bench_error}")
        summary = run_summary(run)
        pred, meas = run.memory_predicted_mib or {}, run.memory_measured_mib or {}
        mem = [f"{d}: plan {pred[d]:,.0f} MiB" + (f", measured peak {meas[d]:,.0f} MiB" if d in meas else "")
               for d in pred] + [f"{d}: measured peak {v:,.0f} MiB" for d, v in meas.items() if d not in pred]
        if mem:
            gaps.append("Memory — " + "; ".join(mem))
        if summary["busy_warning"]:
            gaps.insert(0, "Warning: " + summary["busy_warning"])
        spec = summary["speculative"]
        if spec and spec["acceptance"] is not None:
            bound = spec["bound_tokens_per_step"]
            gaps.append(f"draft acceptance α = {100 * spec['acceptance']:.1f}%, mean accepted length "
                        f"{spec['mean_accepted_len'] or 0:.2f} tokens/step"
                        + (f", bound for k={spec['draft_depth_k']}: {bound:.2f} tokens/step" if bound else
                           " (variable-length n-gram drafts: no fixed-k bound)"))
        self.gap_label.setText("\n".join(gaps))
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

    def _on_chart_combo_changed(self, index: int) -> None:
        groups = getattr(self, "_chart_groups", [])
        if 0 <= index < len(groups):
            _title, unit, cats, series = groups[index]
            self.chart.set_data(cats, series, unit)

    def _on_browse_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Prompt text", "", "Text (*.txt *.md *.py *.cpp);;All files (*)")
        if path:
            self.prompt_file_edit.setText(path)

    # -- history ---------------------------------------------------------------------------------
    def _mark_interrupted_then_refresh(self) -> None:
        job = BackgroundJob(lambda _ctl: self.repo.mark_interrupted())
        job.finished.connect(self.refresh_history)
        job.start()

    def refresh_history(self) -> None:
        """Reload the History off the GUI thread with the current filters."""
        since = None
        if self.filter_since_check.isChecked():
            d = self.filter_since.date()
            since = datetime(d.year(), d.month(), d.day())
        kwargs = {"model": self.filter_model.text().strip() or None, "label": self.filter_profile.currentData(),
                  "binary": self.filter_binary.text().strip() or None, "since": since}
        repo = self.repo
        job = BackgroundJob(lambda _ctl: (repo.list_runs(**kwargs), repo.labels()))
        job.succeeded.connect(self._on_history_loaded)
        job.start()
        self._history_job = job

    def _on_history_loaded(self, result) -> None:
        runs, labels = result
        self.history_model.set_runs(runs)
        current = self.filter_profile.currentData()
        self.filter_profile.blockSignals(True)
        self.filter_profile.clear()
        self.filter_profile.addItem("all profiles", None)
        for label in labels:
            self.filter_profile.addItem(label, label)
        idx = self.filter_profile.findData(current)
        self.filter_profile.setCurrentIndex(max(0, idx))
        self.filter_profile.blockSignals(False)
        self.history_hint.setText("" if runs else "No runs yet. Set a benchmark in the Run tab and press Run; "
                                  "every run appears here, also after a restart.")

    def selected_runs(self) -> list[BenchRun]:
        rows = sorted({i.row() for i in self.history_view.selectionModel().selectedRows()})
        return [self.history_proxy.index(r, 0).data(RUN_ROLE) for r in rows]

    def _on_history_double_clicked(self, index) -> None:
        run = self.history_proxy.index(index.row(), 0).data(RUN_ROLE)
        if run is not None:
            self.show_run(run)
            if run.group_id is not None:
                self.show_sweep(sorted(self.repo.list_runs(group_id=run.group_id), key=lambda r: r.id))
            else:
                self.sweep_box.setVisible(False)
            self.tabs.setCurrentIndex(0)

    def _on_rerun_clicked(self) -> None:
        runs = self.selected_runs()
        if not runs:
            self.history_hint.setText("Select a run to re-run it with the same command line and benchmark.")
            return
        run = runs[0]
        target = bench_service.ServerTarget(argv=list(run.server_argv), env=dict(run.server_env), label=run.label,
                                            attached_url=run.attached_url, profile_version_id=run.profile_version_id,
                                            binary=run.binary_path)
        runner = self._runner()
        self.tabs.setCurrentIndex(0)
        self._start(lambda ctl: runner.run(target, run.spec, progress=ctl.progress, cancelled=ctl.cancelled),
                    f"Re-run of run {run.id}")

    def _on_delete_clicked(self) -> None:
        runs = self.selected_runs()
        if not runs:
            self.history_hint.setText("Select the run(s) to delete.")
            return
        ids = ", ".join(str(r.id) for r in runs)
        answer = QMessageBox.question(self, "Delete runs", f"Delete run(s) {ids} and their repetitions? "
                                      "This cannot be undone.")
        if answer != QMessageBox.StandardButton.Yes:
            return
        for r in runs:
            self.repo.delete_run(r.id)
        self.ctx.state.bench_runs_changed.emit()

    def _on_compare_clicked(self) -> None:
        runs = self.selected_runs()
        if len(runs) != 2:
            self.history_hint.setText("Select exactly two runs (Ctrl+click) to compare them.")
            return
        a, b = sorted(runs, key=lambda r: r.id)
        self.ctx.state.compare_requested.emit(a.id, b.id)

    def _on_export_clicked(self) -> None:
        runs = self.selected_runs()
        if not runs:
            self.history_hint.setText("Select the run(s) to export.")
            return
        folder = QFileDialog.getExistingDirectory(self, "Export to folder")
        if folder:
            self.export_runs(runs, Path(folder), ("md", "csv", "json")[self.export_combo.currentIndex()])

    def export_runs(self, runs: list[BenchRun], folder: Path, fmt: str) -> list[Path]:
        """Write each run (PNG plots are drawn here, on the GUI thread: they are widgets)."""
        paths = [export_run(r, folder, fmt, plots=render_run_plots if fmt == "md" else None) for r in runs]
        self.history_hint.setText("Exported: " + ", ".join(str(p) for p in paths))
        return paths

    def shutdown(self) -> None:
        """Cancel a run in progress (the runner stops its server)."""
        if self._job is not None:
            self._job.cancel()
