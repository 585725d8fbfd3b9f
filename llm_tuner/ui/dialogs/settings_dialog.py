"""Settings: model folders, llama.cpp binaries, RPC workers, data folder, telemetry rates, A/B threshold.

Widgets only: the form's values make the settings by state.settings_form's rules; the RPC workers' list is
state.workers.WorkersState's."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core.settings import Settings
from llm_tuner.services.paths import data_dir
from llm_tuner.services.settings_store import data_folder_note, make_data_folder
from llm_tuner.state.settings_form import SettingsForm, edited_settings, form_of, with_folder
from llm_tuner.ui.dialogs.workers_box import WorkersBox


class _PathField(QWidget):
    """A line edit with Browse…; empty means 'find it automatically'."""

    def __init__(self, value: str | None, placeholder: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.edit = QLineEdit(value or "")
        self.edit.setPlaceholderText(placeholder)
        self.edit.setClearButtonEnabled(True)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._on_browse_clicked)
        layout.addWidget(self.edit, 1)
        layout.addWidget(browse)

    def _on_browse_clicked(self) -> None:
        start = self.edit.text() or str(Path.home())
        path, _ = QFileDialog.getOpenFileName(self, "Choose the program", start)
        if path:
            self.edit.setText(path)

    def value(self) -> str:
        """The path as typed ('': find it automatically)."""
        return self.edit.text()


class SettingsDialog(QDialog):
    def __init__(self, settings: Settings, parent: QWidget | None = None, *, pool=None,
                 history_folder: Path | None = None) -> None:
        """`history_folder`: where the open history lives (the data folder's note says when it is that)."""
        super().__init__(parent)
        self._history_folder = history_folder
        self.setWindowTitle("Settings")
        self.resize(860, 760)
        self._settings = settings
        form_values = form_of(settings)
        layout = QVBoxLayout(self)

        layout.addWidget(QLabel("<b>Model folders</b> (searched recursively for .gguf files)"))
        folders_row = QHBoxLayout()
        self.folders = QListWidget()
        self.folders.addItems(list(form_values.model_folders))
        buttons = QVBoxLayout()
        add, remove = QPushButton("Add folder…"), QPushButton("Remove")
        add.clicked.connect(self._on_add_folder_clicked)
        remove.clicked.connect(self._on_remove_folders_clicked)
        buttons.addWidget(add)
        buttons.addWidget(remove)
        buttons.addStretch(1)
        folders_row.addWidget(self.folders, 1)
        folders_row.addLayout(buttons)
        layout.addLayout(folders_row)

        form = QFormLayout()
        auto = "automatic: $LLM_TUNER_LLAMA_…, PATH, then the built-in build"
        self.server_path = _PathField(form_values.llama_server_path, auto)
        self.bench_path = _PathField(form_values.llama_bench_path, auto)
        self.fit_path = _PathField(form_values.llama_fit_params_path, auto)
        form.addRow("llama-server", self.server_path)
        form.addRow("llama-bench", self.bench_path)
        form.addRow("llama-fit-params", self.fit_path)
        self.rpc_server_path = _PathField(form_values.rpc_server_path, auto)
        form.addRow("ggml-rpc-server", self.rpc_server_path)

        self.data_dir = QLineEdit(form_values.data_dir)
        self.data_dir.setPlaceholderText(str(data_dir()))
        self.data_dir.setClearButtonEnabled(True)
        self.data_dir.setToolTip("Where the SQLite history lives. Takes effect at the next start.")
        browse_data = QPushButton("Browse…")
        browse_data.clicked.connect(self._on_browse_data_dir_clicked)
        data_row = QHBoxLayout()
        data_row.addWidget(self.data_dir, 1)
        data_row.addWidget(browse_data)
        form.addRow("Data folder", data_row)
        self.data_dir_note = QLabel()
        self.data_dir_note.setWordWrap(True)
        # a wrapped label's height is reserved for its narrowest width (a tall gap): it is never that narrow
        self.data_dir_note.setMinimumWidth(520)
        form.addRow("", self.data_dir_note)
        self.data_dir.textChanged.connect(self._show_data_dir_note)
        self._show_data_dir_note()

        def rate(value: float, tip: str) -> QDoubleSpinBox:
            box = QDoubleSpinBox()
            box.setRange(0.1, 20.0)
            box.setSingleStep(0.5)
            box.setSuffix(" Hz")
            box.setValue(value)
            box.setToolTip(tip)
            return box

        self.gpu_hz = rate(form_values.gpu_sample_hz, "GPU utilisation, VRAM, power, temperature, clocks")
        self.host_hz = rate(form_values.host_sample_hz, "CPU and RAM of the host and the server process")
        self.metrics_hz = rate(form_values.server_metrics_hz, "llama-server /metrics and /slots")
        form.addRow("GPU sampling", self.gpu_hz)
        form.addRow("Host sampling", self.host_hz)
        form.addRow("Server metrics", self.metrics_hz)
        self.threshold = QDoubleSpinBox()
        self.threshold.setRange(0.0, 50.0)
        self.threshold.setSuffix(" %")
        self.threshold.setValue(form_values.ab_threshold_pct)
        self.threshold.setToolTip("A/B: smallest difference called better/worse (the 95% CI must also "
                                  "exclude zero)")
        form.addRow("A/B practical threshold", self.threshold)
        layout.addLayout(form)
        self.workers = WorkersBox(settings, pool, self)  # pool: the app's WorkerPool (local workers)
        layout.addWidget(self.workers)

        box = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        box.accepted.connect(self.accept)
        box.rejected.connect(self.reject)
        layout.addWidget(box)

    def _on_browse_data_dir_clicked(self) -> None:
        start = self.data_dir.text() or str(data_dir())
        folder = QFileDialog.getExistingDirectory(self, "Choose the data folder", start)
        if folder:
            self.data_dir.setText(folder)

    def _show_data_dir_note(self) -> bool:
        """The note under the data folder (what choosing it means; why it cannot be used, in red). Returns
        whether the folder can be used."""
        usable, note = data_folder_note(self.data_dir.text(), self._history_folder, self._settings.data_dir)
        self._set_data_dir_note(note, usable)
        return usable

    def _set_data_dir_note(self, note: str, usable: bool) -> None:
        self.data_dir_note.setText(note)
        self.data_dir_note.setVisible(bool(note))
        self.data_dir_note.setStyleSheet("" if usable else "color: #c0392b;")

    def accept(self) -> None:
        """Save, creating a newly chosen data folder; not when a folder typed here cannot be used (the next
        start would fall back to the app's own). A saved folder left as it was (its drive not connected now)
        does not stop the other settings from being saved."""
        edited = self.data_dir.text().strip() != (self._settings.data_dir or "")
        if edited and not self._show_data_dir_note():
            self.data_dir.setFocus()
            return
        if edited:
            try:
                make_data_folder(self.data_dir.text())
            except OSError as exc:
                self._set_data_dir_note(f"{self.data_dir.text().strip()} could not be created: "
                                        f"{exc.strerror or exc}", False)
                return
        super().accept()

    def _on_remove_folders_clicked(self) -> None:
        for item in self.folders.selectedItems():
            self.folders.takeItem(self.folders.row(item))

    def _on_add_folder_clicked(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Add a model folder", str(Path.home()))
        folders = self._folders()
        if with_folder(folders, folder) != folders:
            self.folders.addItem(folder)

    def _folders(self) -> tuple[str, ...]:
        return tuple(self.folders.item(i).text() for i in range(self.folders.count()))

    def form(self) -> SettingsForm:
        """What the fields hold."""
        return SettingsForm(
            self._folders(), self.server_path.value(), self.bench_path.value(), self.fit_path.value(),
            self.rpc_server_path.value(), self.data_dir.text(), self.gpu_hz.value(), self.host_hz.value(),
            self.metrics_hz.value(), self.threshold.value(), tuple(self.workers.workers()))

    def result_settings(self) -> Settings:
        """The edited settings (unknown keys of the original are kept)."""
        return edited_settings(self._settings, self.form())
