"""Get models: search a model hub, see each GGUF file's memory plan on this machine before downloading it,
download it into a models folder (progress, cancel, resume, checksum), and find it in Models.

Opened from the Models panel. Every network call runs off the GUI thread (`qt.workers`, `qt.hub_jobs`); the
hub and the token come from the environment (`HF_ENDPOINT`, `HF_TOKEN`: see services.hub), and the token is
never shown. The plan is `llama-server -m FILE` with llama.cpp's defaults, from the file's header alone;
beside it each file's predicted speed on this machine (core.speed). The widgets bind to
state.get_models.GetModelsState (the hits, the files and their cells, the file chosen, the folder, the
download's progress and words); the header reads and the download are Qt jobs here whose results go to the
state.
"""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import QCoreApplication, Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core.gguf_info import ModelInfo
from llm_tuner.core.hub_files import RemoteModel
from llm_tuner.qt.context import AppContext
from llm_tuner.qt.hub_jobs import RemotePlans, download_job
from llm_tuner.qt.workers import BackgroundJob, state_run
from llm_tuner.services.hub import Hub, download_folder
from llm_tuner.services.speed import load_basis
from llm_tuner.state.get_models import SPEED_COLUMN, GetModelsState
from llm_tuner.state.speed import SpeedModel

FILE_COLUMNS = (
    "File", "Quant", "Size", "Checksum", "Memory plan (llama-server defaults)", "Fits", SPEED_COLUMN
)
PLAN_COL, FITS_COL, SPEED_COL = 4, 5, 6


def _item(text: str, tip: str = "") -> QTableWidgetItem:
    it = QTableWidgetItem(text)
    it.setFlags(it.flags() & ~Qt.ItemFlag.ItemIsEditable)
    if tip:
        it.setToolTip(tip)
    return it


