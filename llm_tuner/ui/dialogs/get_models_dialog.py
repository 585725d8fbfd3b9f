"""Get models: search a model hub, see each GGUF file's memory plan on this machine before downloading it,
download it into a models folder (progress, cancel, resume, checksum), and find it in Models.

Opened from the Models panel. Every network call runs off the GUI thread (`qt.workers`, `qt.hub_jobs`); the
hub and the token come from the environment (`HF_ENDPOINT`, `HF_TOKEN`: see services.hub), and the token is
never shown. The plan is `llama-server -m FILE` with llama.cpp's defaults, from the file's header alone; beside
it each file's predicted speed on this machine (llm_tuner.state.get_models, core.speed).
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
from llm_tuner.core.memory import MemoryPlan
from llm_tuner.core.units import format_bytes, format_params
from llm_tuner.qt.context import AppContext
from llm_tuner.qt.hub_jobs import RemotePlans, download_job
from llm_tuner.qt.workers import BackgroundJob, state_run
from llm_tuner.services.hub import (
    DownloadCancelled,
    Hub,
    describe_error,
    download_folder,
    list_gguf_models,
    plan_text,
    search_models,
)
from llm_tuner.services.speed import load_basis
from llm_tuner.state.get_models import SPEED_COLUMN, GetModelsState
from llm_tuner.state.speed import SpeedModel

FILE_COLUMNS = ("File", "Quant", "Size", "Checksum", "Memory plan (llama-server defaults)", "Fits", SPEED_COLUMN)
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
        self.models: list[RemoteModel] = []
        self.infos: dict[int, ModelInfo] = {}
        self.plans: dict[int, MemoryPlan | None] = {}
        self._jobs: list[BackgroundJob] = []
        self._download: BackgroundJob | None = None
        self._listing_for: str | None = None
        self.plans_reader = RemotePlans(self)
        self.plans_reader.model_read.connect(self._on_plans_reader_model_read)
        speed = SpeedModel(lambda: load_basis(ctx.engine), run=state_run(self, "Reading the speed calibration"))
        self.state = GetModelsState(speed, lambda: ctx.state.inventory)
        self.state.add_callback(lambda *_a: self._show_speeds())
        self._build()
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
        self.file_table.currentCellChanged.connect(lambda *_: self._update_buttons())
        self.file_table.horizontalHeader().setSectionResizeMode(SPEED_COL, QHeaderView.ResizeMode.ResizeToContents)
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
        self.folder_combo.setToolTip("The models folder the file goes to; it is added to Models if it is not there")
        for folder in self.ctx.settings.model_folders or [str(download_folder(self.ctx.settings))]:
            self.folder_combo.addItem(folder)
        self.choose_button = QPushButton("Choose…")
        self.choose_button.clicked.connect(self._on_choose_clicked)
        self.download_button = QPushButton("Download")
        self.download_button.clicked.connect(self.download)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop the download (closing this window does too); what was downloaded is "
                                      "kept, and Download goes on from there")
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

    # -- search and listing -----------------------------------------------------------------------
    def search(self) -> None:
        query = self.search_edit.text().strip()
        if not query:
            return
        self.status_label.setText(f"Searching for “{html.escape(query)}”…")
        self.search_button.setEnabled(False)
        hub = self.hub
        self._run(BackgroundJob(lambda _c: search_models(hub, query), self, what="Searching the model hub",
                                on_failed=lambda exc: self._say_failure("The search failed", exc)),
                  self._on_search_done, long=False)

    def _on_search_done(self, hits) -> None:
        self.search_button.setEnabled(True)
        self.repo_table.setRowCount(0)
        for hit in hits:
            r = self.repo_table.rowCount()
            self.repo_table.insertRow(r)
            self.repo_table.setItem(r, 0, _item(hit.repo_id, "gated: ask for access on the hub, set HF_TOKEN"
                                                if hit.gated else ""))
            self.repo_table.setItem(r, 1, _item(f"{hit.downloads:,}" if hit.downloads is not None else "—"))
            self.repo_table.setItem(r, 2, _item(f"{hit.likes:,}" if hit.likes is not None else "—"))
            self.repo_table.setItem(r, 3, _item(hit.last_modified or "—"))
        self.status_label.setText(f"{len(hits)} repositor{'y' if len(hits) == 1 else 'ies'} with GGUF files"
                                  if hits else "No repository with GGUF files matches. Try fewer words.")

    def _on_repo_table_current_changed(self, row: int, *_args) -> None:
        item = self.repo_table.item(row, 0) if row >= 0 else None
        if item is not None:
            self.list_repo(item.text())

    def list_repo(self, repo_id: str) -> None:
        """List `repo_id`'s GGUF models, then read each one's header and plan (off the GUI thread)."""
        self.plans_reader.cancel()
        self._listing_for = repo_id
        self.models, self.infos, self.plans = [], {}, {}
        self.file_table.setRowCount(0)
        self.files_label.setText(f"Listing <b>{html.escape(repo_id)}</b>…")
        hub = self.hub
        self._run(BackgroundJob(lambda _c: list_gguf_models(hub, repo_id), self, what="Listing the repository's models",
                                on_failed=lambda exc, r=repo_id: self._on_list_failed(r, exc)),
                  lambda models, r=repo_id: self._on_listed(r, models), long=False)

    def _on_list_failed(self, repo_id: str, exc: BaseException) -> None:
        if repo_id == self._listing_for:
            self.files_label.setText(f"<b>{html.escape(repo_id)}</b>: could not list its files.")
            self._say_failure("Listing failed", exc)

    def _on_listed(self, repo_id: str, models: list[RemoteModel]) -> None:
        if repo_id != self._listing_for:
            return
        self.models = list(models)
        self.file_table.setRowCount(len(models))
        for r, m in enumerate(models):
            name = m.name + ("" if m.complete else " (parts missing)")
            self.file_table.setItem(r, 0, _item(name, "\n".join(f.path for f in m.files)))
            self.file_table.setItem(r, 1, _item(m.quant or "—"))
            self.file_table.setItem(r, 2, _item(format_bytes(m.size_bytes)))
            self.file_table.setItem(r, 3, _item("sha256" if m.has_checksums else "none",
                                                "The download is checked against the repository's sha256"
                                                if m.has_checksums else "The repository gives no checksum"))
            self.file_table.setItem(r, PLAN_COL, _item("reading header…"))
            self.file_table.setItem(r, FITS_COL, _item(""))
            self.file_table.setItem(r, SPEED_COL, _item(""))
        self.file_table.resizeColumnToContents(0)
        if models:
            self.files_label.setText(
                f"<b>{html.escape(repo_id)}</b>: {len(models)} GGUF file{'' if len(models) == 1 else 's'}. Each "
                "plan is read from the file's header alone (a few MiB, with range requests): nothing is "
                "downloaded until you press Download.")
            self.file_table.selectRow(0)
            self.plans_reader.start(self.hub, self.models, self.ctx.state.inventory)
        else:
            self.files_label.setText(f"<b>{html.escape(repo_id)}</b> has no GGUF files.")
        self._update_buttons()

    def _on_plans_reader_model_read(self, generation: int, index: int, info: ModelInfo, plan) -> None:
        if generation != self.plans_reader.generation or index >= len(self.models):
            return
        self.infos[index], self.plans[index] = info, plan
        self._show_speed(index)
        if info.error:
            self.file_table.setItem(index, PLAN_COL, _item(f"header not read: {info.error}", info.error))
            self.file_table.setItem(index, FITS_COL, _item("?"))
            return
        if info.file_type:
            self.file_table.setItem(index, 1, _item(info.file_type, "from the file's header"))
        if plan is None:
            self.file_table.setItem(index, PLAN_COL, _item("projector: planned with its main model (--mmproj)"))
            return
        tip = "\n".join([f"{info.display_name()}: {info.architecture}, {format_params(info.n_params)} parameters",
                         *plan.warnings])
        self.file_table.setItem(index, PLAN_COL, _item(plan_text(plan), tip))
        fits = {True: "yes", False: "no", None: "?"}[plan.fits]
        self.file_table.setItem(index, FITS_COL, _item(fits, "" if plan.fits is not None else
                                                       "This machine's memory is not known yet"))

    def _show_speed(self, index: int) -> None:
        if index in self.infos:
            self.file_table.setItem(index, SPEED_COL, _item(*self.state.speed_cell(self.infos[index],
                                                                                    self.plans.get(index))))

    def _show_speeds(self) -> None:
        self.speed_basis_label.setText(self.state.basis_line())
        for index in range(min(len(self.models), self.file_table.rowCount())):
            self._show_speed(index)

    # -- download ---------------------------------------------------------------------------------
    def selected_model(self) -> RemoteModel | None:
        row = self.file_table.currentRow()
        return self.models[row] if 0 <= row < len(self.models) else None

    def download(self) -> None:
        model = self.selected_model()
        if model is None or self._download is not None:
            return
        folder = Path(self.folder_combo.currentText()).expanduser()
        job = download_job(self.hub, model, folder, self, on_failed=self._on_download_failed)
        job.progressed.connect(self._on_download_progressed)
        self._download = job
        self.progress_bar.setValue(0)
        self.progress_bar.setFormat(f"Starting {model.file_name}…")
        self.progress_bar.show()
        self.status_label.setText("")
        self._run(job, lambda path, f=folder: self._on_downloaded(Path(path), f), long=True)
        self._update_buttons()

    def cancel_download(self) -> None:
        if self._download is not None:
            self._download.cancel()
            self.progress_bar.setFormat("Cancelling…")

    def _on_download_progressed(self, fraction: float, text: str) -> None:
        self.progress_bar.setValue(int(max(0.0, fraction) * 1000))
        self.progress_bar.setFormat(text)

    def _on_downloaded(self, path: Path, folder: Path) -> None:
        self._download = None
        self.progress_bar.setValue(1000)
        self.progress_bar.setFormat(f"{path.name}: done")
        self.status_label.setText(f"Saved <code>{html.escape(str(path))}</code>; it is listed in Models.")
        self._update_buttons()
        self.model_downloaded.emit(str(path), str(folder))

    def _on_download_failed(self, exc: BaseException) -> None:
        self._download = None
        self._update_buttons()
        if isinstance(exc, DownloadCancelled):
            self.progress_bar.setFormat("Cancelled: Download goes on from here")
            self.status_label.setText("Cancelled. What was downloaded is kept; Download goes on from there.")
            return
        self.progress_bar.hide()
        self._say_failure("The download failed", exc)

    # -- helpers ----------------------------------------------------------------------------------
    def _on_choose_clicked(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Save models to", self.folder_combo.currentText())
        if folder:
            self.choose_folder(folder)

    def choose_folder(self, folder: str) -> None:
        if self.folder_combo.findText(folder) < 0:
            self.folder_combo.addItem(folder)
        self.folder_combo.setCurrentText(folder)

    def _run(self, job: BackgroundJob, on_ok, *, long: bool) -> None:
        job.succeeded.connect(on_ok)
        self._jobs.append(job)
        job.finished.connect(lambda j=job: self._jobs.remove(j) if j in self._jobs else None)
        job.start(long=long)

    def _say_failure(self, what: str, exc: BaseException) -> None:
        self.search_button.setEnabled(True)
        why = describe_error(exc, self.hub)
        self.status_label.setText(f"<span style='color:#c0392b'>{html.escape(what)}: {html.escape(why)}</span>")

    def _update_buttons(self) -> None:
        model = self.selected_model()
        busy = self._download is not None
        self.download_button.setEnabled(model is not None and model.complete and not busy)
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
