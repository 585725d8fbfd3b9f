"""Models panel (left dock): the model library, searchable and sortable, with details and tensors.

The list appears at once (names and sizes from the file system); architecture, parameters,
quantisation and the rest fill in as headers are read off the GUI thread (progress bar, Cancel).
Roots are the user's model folders plus the demo model. Selecting a model publishes it through
`ctx.state.select_model(path)`. The view's state (folders, what the scan found, the summary, the details'
text) is a `state.models.ModelsState`; the panel binds its widgets to it and runs the scan.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QTableView,
    QTabWidget,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core.gguf_info import ModelInfo
from llm_tuner.qt.context import AppContext
from llm_tuner.qt.model_table import (
    ERROR_ROLE,
    PATH_ROLE,
    SORT_ROLE,
    LibraryScan,
    ModelTableModel,
    TensorTableModel,
)
from llm_tuner.services.settings_store import save_settings
from llm_tuner.state.models import NOTHING_SELECTED, ModelsState, details_html, reading_html

if TYPE_CHECKING:
    from llm_tuner.ui.dialogs.get_models_dialog import GetModelsDialog

# the columns after the name kept in sight beside it: parameters, quant, size, layers (then arch)
IN_SIGHT = 4
EMPTY_HINT = ("<p><b>No models yet.</b></p><p>Click <b>Add folder…</b> and choose a folder that holds "
              "<code>.gguf</code> files (sub-folders are searched too).</p><p>The demo model appears here "
              "once installed: <code>python -m llm_tuner.services.demo_model</code>.</p>")


class _ModelProxy(QSortFilterProxyModel):
    """Search over every column; unreadable files in red."""

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if role == Qt.ItemDataRole.ForegroundRole and index.column() in (0, 9):
            if super().data(index, ERROR_ROLE):
                return QColor("#c0392b")
        return super().data(index, role)


class ModelsPanel(QWidget):
    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.models_state = ModelsState(ctx.settings.model_folders)
        self.get_models_dialog: GetModelsDialog | None = None
        self.scanner = LibraryScan(ctx.engine, self)
        self.model = ModelTableModel(self)
        self.proxy = _ModelProxy(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(SORT_ROLE)
        self.proxy.setFilterKeyColumn(-1)
        self.proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.tensor_model = TensorTableModel(self)
        self.tensor_proxy = QSortFilterProxyModel(self)
        self.tensor_proxy.setSourceModel(self.tensor_model)
        self.tensor_proxy.setSortRole(SORT_ROLE)
        self.tensor_proxy.setFilterKeyColumn(-1)
        self.tensor_proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self._build()

        self.scanner.entries_listed.connect(self._on_scanner_entries_listed)
        self.scanner.model_read.connect(self._on_scanner_model_read)
        self.scanner.skipped.connect(self._on_scanner_skipped)
        self.scanner.progressed.connect(self._on_scanner_progressed)
        self.scanner.finished.connect(self._on_scanner_finished)
        ctx.state.settings_changed.connect(self._on_app_settings_changed)
        ctx.state.select_model_requested.connect(self._on_state_select_model_requested)  # the quick start
        self.models_state.add_callback(self._on_state_changed)
        self.rescan()

    # -- construction -------------------------------------------------------------------------
    def _build(self) -> None:
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        top = QHBoxLayout()
        self.search_edit = QLineEdit()
        self.search_edit.setPlaceholderText("Search models (name, arch, quant…)")
        self.search_edit.setClearButtonEnabled(True)
        self.search_edit.textChanged.connect(self.proxy.setFilterFixedString)
        self.add_folder_button = QPushButton("Add folder…")
        self.add_folder_button.setToolTip("Add a folder with .gguf files to the library (searched "
                                          "recursively)")
        self.add_folder_button.clicked.connect(self._on_add_folder_clicked)
        self.rescan_button = QPushButton("Rescan")
        self.rescan_button.setToolTip("Look for new, changed or removed files (unchanged ones come from the "
                                      "cache)")
        self.rescan_button.clicked.connect(self.rescan)
        self.get_models_button = QPushButton("Get models…")
        self.get_models_button.setToolTip("Search a model hub, see each file's memory plan here, download it")
        self.get_models_button.clicked.connect(self.open_get_models)
        top.addWidget(self.search_edit, 1)
        top.addWidget(self.get_models_button)
        top.addWidget(self.add_folder_button)
        top.addWidget(self.rescan_button)
        layout.addLayout(top)

        prog = QHBoxLayout()
        self.progress_bar = QProgressBar()
        self.progress_bar.setTextVisible(True)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.scanner.cancel)
        prog.addWidget(self.progress_bar, 1)
        prog.addWidget(self.cancel_button)
        self.progress_row = QWidget()
        self.progress_row.setLayout(prog)
        prog.setContentsMargins(0, 0, 0, 0)
        self.progress_row.hide()
        layout.addWidget(self.progress_row)

        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, Qt.SortOrder.AscendingOrder)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        # Arch after Layers: name, parameters, quant, size and layers first
        header.moveSection(1, IN_SIGHT + 1)
        self.table.setColumnWidth(0, 200)
        self.table.viewport().installEventFilter(self)  # the dock resized: the name column follows
        self.table.selectionModel().currentRowChanged.connect(self._on_table_current_changed)

        self.empty_label = QLabel(EMPTY_HINT)
        self.empty_label.setWordWrap(True)
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setTextFormat(Qt.TextFormat.RichText)
        self.list_stack = QStackedWidget()
        self.list_stack.addWidget(self.table)
        self.list_stack.addWidget(self.empty_label)

        self.details = QTextBrowser()
        self.details.setOpenLinks(False)
        self.details.setHtml(NOTHING_SELECTED)
        tensor_page = QWidget()
        tl = QVBoxLayout(tensor_page)
        tl.setContentsMargins(0, 0, 0, 0)
        self.tensor_search = QLineEdit()
        self.tensor_search.setPlaceholderText("Filter tensors (e.g. blk.3. or exps)")
        self.tensor_search.setClearButtonEnabled(True)
        self.tensor_search.textChanged.connect(self.tensor_proxy.setFilterFixedString)
        self.tensor_table = QTableView()
        self.tensor_table.setModel(self.tensor_proxy)
        self.tensor_table.setSortingEnabled(True)
        self.tensor_table.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)  # file order
        self.tensor_table.verticalHeader().hide()
        self.tensor_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.tensor_table.horizontalHeader().setStretchLastSection(True)
        self.tensor_table.setColumnWidth(0, 220)
        tl.addWidget(self.tensor_search)
        tl.addWidget(self.tensor_table)
        self.detail_tabs = QTabWidget()
        self.detail_tabs.addTab(self.details, "Details")
        self.detail_tabs.addTab(tensor_page, "Tensors")

        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.list_stack)
        splitter.addWidget(self.detail_tabs)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        layout.addWidget(splitter, 1)
        self.summary_label = QLabel("")
        layout.addWidget(self.summary_label)

    def sizeHint(self):  # noqa: N802 - Qt override: wide enough for name, arch, params, quant, size
        hint = super().sizeHint()
        hint.setWidth(max(hint.width(), 520))
        return hint

    # -- actions ------------------------------------------------------------------------------
    def rescan(self) -> None:
        roots = self.models_state.begin_scan()
        self.progress_bar.setRange(0, 0)
        self.progress_bar.setFormat("Looking for .gguf files…")
        self.progress_row.show()
        self.scanner.start(roots)

    def add_folder(self, folder: str) -> None:
        """Append a folder to the settings' model folders, save, and rescan."""
        folders = self.models_state.with_folder(folder)
        if folders is None:
            self.rescan()
            return
        settings = self.ctx.settings.model_copy(update={"model_folders": folders})
        save_settings(settings)
        self.ctx.settings = settings  # the workspace says "settings": _on_app_settings_changed rescans

    def open_get_models(self) -> GetModelsDialog:
        """The Get models dialog (one, kept while the panel lives): a downloaded model is listed and
        selected."""
        if self.get_models_dialog is None:
            # imported when first opened: huggingface_hub takes ~1 s to import, the window must not wait for
            # it
            from llm_tuner.ui.dialogs.get_models_dialog import GetModelsDialog  # noqa: PLC0415

            self.get_models_dialog = GetModelsDialog(self.ctx, self)
            self.get_models_dialog.model_downloaded.connect(self._on_get_models_downloaded)
        self.get_models_dialog.show()
        self.get_models_dialog.raise_()
        return self.get_models_dialog

    def _on_get_models_downloaded(self, path: str, folder: str) -> None:
        if self.models_state.downloaded(path, folder):
            self.rescan()
        else:
            self.add_folder(folder)

    def select_path(self, path: str) -> bool:
        row = self.model.row_of(path)
        if row is None:
            return False
        index = self.proxy.mapFromSource(self.model.index(row, 0))
        if not index.isValid():
            return False
        self.table.setCurrentIndex(index)
        return True

    # -- slots ----------------------------------------------------------------------------------
    def _on_state_select_model_requested(self, path: Path) -> None:
        """Select the file in the list (the profile follows); one not listed is picked all the same."""
        if self.select_path(str(path)):
            self.ctx.state.workspace.post_status(f"Selected the model {path.name}.")
        else:
            self.ctx.state.workspace.model_path = path

    def _on_add_folder_clicked(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Add a model folder", str(Path.home()))
        if folder:
            self.add_folder(folder)

    def _on_app_settings_changed(self, settings) -> None:
        self.models_state.set_folders(settings.model_folders)  # another list: "folders" rescans

    def _on_state_changed(self, what: str) -> None:
        if what == "folders":
            self.rescan()
        elif what == "summary":
            text, tip = self.models_state.summary()
            self.summary_label.setText(text)
            self.summary_label.setToolTip(tip)

    def _on_scanner_entries_listed(self, entries) -> None:
        current = self._current_path()
        self.model.set_entries(entries)
        self.models_state.listed(entries)
        self.list_stack.setCurrentWidget(self.table if entries else self.empty_label)
        chosen = self.ctx.state.model_path
        for path in self.models_state.to_select(current, str(chosen) if chosen is not None else None):
            if self.select_path(path):
                break
        if entries:
            self.progress_bar.setRange(0, 1000)
            self.progress_bar.setValue(0)

    def _on_scanner_skipped(self, path: str, reason: str) -> None:
        self.models_state.skipped(path, reason)

    def _on_scanner_model_read(self, info: ModelInfo) -> None:
        self.model.update_info(info)
        self.models_state.read(info)
        if info.path == self._current_path():
            self._show_details(info)

    def _on_scanner_progressed(self, fraction: float, text: str) -> None:
        if fraction < 0:
            self.progress_bar.setRange(0, 0)
        else:
            self.progress_bar.setRange(0, 1000)
            self.progress_bar.setValue(int(fraction * 1000))
        if text:
            self.progress_bar.setFormat(text)

    def _on_scanner_finished(self, cancelled: bool) -> None:
        if self.scanner.running:  # a newer scan replaced this one
            return
        self.progress_row.hide()
        self.models_state.finished(cancelled)
        self._fit_columns()

    def _fit_columns(self) -> None:
        """Each column as wide as its cells and its title (without the room Qt's header keeps on every title
        for a sort arrow: 28 px each), then the name column takes what is left of the list's width so that the
        first columns stay in sight: Size and Layers were cut off in a 390 px dock (1366x768)."""
        table, header = self.table, self.table.horizontalHeader()
        fm = header.fontMetrics()
        for c in range(1, header.count()):
            title = str(table.model().headerData(c, Qt.Orientation.Horizontal) or "")
            wide = max(table.sizeHintForColumn(c), fm.horizontalAdvance(title) + 22)
            table.setColumnWidth(c, min(240, wide))
        self._fit_name_column()

    def _fit_name_column(self) -> None:
        table, header = self.table, self.table.horizontalHeader()
        others = sum(header.sectionSize(header.logicalIndex(v)) for v in range(1, IN_SIGHT + 1))
        room = table.viewport().width() - others
        table.setColumnWidth(0, max(90, min(table.sizeHintForColumn(0), 240, room)))

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt override
        if obj is self.table.viewport() and event.type() == QEvent.Type.Resize:
            self._fit_name_column()
        return super().eventFilter(obj, event)

    def _on_table_current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if not current.isValid():
            return
        src = self.proxy.mapToSource(current)
        r = self.model.row_at(src.row())
        if r is None:
            return
        if r.info is None:
            self.details.setHtml(reading_html(r.entry.file_name))
            self.tensor_model.set_tensors(())
        else:
            self._show_details(r.info)
        if self.models_state.publishes(r.info):
            self.ctx.state.select_model(Path(r.entry.path))

    # -- helpers -------------------------------------------------------------------------------
    def _current_path(self) -> str | None:
        index = self.table.currentIndex()
        return index.data(PATH_ROLE) if index.isValid() else None

    def _show_details(self, info: ModelInfo) -> None:
        self.tensor_model.set_tensors(info.tensors)
        self.details.setHtml(details_html(info))
