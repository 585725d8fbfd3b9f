"""The Live panel's Devices tab: per-device plots over a chosen time window and memory by owner."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSplitter, QVBoxLayout, QWidget

from llm_tuner.state.live_views import devices_note
from llm_tuner.ui.plots.live_memory import MemoryBars
from llm_tuner.ui.plots.live_plots import DevicePlots

WINDOWS = (("last 1 min", 60), ("last 2 min", 120), ("last 10 min", 600), ("last 30 min", 1800),
           ("last 2 h", 7200))


class DevicesView(QSplitter):
    """Device plots beside a column with their time window, a note on what they draw and the memory-by-owner
    bars: a laptop's 768 px leave the plots no height to share (each keeps MIN_CURVES_PX for its curves), and
    the bars' rows read as well in a column."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(Qt.Orientation.Horizontal, parent)
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
        window_row = QHBoxLayout()
        window_row.addWidget(QLabel("Plots show:"))
        window_row.addWidget(self.window_combo, 1)
        side = QWidget()  # the plots' window and what they show, then memory by owner
        sl = QVBoxLayout(side)
        sl.setContentsMargins(0, 0, 0, 0)
        sl.addLayout(window_row)
        sl.addWidget(self.devices_note)
        sl.addWidget(self.memory_bars, 1)
        side.setMinimumWidth(240)
        self.addWidget(self.device_plots)
        self.addWidget(side)
        self.setStretchFactor(0, 2)
        self.setStretchFactor(1, 1)
        self.setChildrenCollapsible(False)
        self.setSizes([640, 320])  # scaled to the real width: the plots get two thirds

    def _on_window_combo_changed(self, _index: int) -> None:
        self.device_plots.set_window(float(self.window_combo.currentData()))

    def set_inventory(self, inventory) -> None:
        """Say what the plots show for the detected devices (None: still detecting); GPU-only plots follow."""
        self.devices_note.setText(devices_note(inventory))
        self.device_plots.set_device_labels({g.name: g.label for g in inventory.devices} if inventory else {})
        self.device_plots.show_gpu_plots(inventory is not None and bool(inventory.devices))
