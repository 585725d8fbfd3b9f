"""The Benchmarks History: every stored run (filter, sort, open, re-run, delete, export, send two to Compare).
A run in a group says which ("tune #7": a trial of that tune; "sweep #3 (-ub)").

The table is filled from `RunRepository.list_overview` off the GUI thread (light repetitions: the speeds it
shows); opening or exporting a run reads its whole record first.
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
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.services.bench_export import export_run
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

        self.filter_model = QLineEdit()
        self.filter_model.setPlaceholderText("model contains…")
        self.filter_profile = QComboBox()
        self.filter_profile.addItem("all profiles", None)
        self.filter_binary = QLineEdit()
        self.filter_binary.setPlaceholderText("binary version…")
        self.filter_build = QComboBox()  # builds by their file hash: `--version` says "build 0" for every one
        self.filter_build.addItem("all builds", None)
        self.filter_build.setToolTip("only the runs of one llama-server build (and GPU driver); sort by the Build "
                                     "column to group them")
        self.filter_since_check = QCheckBox("since")
        self.filter_since = QDateEdit(QDate.currentDate().addDays(-30))
        self.filter_since.setCalendarPopup(True)
        refresh = QPushButton("Apply filters")
        refresh.clicked.connect(self.refresh)
        fl = QHBoxLayout()
        for x in (self.filter_model, self.filter_profile, self.filter_binary, self.filter_build, self.filter_since_check,
                  self.filter_since, refresh):
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
        for x in (self.rerun_button, self.delete_button, self.compare_button, self.export_combo, self.export_button):
            bl.addWidget(x)
        bl.addStretch(1)
        lay = QVBoxLayout(self)
        lay.addLayout(fl)
        lay.addWidget(self.hint)
        lay.addWidget(self.view, 1)
        lay.addLayout(bl)

        self._refresh_seq = 0
        ctx.state.bench_runs_changed.connect(self.refresh)

    @staticmethod
    def _job(fn, on_succeeded, *, what: str) -> None:
        """`fn` off the GUI thread, its result to `on_succeeded` (a bound slot: dropped if this widget is gone), a
        failure to the app's error surface as `what` failing. The job has no parent: BackgroundJob keeps it alive
        until it finishes, even past this widget."""
        job = BackgroundJob(fn, what=what)
        job.succeeded.connect(on_succeeded)
        job.start()

    def mark_interrupted_then_refresh(self) -> None:
        """Runs left "running" by a process that died become "incomplete"; then the table loads."""
        repo = self.repo
        self._job(lambda _ctl: repo.mark_interrupted(), self._on_marked_interrupted,
                  what="Marking interrupted benchmark runs")

    def _on_marked_interrupted(self, _count: int) -> None:
        self.refresh()

    def refresh(self) -> None:
        """Reload the table off the GUI thread with the current filters."""
        since = None
        if self.filter_since_check.isChecked():
            d = self.filter_since.date()
            since = datetime(d.year(), d.month(), d.day())
        kwargs = {"model": self.filter_model.text().strip() or None, "label": self.filter_profile.currentData(),
                  "binary": self.filter_binary.text().strip() or None, "since": since,
                  "build": self.filter_build.currentData()}
        repo = self.repo
        # refreshes run as parallel jobs and may finish out of order: only the newest one's rows are shown (an
        # older load finishing last showed a deleted run again)
        self._refresh_seq += 1
        seq = self._refresh_seq

        def load(_ctl):
            runs = repo.list_overview(**kwargs)
            groups = {gid: repo.get_group(gid) for gid in {r.group_id for r in runs if r.group_id is not None}}
            return seq, runs, repo.labels(), groups, repo.builds()

        self._job(load, self._on_loaded, what="Loading the benchmark history")

    def _fill_builds(self, builds) -> None:
        current = self.filter_build.currentData()
        self.filter_build.blockSignals(True)
        self.filter_build.clear()
        self.filter_build.addItem("all builds", None)
        for b in builds:
            self.filter_build.addItem(f"build {b.short}" + (f" · {b.driver_text}" if b.driver_text else ""), b.key)
            self.filter_build.setItemData(self.filter_build.count() - 1, b.describe(), Qt.ItemDataRole.ToolTipRole)
        self.filter_build.setCurrentIndex(max(0, self.filter_build.findData(current)))
        self.filter_build.blockSignals(False)

    def _on_loaded(self, result) -> None:
        seq, runs, labels, groups, *builds = result  # (the builds: a load made before the filter had none)
        if seq != self._refresh_seq:
            return
        self.model.set_runs(runs, groups)
        if builds:
            self._fill_builds(builds[0])
        current = self.filter_profile.currentData()
        self.filter_profile.blockSignals(True)
        self.filter_profile.clear()
        self.filter_profile.addItem("all profiles", None)
        for label in labels:
            self.filter_profile.addItem(label, label)
        idx = self.filter_profile.findData(current)
        self.filter_profile.setCurrentIndex(max(0, idx))
        self.filter_profile.blockSignals(False)
        self.hint.setText("" if runs else "No runs yet. Set a benchmark in the Run tab and press Run; "
                          "every run appears here, also after a restart.")

    def selected_runs(self) -> list[BenchRun]:
        """The selected rows' runs as listed (light repetitions: `repo.get_run` has the whole record)."""
        rows = sorted({i.row() for i in self.view.selectionModel().selectedRows()})
        return [self.proxy.index(r, 0).data(RUN_ROLE) for r in rows]

    def _on_view_double_clicked(self, index) -> None:
        listed = self.proxy.index(index.row(), 0).data(RUN_ROLE)
        if listed is None:
            return
        repo = self.repo

        def load(_ctl):
            run = repo.get_run(listed.id)
            group = [] if run is None or run.group_id is None else repo.list_runs(group_id=run.group_id)
            return run, sorted(group, key=lambda r: r.id)

        self._job(load, self._on_run_loaded, what=f"Opening run #{listed.id}")

    def _on_run_loaded(self, loaded) -> None:
        run, group = loaded
        if run is not None:
            self.run_opened.emit(run, group)

    def _on_rerun_clicked(self) -> None:
        runs = self.selected_runs()
        if not runs:
            self.hint.setText("Select a run to re-run it with the same command line and benchmark.")
            return
        self.rerun_requested.emit(runs[0])

    def _on_delete_clicked(self) -> None:
        runs = self.selected_runs()
        if not runs:
            self.hint.setText("Select the run(s) to delete.")
            return
        ids = ", ".join(str(r.id) for r in runs)
        answer = QMessageBox.question(self, "Delete runs", f"Delete run(s) {ids} and their repetitions? "
                                      "This cannot be undone.")
        if answer != QMessageBox.StandardButton.Yes:
            return
        repo, run_ids = self.repo, [r.id for r in runs]
        self.hint.setText(f"Deleting run(s) {ids}…")
        self._job(lambda _ctl: [repo.delete_run(i) for i in run_ids], self._on_runs_deleted,
                  what=f"Deleting run(s) {ids}")  # SQL off the GUI thread: a big run's repetitions take a while

    def _on_runs_deleted(self, _results) -> None:
        self.hint.setText("")
        self.ctx.state.bench_runs_changed.emit()

    def _on_compare_clicked(self) -> None:
        runs = self.selected_runs()
        if len(runs) != 2:
            self.hint.setText("Select exactly two runs (Ctrl+click) to compare them.")
            return
        a, b = sorted(runs, key=lambda r: r.id)
        self.ctx.state.compare_requested.emit(a.id, b.id)

    def _on_export_clicked(self) -> None:
        runs = self.selected_runs()
        if not runs:
            self.hint.setText("Select the run(s) to export.")
            return
        folder = QFileDialog.getExistingDirectory(self, "Export to folder")
        if not folder:
            return
        self._export_to = (Path(folder), ("md", "csv", "json")[self.export_combo.currentIndex()])
        repo, ids = self.repo, [r.id for r in runs]
        self._job(lambda _ctl: [r for r in map(repo.get_run, ids) if r is not None], self._on_export_loaded,
                  what="Reading the runs to export")

    def _on_export_loaded(self, runs: list[BenchRun]) -> None:
        self.export_runs(runs, *self._export_to)

    def export_runs(self, runs: list[BenchRun], folder: Path, fmt: str) -> list[Path]:
        """Write each (whole) run; PNG plots are drawn here, on the GUI thread: they are widgets."""
        paths = [export_run(r, folder, fmt, plots=render_run_plots if fmt == "md" else None) for r in runs]
        self.hint.setText("Exported: " + ", ".join(str(p) for p in paths))
        return paths
