"""Compare panel: B against A (two runs, or two profiles' latest runs) per metric with median, spread,
n, Δ%, the 95% interval of the difference and a verdict; which flags differ; bars with error bars."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QRadioButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core.bench_report import (
    busy_warning,
    compare_runs,
    run_flag_diff,
    run_identity_diff,
    run_summary,
    speculative_lines,
    speculative_speedup,
)
from llm_tuner.core.heat import heat_warning
from llm_tuner.core.stats import AB_THRESHOLD_PCT, BETTER, NOISE, WORSE
from llm_tuner.qt.bench_models import ComparisonTableModel
from llm_tuner.qt.context import AppContext
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.services.bench import profile_versions
from llm_tuner.store.runs import RunRepository
from llm_tuner.ui.panels.bench_tables import make_table
from llm_tuner.ui.panels.compare_builds import BuildsRow
from llm_tuner.ui.plots.bench_plots import ErrorBarChart, HintStack, run_chart_groups


class ComparePanel(QWidget):
    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.repo = RunRepository(ctx.engine)
        self.run_a = self.run_b = None

        self.by_runs = QRadioButton("two runs")
        self.by_profiles = QRadioButton("two profiles (their latest runs)")
        self.by_runs.setChecked(True)
        self.by_runs.toggled.connect(self._on_mode_toggled)
        self.combo_a, self.combo_b = QComboBox(), QComboBox()
        for c in (self.combo_a, self.combo_b):
            c.setMinimumWidth(320)
        self.threshold_spin = QDoubleSpinBox()
        self.threshold_spin.setRange(0.0, 50.0)
        self.threshold_spin.setSingleStep(0.5)
        self.threshold_spin.setSuffix(" %")
        self.threshold_spin.setValue(float(getattr(ctx.settings, "ab_threshold_pct", AB_THRESHOLD_PCT)))
        self.threshold_spin.setToolTip("practical threshold: smaller differences are 'within noise' even when real")
        self.compare_button = QPushButton("Compare")
        self.compare_button.clicked.connect(self._on_compare_clicked)
        self.verdict_label = QLabel("Pick A and B, then Compare. Runs appear here after a benchmark.")
        self.verdict_label.setWordWrap(True)

        top = QGridLayout()
        mode = QHBoxLayout()
        mode.addWidget(QLabel("Compare"))
        mode.addWidget(self.by_runs)
        mode.addWidget(self.by_profiles)
        mode.addStretch(1)
        top.addLayout(mode, 0, 0, 1, 4)
        top.addWidget(QLabel("A (baseline):"), 1, 0)
        top.addWidget(self.combo_a, 1, 1)
        top.addWidget(QLabel("B:"), 1, 2)
        top.addWidget(self.combo_b, 1, 3)
        top.addWidget(QLabel("Threshold:"), 2, 0)
        top.addWidget(self.threshold_spin, 2, 1)
        top.addWidget(self.compare_button, 2, 3)

        self.model = ComparisonTableModel(self)
        self.table, self.proxy = make_table(self.model, stretch=0)
        self.diff_table = QTableWidget(0, 3)
        self.diff_table.setHorizontalHeaderLabels(["Flag", "A", "B"])
        self.diff_table.horizontalHeader().setSectionResizeMode(self.diff_table.horizontalHeader().ResizeMode.Stretch)
        self.diff_table.verticalHeader().setVisible(False)
        self.chart_combo = QComboBox()
        self.chart_combo.currentIndexChanged.connect(self._on_chart_combo_changed)
        self.chart = ErrorBarChart()

        diff_box = QWidget()
        dl = QVBoxLayout(diff_box)
        dl.setContentsMargins(0, 0, 0, 0)
        dl.addWidget(QLabel("Flags that differ (A → B):"))
        dl.addWidget(self.diff_table, 1)
        self.chart_stack = HintStack.chart_with_picker(self.chart_combo, self.chart, "Pick A and B, then Compare.")
        bottom = QSplitter(Qt.Orientation.Horizontal)
        bottom.addWidget(diff_box)
        bottom.addWidget(self.chart_stack)
        bottom.setStretchFactor(0, 1)
        bottom.setStretchFactor(1, 2)
        bottom.setSizes([340, 680])  # scaled to the real width: a third for the flags, two for the chart
        self.split = QSplitter(Qt.Orientation.Vertical)
        self.split.addWidget(self.table)
        self.split.addWidget(bottom)
        self.split.setStretchFactor(0, 0)  # the table keeps the height of its rows (`_fit_table`); the chart grows
        self.split.setStretchFactor(1, 1)
        self.split.setSizes([self._table_height(5), 300])

        self.builds_row = BuildsRow(ctx, self.show_builds, self)  # one profile on two llama-server builds
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(self.builds_row)
        lay.addWidget(self.verdict_label)
        lay.addWidget(self.split, 1)

        ctx.state.bench_runs_changed.connect(self.refresh_choices)
        ctx.state.compare_requested.connect(self._on_state_compare_requested)
        self.refresh_choices()

    # -- choices ---------------------------------------------------------------------------------
    def refresh_choices(self) -> None:
        repo = self.repo
        job = BackgroundJob(lambda _ctl: (repo.list_runs(with_reps=False, limit=500), repo.labels()),
                            what="Loading the runs to compare")
        job.succeeded.connect(self._on_choices_loaded)
        job.start()
        self._choices_job = job

    def _on_choices_loaded(self, result) -> None:
        self._runs, self._labels = result
        self._fill_combos()

    def _fill_combos(self) -> None:
        keep = (self.combo_a.currentData(), self.combo_b.currentData())
        for combo in (self.combo_a, self.combo_b):
            combo.blockSignals(True)
            combo.clear()
            if self.by_profiles.isChecked():
                for label in getattr(self, "_labels", []):
                    combo.addItem(label, label)
            else:
                for r in getattr(self, "_runs", []):
                    when = r.started_at.strftime("%Y-%m-%d %H:%M") if r.started_at else ""
                    combo.addItem(f"#{r.id} · {r.label} · {when} · {r.status}", r.id)
            combo.blockSignals(False)
        for combo, data in zip((self.combo_a, self.combo_b), keep, strict=True):
            idx = combo.findData(data)
            if idx >= 0:
                combo.setCurrentIndex(idx)
        newest = self.combo_b.itemData(0) if self.combo_b.count() else None
        if newest != getattr(self, "_newest_seen", None):  # a new run (or profile): compare the newest two
            self._newest_seen = newest
            self.combo_a.setCurrentIndex(min(1, self.combo_a.count() - 1))
            self.combo_b.setCurrentIndex(0)
        if self.combo_b.count() > 1 and self.combo_a.currentIndex() == self.combo_b.currentIndex():
            self.combo_a.setCurrentIndex(1)  # newest two: A = the older one
            self.combo_b.setCurrentIndex(0)

    def _on_mode_toggled(self, _checked: bool) -> None:
        self._fill_combos()

    def _on_state_compare_requested(self, a_id: int, b_id: int) -> None:
        self.by_runs.setChecked(True)
        self._pending = (a_id, b_id)
        repo = self.repo
        engine = self.ctx.engine
        job = BackgroundJob(lambda _ctl: self._load_pair(repo, engine, lambda: (repo.get_run(a_id), repo.get_run(b_id))),
                            what=f"Loading runs #{a_id} and #{b_id} to compare")
        job.succeeded.connect(self._on_runs_loaded)
        job.start()
        self._load_job = job
        tabs = self.parentWidget()
        while tabs is not None and not hasattr(tabs, "setCurrentWidget"):
            tabs = tabs.parentWidget()
        if tabs is not None:
            tabs.setCurrentWidget(self)

    # -- comparing -------------------------------------------------------------------------------
    def _on_compare_clicked(self) -> None:
        a, b = self.combo_a.currentData(), self.combo_b.currentData()
        if a is None or b is None:
            self.verdict_label.setText("Nothing to compare yet: benchmark two profiles in the Benchmarks tab.")
            return
        repo = self.repo
        by_profiles = self.by_profiles.isChecked()

        engine = self.ctx.engine

        def work(_ctl):
            if by_profiles:
                return self._load_pair(repo, engine, lambda: (repo.latest_run(a), repo.latest_run(b)))
            return self._load_pair(repo, engine, lambda: (repo.get_run(a), repo.get_run(b)))

        self.compare_button.setEnabled(False)
        job = BackgroundJob(work, what="Loading the two runs to compare")
        job.succeeded.connect(self._on_runs_loaded)
        job.finished.connect(lambda: self.compare_button.setEnabled(True))
        job.start()
        self._load_job = job

    def _on_runs_loaded(self, loaded) -> None:
        a, b, pa, pb = loaded
        if a is None or b is None:
            self.verdict_label.setText("One of the two has no finished run. Benchmark it first.")
            return
        self.show_comparison(a, b, pa, pb)

    @staticmethod
    def _load_pair(repo, engine, get):
        """Off the GUI thread: the two runs and their saved profile versions (for the flag diff)."""
        a, b = get()
        if a is None or b is None:
            return a, b, None, None
        pa, pb = profile_versions(engine, a.profile_version_id, b.profile_version_id)
        return a, b, pa, pb

    def show_comparison(self, a, b, profile_a=None, profile_b=None) -> None:
        self.run_a, self.run_b = a, b
        threshold = self.threshold_spin.value()
        comparisons = compare_runs(a, b, threshold)
        self.model.set_comparisons(comparisons)
        counts = {v: sum(1 for c in comparisons if c.verdict == v) for v in (BETTER, WORSE, NOISE)}
        text = (f"B = run {b.id} ({b.label}) against A = run {a.id} ({a.label}): {counts[BETTER]} better, "
                f"{counts[WORSE]} worse, {counts[NOISE]} within noise (95% CI must exclude 0 and |Δ| > "
                f"{threshold:g}%).")
        spd = speculative_speedup(b, a) or speculative_speedup(a, b)
        if spd and spd["measured_speedup"]:
            text += "\n" + spd["text"]
        for run in (a, b):
            sp = run_summary(run)["speculative"]
            if sp:
                text += f"\nRun {run.id}: " + " ".join(speculative_lines(sp))
        for warning in (busy_warning(a), busy_warning(b), heat_warning([a], [b])):
            if warning:
                text += f"\nWarning: {warning}"
        if a.spec.model_dump(exclude={"llama_bench"}) != b.spec.model_dump(exclude={"llama_bench"}):
            text += "\nNote: the two runs used different benchmark settings; only common metrics compare."
        self.verdict_label.setText(text)
        diff = run_identity_diff(a, b) + run_flag_diff(a, b, profile_a, profile_b)
        self.diff_table.setRowCount(len(diff))
        for i, d in enumerate(diff):
            for j, key in enumerate(("flag", "a", "b")):
                value = d[key]
                item = QTableWidgetItem("(absent)" if value is None else (value or "on"))
                item.setToolTip(item.text())  # a long -ot rule or path is elided in the cell
                self.diff_table.setItem(i, j, item)
        if not diff:
            self.diff_table.setRowCount(1)
            self.diff_table.setItem(0, 0, QTableWidgetItem("(same command line)"))
        self._chart_groups = run_chart_groups([a, b])
        self.chart_combo.blockSignals(True)
        self.chart_combo.clear()
        self.chart_combo.addItems([f"{t} ({u})" for t, u, _, _ in self._chart_groups])
        self.chart_combo.blockSignals(False)
        self.chart_stack.show_content(bool(self._chart_groups), None if self._chart_groups else
                                      "These runs have no prefill, generation or first-token timings to chart.")
        self._on_chart_combo_changed(0)
        self._fit_table()

    def show_builds(self, verdict) -> None:
        """A build A/B's result (ui/panels/compare_builds.py): its pooled sides as A and B, its verdict first."""
        if verdict.a is None or verdict.b is None:
            self.verdict_label.setText(verdict.text)
            return
        self.show_comparison(verdict.a, verdict.b)
        self.verdict_label.setText(verdict.text + "\n" + self.verdict_label.text())

    MAX_TABLE_ROWS = 8

    def _table_height(self, rows: int) -> int:
        """Height of the metric table showing its header and `rows` rows without scrolling."""
        t = self.table
        row_h = t.verticalHeader().defaultSectionSize()
        bar = t.horizontalScrollBar().sizeHint().height() if t.horizontalScrollBar().isVisible() else 0
        return t.horizontalHeader().sizeHint().height() + rows * row_h + 2 * t.frameWidth() + bar

    def _fit_table(self) -> None:
        """Give the metric table the height of its rows (up to MAX_TABLE_ROWS, then it scrolls); the chart
        gets the rest."""
        want = self._table_height(max(1, min(self.model.rowCount(), self.MAX_TABLE_ROWS)))
        total = sum(self.split.sizes()) or self.split.height()
        self.split.setSizes([want, max(0, total - want)])

    def _on_chart_combo_changed(self, index: int) -> None:
        groups = getattr(self, "_chart_groups", [])
        if 0 <= index < len(groups):
            _title, unit, cats, series = groups[index]
            self.chart.set_data(cats, series, unit)
