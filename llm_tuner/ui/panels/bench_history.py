"""The Benchmarks History: every stored run (filter, sort, open, re-run, delete, export, send two to Compare).
A run in a group says which ("tune #7": a trial of that tune; "sweep #3 (-ub)").

The widgets bind to a state.bench_history.BenchHistory: the filters, the rows (filled from
`RunRepository.list_overview` off the GUI thread, light repetitions: the speeds it shows) and the actions'
rules; opening or exporting a run reads its whole record first.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from PySide6.QtCore import QDate, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDateEdit,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core.bench_spec import BenchRun
from llm_tuner.qt.bench_models import RUN_ROLE, RunTableModel
from llm_tuner.qt.context import AppContext
from llm_tuner.qt.workers import state_run
from llm_tuner.services.bench_export import export_run
from llm_tuner.state.bench_history import BenchHistory, HistoryFilters
from llm_tuner.store.runs import RunRepository
from llm_tuner.ui.panels.bench_tables import make_table
from llm_tuner.ui.plots.bench_plots import render_run_plots


class RunHistoryTab(QWidget):
    """Filters, the run table and its actions."""

    run_opened = Signal(object, list)  # the whole BenchRun, and its sweep's runs ([] when not in a sweep)
    rerun_requested = Signal(object)  # the BenchRun to run again with the same command line and spec

    def __init__(self, ctx: AppContext, repo: RunRepository, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.repo = repo
        self.state = BenchHistory(repo.engine,
                                  run=state_run(self, "Reading or changing the benchmark history"))
        self.state.add_callback(self._on_history_state_changed)

        self.filter_model = QLineEdit()
        self.filter_model.setPlaceholderText("model contains…")
        self.filter_profile = QComboBox()
        self.filter_profile.addItem("all profiles", None)
        self.filter_binary = QLineEdit()
        self.filter_binary.setPlaceholderText("binary version…")
        self.filter_build = QComboBox()  # builds by their file hash: `--version` says "build 0" for every one
        self.filter_build.addItem("all builds", None)
        self.filter_build.setToolTip("only the runs of one llama-server build (and GPU driver); sort by the "
                                     "Build column to group them")
        self.filter_since_check = QCheckBox("since")
        self.filter_since = QDateEdit(QDate.currentDate().addDays(-30))
        self.filter_since.setCalendarPopup(True)
        refresh = QPushButton("Apply filters")
        refresh.clicked.connect(self.refresh)
        fl = QHBoxLayout()
        for x in (self.filter_model, self.filter_profile, self.filter_binary, self.filter_build,
                  self.filter_since_check, self.filter_since, refresh):
            fl.addWidget(x)

        self.model = RunTableModel(self)
        self.view, self.proxy = make_table(self.model)
        self.view.sortByColumn(0, Qt.SortOrder.DescendingOrder)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.view.doubleClicked.connect(self._on_view_double_clicked)
        self.hint = QLabel()
        self.hint.setWordWrap(True)

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
        for x in (self.rerun_button, self.delete_button, self.compare_button, self.export_combo,
                  self.export_button):
            bl.addWidget(x)
        bl.addStretch(1)
        lay = QVBoxLayout(self)
        lay.addLayout(fl)
        lay.addWidget(self.hint)
        lay.addWidget(self.view, 1)
        lay.addLayout(bl)

        ctx.state.bench_runs_changed.connect(self.refresh)

    def _on_history_state_changed(self, what: str, *details: object) -> None:
        st = self.state
        if what == "runs":
            self.model.set_runs(list(st.runs), st.groups)
            self.ctx.state.workspace.complete_runs = st.complete_runs()
            self._fill_builds()
            self._fill_profiles()
        elif what == "hint":
            self.hint.setText(st.hint)
        elif what == "opened":
            self.run_opened.emit(details[0], details[1])
        elif what == "deleted":
            self.ctx.state.bench_runs_changed.emit()
        elif what == "export" and isinstance(details[0], list):
            self.export_runs(details[0], *self._export_to)

    def mark_interrupted_then_refresh(self) -> None:
        """Runs left "running" by a process that died become "incomplete"; then the table loads."""
        self.state.mark_interrupted_then_refresh()

    def filters(self) -> HistoryFilters:
        since = None
        if self.filter_since_check.isChecked():
            d = self.filter_since.date()
            since = datetime(d.year(), d.month(), d.day())
        return HistoryFilters(model=self.filter_model.text().strip() or None,
                              label=self.filter_profile.currentData(),
                              binary=self.filter_binary.text().strip() or None, since=since,
                              build=self.filter_build.currentData())

    def refresh(self) -> None:
        """Reload the table off the GUI thread with the current filters."""
        self.state.refresh(self.filters())

    def _fill_builds(self) -> None:
        current = self.filter_build.currentData()
        self.filter_build.blockSignals(True)
        self.filter_build.clear()
        self.filter_build.addItem("all builds", None)
        for text, key, tip in self.state.build_choices():
            self.filter_build.addItem(text, key)
            self.filter_build.setItemData(self.filter_build.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)
        self.filter_build.setCurrentIndex(max(0, self.filter_build.findData(current)))
        self.filter_build.blockSignals(False)

    def _fill_profiles(self) -> None:
        current = self.filter_profile.currentData()
        self.filter_profile.blockSignals(True)
        self.filter_profile.clear()
        self.filter_profile.addItem("all profiles", None)
        for label in self.state.labels:
            self.filter_profile.addItem(label, label)
        self.filter_profile.setCurrentIndex(max(0, self.filter_profile.findData(current)))
        self.filter_profile.blockSignals(False)

    def selected_runs(self) -> list[BenchRun]:
        """The selected rows' runs as listed (light repetitions: `repo.get_run` has the whole record)."""
        rows = sorted({i.row() for i in self.view.selectionModel().selectedRows()})
        return [self.proxy.index(r, 0).data(RUN_ROLE) for r in rows]

    def _on_view_double_clicked(self, index) -> None:
        listed = self.proxy.index(index.row(), 0).data(RUN_ROLE)
        if listed is not None:
            self.state.open(listed.id)

    def _on_rerun_clicked(self) -> None:
        run = self.state.rerun(self.selected_runs())
        if run is not None:
            self.rerun_requested.emit(run)

    def _on_delete_clicked(self) -> None:
        runs = self.selected_runs()
        question = self.state.confirm_delete(runs)
        if question is None:
            return
        if QMessageBox.question(self, "Delete runs", question) == QMessageBox.StandardButton.Yes:
            self.state.delete(runs)

    def _on_compare_clicked(self) -> None:
        pair = self.state.compare_pair(self.selected_runs())
        if pair is not None:
            self.ctx.state.compare_requested.emit(*pair)

    def _on_export_clicked(self) -> None:
        runs = self.selected_runs()
        if not runs:
            self.state.read_for_export(runs)  # says what to do
            return
        folder = QFileDialog.getExistingDirectory(self, "Export to folder")
        if not folder:
            return
        self._export_to = (Path(folder), ("md", "csv", "json")[self.export_combo.currentIndex()])
        self.state.read_for_export(runs)

    def export_runs(self, runs: list[BenchRun], folder: Path, fmt: str) -> list[Path]:
        """Write each (whole) run; PNG plots are drawn here, on the GUI thread: they are widgets."""
        paths = [export_run(r, folder, fmt, plots=render_run_plots if fmt == "md" else None) for r in runs]
        self.state.exported(paths)
        return paths
