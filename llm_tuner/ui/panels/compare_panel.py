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

from llm_tuner.core.bench_spec import BenchRun
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.qt.bench_models import ComparisonTableModel
from llm_tuner.qt.context import AppContext
from llm_tuner.qt.workers import state_run
from llm_tuner.services.bench.builds import BuildsVerdict
from llm_tuner.state.compare import PICK, CompareState
from llm_tuner.ui.panels.bench_tables import make_table
from llm_tuner.ui.panels.compare_builds import BuildsRow
from llm_tuner.ui.plots.bench_plots import ErrorBarChart, HintStack, run_chart_groups

NO_TIMINGS = "These runs have no prefill, generation or first-token timings to chart."


class ComparePanel(QWidget):
    """The widgets of Compare, bound to a CompareState (state/compare.py: choices, rules, rows)."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.state = CompareState(ctx.engine, threshold_pct=ctx.settings.ab_threshold_pct,
                                  run=state_run(self, "Loading the runs to compare"))
        self._chart_groups: list = []

        self.by_runs = QRadioButton("two runs")
        self.by_profiles = QRadioButton("two profiles (their latest runs of one setting, pooled)")
        self.by_runs.setChecked(True)
        self.by_runs.toggled.connect(self._on_mode_toggled)
        self.combo_a, self.combo_b = QComboBox(), QComboBox()
        for c in (self.combo_a, self.combo_b):
            c.setMinimumWidth(320)
            c.currentIndexChanged.connect(self._on_combo_changed)
        self.threshold_spin = QDoubleSpinBox()
        self.threshold_spin.setRange(0.0, 50.0)
        self.threshold_spin.setSingleStep(0.5)
        self.threshold_spin.setSuffix(" %")
        self.threshold_spin.setValue(self.state.threshold_pct)
        self.threshold_spin.setToolTip("practical threshold: smaller differences are 'within noise' "
                                       "even when real")
        self.threshold_spin.valueChanged.connect(self._on_threshold_spin_changed)
        self.compare_button = QPushButton("Compare")
        self.compare_button.clicked.connect(self._on_compare_clicked)
        self.verdict_label = QLabel(PICK)
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
        header = self.diff_table.horizontalHeader()
        header.setSectionResizeMode(header.ResizeMode.Stretch)
        self.diff_table.verticalHeader().setVisible(False)
        self.chart_combo = QComboBox()
        self.chart_combo.currentIndexChanged.connect(self._on_chart_combo_changed)
        self.chart = ErrorBarChart()

        diff_box = QWidget()
        dl = QVBoxLayout(diff_box)
        dl.setContentsMargins(0, 0, 0, 0)
        dl.addWidget(QLabel("Flags that differ (A → B):"))
        dl.addWidget(self.diff_table, 1)
        self.chart_stack = HintStack.chart_with_picker(self.chart_combo, self.chart,
                                                       "Pick A and B, then Compare.")
        bottom = QSplitter(Qt.Orientation.Horizontal)
        bottom.addWidget(diff_box)
        bottom.addWidget(self.chart_stack)
        bottom.setStretchFactor(0, 1)
        bottom.setStretchFactor(1, 2)
        bottom.setSizes([340, 680])  # scaled to the real width: a third for the flags, two for the chart
        self.split = QSplitter(Qt.Orientation.Vertical)
        self.split.addWidget(self.table)
        self.split.addWidget(bottom)
        # the table keeps the height of its rows (`_fit_table`); the chart grows
        self.split.setStretchFactor(0, 0)
        self.split.setStretchFactor(1, 1)
        self.split.setSizes([self._table_height(5), 300])

        self.builds_row = BuildsRow(ctx, self.show_builds, self)  # one profile on two llama-server builds
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(self.builds_row)
        lay.addWidget(self.verdict_label)
        lay.addWidget(self.split, 1)

        self.state.add_callback(self._on_compare_state_changed)
        ctx.state.bench_runs_changed.connect(self.refresh_choices)
        ctx.state.compare_requested.connect(self._on_state_compare_requested)
        ctx.state.compare_newest_requested.connect(self._on_state_compare_newest_requested)  # the quick start
        self.refresh_choices()

    @property
    def run_a(self) -> BenchRun | None:
        return self.state.run_a

    @property
    def run_b(self) -> BenchRun | None:
        return self.state.run_b

    # -- binding ---------------------------------------------------------------------------------
    def _on_compare_state_changed(self, what: str, *_details: object) -> None:
        if what == "choices":
            self._fill_combos()
        elif what == "busy":
            self.compare_button.setEnabled(not self.state.busy)
        elif what == "message":
            self.verdict_label.setText(self.state.message)
        elif what == "comparison":
            self._show_state_comparison()
            a, b = self.state.run_a, self.state.run_b
            if a is not None and b is not None and a.id is not None and b.id is not None:
                self.ctx.state.workspace.compared = (a.id, b.id)

    def refresh_choices(self) -> None:
        self.state.refresh_choices()

    def _fill_combos(self) -> None:
        st = self.state
        self.by_profiles.blockSignals(True)
        self.by_profiles.setChecked(st.by_profiles)
        self.by_runs.setChecked(not st.by_profiles)
        self.by_profiles.blockSignals(False)
        for combo, key in zip((self.combo_a, self.combo_b), st.chosen, strict=True):
            combo.blockSignals(True)
            combo.clear()
            for choice in st.choices:
                combo.addItem(choice.text, choice.key)
            combo.setCurrentIndex(combo.findData(key) if key is not None else -1)
            combo.blockSignals(False)

    def _on_mode_toggled(self, _checked: bool) -> None:
        self.state.set_by_profiles(self.by_profiles.isChecked())

    def _on_combo_changed(self, _index: int) -> None:
        self.state.choose(self.combo_a.currentData(), self.combo_b.currentData())

    def _on_threshold_spin_changed(self, value: float) -> None:
        self.state.threshold_pct = value

    def _on_state_compare_newest_requested(self) -> None:
        """The quick start's Compare: by runs, the newest two (A the older one)."""
        self.state.set_by_profiles(False)
        self.state.compare()

    def _on_state_compare_requested(self, a_id: int, b_id: int) -> None:
        self.state.compare_runs(a_id, b_id)  # the main window shows this tab (it owns the tabs)

    # -- comparing -------------------------------------------------------------------------------
    def _on_compare_clicked(self) -> None:
        self.state.choose(self.combo_a.currentData(), self.combo_b.currentData())
        self.state.compare()

    def show_comparison(self, a: BenchRun, b: BenchRun, profile_a: LaunchProfile | None = None,
                        profile_b: LaunchProfile | None = None) -> None:
        self.state.show(a, b, profile_a, profile_b)

    def show_builds(self, verdict: BuildsVerdict) -> None:
        """A build A/B's result (compare_builds.py): its pooled sides as A and B, its verdict first."""
        self.state.show_builds(verdict)

    def _show_state_comparison(self) -> None:
        st = self.state
        self.model.set_comparisons(list(st.comparisons))
        self.verdict_label.setText(st.message)
        self.diff_table.setRowCount(len(st.diff))
        for i, row in enumerate(st.diff):
            for j, text in enumerate((row.flag, row.a, row.b)):
                item = QTableWidgetItem(text)
                item.setToolTip(text)  # a long -ot rule or path is elided in the cell
                self.diff_table.setItem(i, j, item)
        sides = st.chart_sides  # a pooled side: all its runs' repetitions, as its verdict read them
        self._chart_groups = run_chart_groups([r for _, r in sides], [n for n, _ in sides])
        self.chart_combo.blockSignals(True)
        self.chart_combo.clear()
        self.chart_combo.addItems([f"{t} ({u})" for t, u, _, _ in self._chart_groups])
        self.chart_combo.blockSignals(False)
        self.chart_stack.show_content(bool(self._chart_groups), None if self._chart_groups else NO_TIMINGS)
        self._on_chart_combo_changed(0)
        self._fit_table()

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
        groups = self._chart_groups
        if 0 <= index < len(groups):
            _title, unit, cats, series = groups[index]
            self.chart.set_data(cats, series, unit)
