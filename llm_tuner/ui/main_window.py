"""The main window: model library on the left, Profile/Plan/Live/Benchmarks/Compare in the centre,
a status bar with the server binary and the devices."""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QSettings, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDockWidget, QLabel, QMainWindow, QTabWidget, QWidget

from llm_tuner.core.devices import DeviceInventory
from llm_tuner.qt.context import AppContext
from llm_tuner.qt.probes import start_probes
from llm_tuner.services.binaries import SERVER, BinaryInfo, gpu_backend_advice
from llm_tuner.services.settings_store import save_settings
from llm_tuner.ui.dialogs.about_dialog import AboutDialog
from llm_tuner.ui.dialogs.settings_dialog import SettingsDialog
from llm_tuner.ui.panels.bench_panel import BenchPanel
from llm_tuner.ui.panels.compare_panel import ComparePanel
from llm_tuner.ui.panels.live_panel import LivePanel
from llm_tuner.ui.panels.models_panel import ModelsPanel
from llm_tuner.ui.panels.plan_panel import PlanPanel
from llm_tuner.ui.panels.profile_panel import ProfilePanel


class MainWindow(QMainWindow):
    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.setWindowTitle("llm-tuner")
        self.resize(1400, 900)

        self.models_panel = ModelsPanel(ctx)
        self.profile_panel = ProfilePanel(ctx)
        self.plan_panel = PlanPanel(ctx)
        self.live_panel = LivePanel(ctx)
        self.bench_panel = BenchPanel(ctx)
        self.compare_panel = ComparePanel(ctx)

        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        for panel, title in ((self.profile_panel, "Profile"), (self.plan_panel, "Plan"), (self.live_panel, "Live"),
                             (self.bench_panel, "Benchmarks"), (self.compare_panel, "Compare")):
            self.tabs.addTab(panel, title)
        self.setCentralWidget(self.tabs)

        self.models_dock = QDockWidget("Models", self)
        self.models_dock.setObjectName("models_dock")
        self.models_dock.setWidget(self.models_panel)
        self.models_dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.models_dock)

        self._build_menus()
        self._build_status_bar()
        ctx.state.binaries_probed.connect(self._on_state_binaries_probed)
        ctx.state.inventory_detected.connect(self._on_state_inventory_detected)
        ctx.state.status_message_posted.connect(lambda text: self.statusBar().showMessage(text, 8000))
        self._restore_layout()

    # -- construction -------------------------------------------------------------------------
    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        file_menu.addAction(QAction("&Settings…", self, shortcut=QKeySequence("Ctrl+,"), triggered=self.show_settings))
        file_menu.addSeparator()
        quit_action = QAction("&Quit", self, shortcut=QKeySequence.StandardKey.Quit, triggered=self.close)
        file_menu.addAction(quit_action)
        self.view_menu = self.menuBar().addMenu("&View")
        for i in range(self.tabs.count()):
            action = QAction(self.tabs.tabText(i), self, shortcut=QKeySequence(f"Ctrl+{i + 1}"))
            action.triggered.connect(lambda _=False, idx=i: self.tabs.setCurrentIndex(idx))
            self.view_menu.addAction(action)
        help_menu = self.menuBar().addMenu("&Help")
        help_menu.addAction(QAction("&About llm-tuner", self, triggered=self.show_about))

    def _build_status_bar(self) -> None:
        self.server_label = QLabel("llama-server: looking…")
        self.devices_label = QLabel("devices: detecting…")
        for label in (self.server_label, self.devices_label):
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.statusBar().addPermanentWidget(label)

    # -- slots ----------------------------------------------------------------------------------
    def _on_state_binaries_probed(self, binaries: dict[str, BinaryInfo]) -> None:
        info = binaries.get(SERVER)
        if info is None or not info.ok:
            self.server_label.setText("llama-server: not usable")
            self.server_label.setToolTip(info.error if info else "not probed")
            self.server_label.setStyleSheet("color: #c0392b;")
            return
        self.server_label.setStyleSheet("")
        self.server_label.setText(f"llama-server {info.version or '?'} [{', '.join(info.backends)}]")
        self.server_label.setToolTip(f"{info.path}\nfound via {info.source}")
        self._update_advice()

    def _on_state_inventory_detected(self, inv: DeviceInventory) -> None:
        gpus = [f"{d.name}: {d.model or '?'} ({(d.memory_total_mib or 0) / 1024:.0f} GiB)" for d in inv.devices]
        host = inv.host
        ram = f"{(host.memory_total_mib or 0) / 1024:.0f} GiB RAM"
        self.devices_label.setText(" · ".join(gpus) if gpus else f"CPU only · {ram}")
        self.devices_label.setToolTip("\n".join([f"{host.cpu_model} · {host.cores_physical} cores · {ram}",
                                                 *gpus, *inv.notes]))
        self._update_advice()

    def _update_advice(self) -> None:
        info = self.ctx.state.binaries.get(SERVER)
        inv = self.ctx.state.inventory
        if info is None or inv is None:
            return
        advice = gpu_backend_advice(info, sum(1 for d in inv.devices if d.vendor in ("nvidia", "amd")))
        if advice:
            self.statusBar().showMessage(advice)

    def show_settings(self) -> None:
        dialog = SettingsDialog(self.ctx.settings, self)
        if dialog.exec() != SettingsDialog.DialogCode.Accepted:
            return
        self.apply_settings(dialog.result_settings())

    def apply_settings(self, settings) -> None:
        """Save, publish, and re-probe the binaries (their paths may have changed)."""
        save_settings(settings)
        self.ctx.settings = settings
        self.ctx.state.settings_changed.emit(settings)
        self.server_label.setText("llama-server: looking…")
        start_probes(self.ctx)

    def show_about(self) -> None:
        AboutDialog(self.ctx.state.binaries, self).exec()

    # -- layout persistence -----------------------------------------------------------------
    def _restore_layout(self) -> None:
        qs = QSettings()
        geometry, state = qs.value("main_window/geometry"), qs.value("main_window/state")
        if isinstance(geometry, QByteArray):
            self.restoreGeometry(geometry)
        if isinstance(state, QByteArray):
            self.restoreState(state)
        self.tabs.setCurrentIndex(int(qs.value("main_window/tab", 0)))

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt override
        qs = QSettings()
        qs.setValue("main_window/geometry", self.saveGeometry())
        qs.setValue("main_window/state", self.saveState())
        qs.setValue("main_window/tab", self.tabs.currentIndex())
        super().closeEvent(event)
