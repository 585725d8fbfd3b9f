"""The Live panel's Devices tab: per-device plots over a chosen time window and memory by owner."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSplitter, QVBoxLayout, QWidget

from llm_tuner.ui.plots.live_memory import MemoryBars
from llm_tuner.ui.plots.live_plots import DevicePlots

WINDOWS = (("last 1 min", 60), ("last 2 min", 120), ("last 10 min", 600), ("last 30 min", 1800), ("last 2 h", 7200))


class DevicesView(QSplitter):
    """Device plots (with a note on what is drawn and a window choice) above the memory-by-owner bars."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(Qt.Orientation.Vertical, parent)
        self.device_plots = DevicePlots()
        self.memory_bars = MemoryBars()
        self.window_combo = QComboBox()
        for text, seconds in WINDOWS:
            self.window_combo.addItem(text, seconds)
        self.window_combo.setCurrentIndex(1)
        self.window_combo.setToolTip("How much history the device plots show")
        self.window_combo.currentIndexChanged.connect(self._on_window_combo_changed)
        self.device_plots.set_window(float(self.window_combo.currentData()))
        self.devices_note = QLabel()
        self.devices_note.setWordWrap(True)
        plots_bar = QHBoxLayout()
        plots_bar.addWidget(self.devices_note, 1)
        plots_bar.addWidget(QLabel("Show:"))
        plots_bar.addWidget(self.window_combo)
        plots_box = QWidget()
        pl = QVBoxLayout(plots_box)
        pl.setContentsMargins(0, 0, 0, 0)
        pl.addLayout(plots_bar)
        pl.addWidget(self.device_plots, 1)
        self.addWidget(plots_box)
        self.addWidget(self.memory_bars)
        self.setStretchFactor(0, 4)
        self.setStretchFactor(1, 1)
        self.setSizes([800, 100])  # scaled to the real height: the plots first (a 768 px screen is short)

    def _on_window_combo_changed(self, _index: int) -> None:
        self.device_plots.set_window(float(self.window_combo.currentData()))

    def set_inventory(self, inventory) -> None:
        """Say what the plots show for the detected devices (None: still detecting); GPU-only plots follow."""
        if inventory is None:
            self.devices_note.setText("Detecting devices…")
        elif not inventory.devices:
            self.devices_note.setText("No GPU found: the plots show the host CPU and RAM (and the server's "
                                      "share). Temperature, power and clocks are GPU figures: not shown.")
        else:
            self.devices_note.setText("One curve per GPU (a card under two backends is one GPU: CUDA0 + Vulkan0); "
                                      "red shading marks throttling.")
        self.device_plots.set_device_labels({g.name: g.label for g in inventory.devices} if inventory else {})
        self.device_plots.show_gpu_plots(inventory is not None and bool(inventory.devices))
