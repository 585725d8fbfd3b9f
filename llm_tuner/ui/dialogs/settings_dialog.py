"""Settings: model folders, llama.cpp binaries, RPC workers, data folder, telemetry rates, A/B threshold."""

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

    def value(self) -> str | None:
        text = self.edit.text().strip()
        return text or None


class SettingsDialog(QDialog):
    def __init__(self, settings: Settings, parent: QWidget | None = None, *, pool=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.resize(860, 760)
        self._settings = settings
        layout = QVBoxLayout(self)

        layout.addWidget(QLabel("<b>Model folders</b> (searched recursively for .gguf files)"))
        folders_row = QHBoxLayout()
        self.folders = QListWidget()
        self.folders.addItems(settings.model_folders)
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
        self.server_path = _PathField(settings.llama_server_path, auto)
        self.bench_path = _PathField(settings.llama_bench_path, auto)
        self.fit_path = _PathField(settings.llama_fit_params_path, auto)
        form.addRow("llama-server", self.server_path)
        form.addRow("llama-bench", self.bench_path)
        form.addRow("llama-fit-params", self.fit_path)
        self.rpc_server_path = _PathField(settings.rpc_server_path, auto)
        form.addRow("ggml-rpc-server", self.rpc_server_path)

        self.data_dir = QLineEdit(settings.data_dir or "")
        self.data_dir.setPlaceholderText(str(data_dir()))
        self.data_dir.setToolTip("Where the SQLite history lives. Takes effect at the next start.")
        form.addRow("Data folder", self.data_dir)

        def rate(value: float, tip: str) -> QDoubleSpinBox:
            box = QDoubleSpinBox()
            box.setRange(0.1, 20.0)
            box.setSingleStep(0.5)
            box.setSuffix(" Hz")
            box.setValue(value)
            box.setToolTip(tip)
            return box

        self.gpu_hz = rate(settings.gpu_sample_hz, "GPU utilisation, VRAM, power, temperature, clocks")
        self.host_hz = rate(settings.host_sample_hz, "CPU and RAM of the host and the server process")
        self.metrics_hz = rate(settings.server_metrics_hz, "llama-server /metrics and /slots")
        form.addRow("GPU sampling", self.gpu_hz)
        form.addRow("Host sampling", self.host_hz)
        form.addRow("Server metrics", self.metrics_hz)
        self.threshold = QDoubleSpinBox()
        self.threshold.setRange(0.0, 50.0)
        self.threshold.setSuffix(" %")
        self.threshold.setValue(settings.ab_threshold_pct)
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

    def _on_remove_folders_clicked(self) -> None:
        for item in self.folders.selectedItems():
            self.folders.takeItem(self.folders.row(item))

    def _on_add_folder_clicked(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Add a model folder", str(Path.home()))
        if folder and not self.folders.findItems(folder, 0):
            self.folders.addItem(folder)

    def result_settings(self) -> Settings:
        """The edited settings (unknown keys of the original are kept)."""
        return self._settings.model_copy(update={
            "model_folders": [self.folders.item(i).text() for i in range(self.folders.count())],
            "llama_server_path": self.server_path.value(),
            "llama_bench_path": self.bench_path.value(),
            "llama_fit_params_path": self.fit_path.value(),
            "rpc_server_path": self.rpc_server_path.value(),
            "rpc_workers": self.workers.workers(),
            "data_dir": self.data_dir.text().strip() or None,
            "gpu_sample_hz": self.gpu_hz.value(),
            "host_sample_hz": self.host_hz.value(),
            "server_metrics_hz": self.metrics_hz.value(),
            "ab_threshold_pct": self.threshold.value(),
        })