class GetModelsDialog(QDialog):
    """Search, plan before downloading, download; `model_downloaded(path, folder)` when a file is in place."""

    model_downloaded = Signal(str, str)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.hub = Hub.from_env()
        self.setWindowTitle("Get models")
        self.resize(980, 620)
        self._jobs: list[BackgroundJob] = []
        self._download: BackgroundJob | None = None
        self.plans_reader = RemotePlans(self)
        self.plans_reader.model_read.connect(self._on_plans_reader_model_read)
        speed = SpeedModel(lambda: load_basis(ctx.engine),
                           run=state_run(self, "Reading the speed calibration"))
        folders = ctx.settings.model_folders or [str(download_folder(ctx.settings))]
        self.state = GetModelsState(speed, lambda: ctx.state.inventory, hub=self.hub, folders=folders,
                                    run=state_run(self, "Searching or listing the model hub"))
        self._build()
        self.state.add_callback(self._on_get_models_state_changed)
        speed.load()
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)  # a download in progress stops (and resumes next time)

    # -- construction ---------------------------------------------------------------------------
    def _build(self) -> None:
        layout = QVBoxLayout(self)
        top = QHBoxLayout()
        self.search_edit = QLineEdit()
        self.search_edit.setPlaceholderText("Search models by name (e.g. qwen3 8b, gemma 3)")
        self.search_edit.setClearButtonEnabled(True)
        self.search_edit.returnPressed.connect(self.search)
        self.search_button = QPushButton("Search")
        self.search_button.clicked.connect(self.search)
        top.addWidget(self.search_edit, 1)
        top.addWidget(self.search_button)
        layout.addLayout(top)
        self.hub_label = QLabel(f"Hub: <code>{html.escape(self.hub.endpoint)}</code> (HF_ENDPOINT)"
                                + (" · token from HF_TOKEN" if self.hub.token else ""))
        self.hub_label.setToolTip("Set HF_ENDPOINT for a mirror, HF_TOKEN for gated or private repositories "
                                  "(the token is sent to the hub only, and never shown)")
        layout.addWidget(self.hub_label)

        self.repo_table = QTableWidget(0, 4)
        self.repo_table.setHorizontalHeaderLabels(["Repository", "Downloads", "Likes", "Updated"])
        self.repo_table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.repo_table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.repo_table.verticalHeader().hide()
        self.repo_table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.repo_table.currentCellChanged.connect(self._on_repo_table_current_changed)

        files_page = QWidget()
        fl = QVBoxLayout(files_page)
        fl.setContentsMargins(0, 0, 0, 0)
        self.files_label = QLabel("Choose a repository to see its GGUF files.")
        self.files_label.setWordWrap(True)
        self.file_table = QTableWidget(0, len(FILE_COLUMNS))
        self.file_table.setHorizontalHeaderLabels(list(FILE_COLUMNS))
        self.file_table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.file_table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.file_table.verticalHeader().hide()
        self.file_table.horizontalHeader().setSectionResizeMode(PLAN_COL, QHeaderView.ResizeMode.Stretch)
        self.file_table.currentCellChanged.connect(lambda row, *_: self.state.select(row))
        self.file_table.horizontalHeader().setSectionResizeMode(SPEED_COL,
                                                                QHeaderView.ResizeMode.ResizeToContents)
        self.speed_basis_label = QLabel()  # what the predicted speeds rest on (calibrated or default costs)
        self.speed_basis_label.setWordWrap(True)
        self.speed_basis_label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        fl.addWidget(self.files_label)
        fl.addWidget(self.file_table, 1)
        fl.addWidget(self.speed_basis_label)

        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.repo_table)
        splitter.addWidget(files_page)
        splitter.setStretchFactor(0, 1)
        splitter.setStretchFactor(1, 2)
        layout.addWidget(splitter, 1)

        dest = QHBoxLayout()
        dest.addWidget(QLabel("Save to:"))
        self.folder_combo = QComboBox()
        self.folder_combo.setToolTip("The models folder the file goes to; it is added to Models if it is not "
                                     "there")
        self._fill_folders()
        self.folder_combo.textActivated.connect(self.state.choose_folder)
        self.choose_button = QPushButton("Choose…")
        self.choose_button.clicked.connect(self._on_choose_clicked)
        self.download_button = QPushButton("Download")
        self.download_button.clicked.connect(self.download)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop the download (closing this window does too); what was "
                                      "downloaded is kept, and Download goes on from there")
        self.cancel_button.clicked.connect(self.cancel_download)
        dest.addWidget(self.folder_combo, 1)
        dest.addWidget(self.choose_button)
        dest.addWidget(self.download_button)
        dest.addWidget(self.cancel_button)
        layout.addLayout(dest)
        self.progress_bar = QProgressBar()
        self.progress_bar.setRange(0, 1000)
        self.progress_bar.setTextVisible(True)
        self.progress_bar.hide()
        layout.addWidget(self.progress_bar)
        self.status_label = QLabel("")
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.status_label)
        self._update_buttons()

    # -- binding ----------------------------------------------------------------------------------
    def _on_get_models_state_changed(self, what: str, *details: object) -> None:
        st = self.state
        if what == "status":
            self.status_label.setText(st.status)
        elif what == "searching":
            self.search_button.setEnabled(not st.searching)
        elif what == "hits":
            self._fill_hits()
        elif what == "files_line":
            self.files_label.setText(st.files_line)
        elif what == "models":
            self._fill_files()
        elif what == "row" and isinstance(details[0], int):
            self._fill_row(details[0])
        elif what == "speeds":
            self._show_speeds()
        elif what == "selected":
            if self.file_table.currentRow() != st.selected:
                self.file_table.selectRow(st.selected)
            self._update_buttons()
        elif what == "folders":
            self._fill_folders()
        elif what == "downloading":
            self._update_buttons()
        elif what == "progress":
            self._show_progress()

    def _fill_hits(self) -> None:
        rows = self.state.hit_rows()
        self.repo_table.setRowCount(len(rows))
        for r, hit in enumerate(rows):
            for c, (text, tip) in enumerate(((hit.repo_id, hit.tip), (hit.downloads, ""), (hit.likes, ""),
                                             (hit.updated, ""))):
                self.repo_table.setItem(r, c, _item(text, tip))

    def _fill_files(self) -> None:
        n = len(self.state.models)
        self.file_table.setRowCount(n)
        for r in range(n):
            self._fill_row(r)
        self.file_table.resizeColumnToContents(0)
        if n:
            self.plans_reader.start(self.hub, list(self.state.models), self.ctx.state.inventory)
        self._update_buttons()

    def _fill_row(self, index: int) -> None:
        if index < self.file_table.rowCount():
            for c, (text, tip) in enumerate(self.state.row_cells(index)):
                self.file_table.setItem(index, c, _item(text, tip))

    def _show_speeds(self) -> None:
        self.speed_basis_label.setText(self.state.basis_line())
        for index in range(min(len(self.state.models), self.file_table.rowCount())):
            self.file_table.setItem(index, SPEED_COL, _item(*self.state.row_cells(index)[SPEED_COL]))

    def _fill_folders(self) -> None:
        self.folder_combo.blockSignals(True)
        self.folder_combo.clear()
        self.folder_combo.addItems(list(self.state.folders))
        self.folder_combo.setCurrentText(self.state.folder)
        self.folder_combo.blockSignals(False)

    def _show_progress(self) -> None:
        progress = self.state.progress
        self.progress_bar.setVisible(progress is not None)
        if progress is not None:
            self.progress_bar.setValue(int(progress[0] * 1000))
            self.progress_bar.setFormat(progress[1])

    # -- search and listing -----------------------------------------------------------------------
    @property
    def models(self) -> list[RemoteModel]:
        return list(self.state.models)

    def search(self) -> None:
        self.state.search(self.search_edit.text())

    def _on_repo_table_current_changed(self, row: int, *_args) -> None:
        item = self.repo_table.item(row, 0) if row >= 0 else None
        if item is not None:
            self.list_repo(item.text())

    def list_repo(self, repo_id: str) -> None:
        """List `repo_id`'s GGUF models, then read each one's header and plan (off the GUI thread)."""
        self.plans_reader.cancel()
        self.state.list_repo(repo_id)

    def _on_plans_reader_model_read(self, generation: int, index: int, info: ModelInfo, plan) -> None:
        if generation == self.plans_reader.generation:
            self.state.header_read(index, info, plan)

    # -- download ---------------------------------------------------------------------------------
    def selected_model(self) -> RemoteModel | None:
        return self.state.selected_model()

    def download(self) -> None:
        if self._download is not None:
            return
        what = self.state.start_download()
        if what is None:
            return
        model, folder = what
        job = download_job(self.hub, model, folder, self, on_failed=self._on_download_failed)
        job.progressed.connect(self.state.download_progressed)
        self._download = job
        self._run(job, lambda path, f=folder: self._on_downloaded(Path(path), f), long=True)

    def cancel_download(self) -> None:
        if self._download is not None:
            self._download.cancel()
            self.state.cancelling()

    def _on_downloaded(self, path: Path, folder: Path) -> None:
        self._download = None
        self.state.downloaded(path)
        self.model_downloaded.emit(str(path), str(folder))

    def _on_download_failed(self, exc: BaseException) -> None:
        self._download = None
        self.state.download_failed(exc)

    # -- helpers ----------------------------------------------------------------------------------
    def _on_choose_clicked(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Save models to", self.folder_combo.currentText())
        if folder:
            self.choose_folder(folder)

    def choose_folder(self, folder: str) -> None:
        self.state.choose_folder(folder)

    def _run(self, job: BackgroundJob, on_ok, *, long: bool) -> None:
        job.succeeded.connect(on_ok)
        self._jobs.append(job)
        job.finished.connect(lambda j=job: self._jobs.remove(j) if j in self._jobs else None)
        job.start(long=long)

    def _update_buttons(self) -> None:
        busy = self.state.downloading
        self.download_button.setEnabled(self.state.can_download)
        self.cancel_button.setEnabled(busy)
        self.folder_combo.setEnabled(not busy)
        self.choose_button.setEnabled(not busy)

    def shutdown(self) -> None:
        """Stop the header reads and a download (its partial file stays for the next Download)."""
        self.plans_reader.cancel()
        for job in list(self._jobs):
            job.cancel()

    def done(self, result: int) -> None:
        self.shutdown()
        super().done(result)
