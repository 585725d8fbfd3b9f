"""The main window: model library on the left, Profile/Plan/Live/Benchmarks/Compare/Tune in the centre, the
server log at the bottom (a dock, visible from every tab), a status bar with the server state and URL,
the binary and the devices; a Server menu with shortcuts; the quick start strip on a first run.

It wires the panels only through the workspace (`ctx.state`, state.workspace): a menu action is a request the
owning panel hears (`request_launch`, `request_benchmark`, ...), the status bar reads the shown server from it;
the window constructs panels, puts them in tabs and docks and calls only the hooks `tests/unit/
test_panel_wiring.py` allows.

It draws the app's one error surface (qt.errors): each failure in the status bar with what to do, a dialog only
when the user must act, and the Errors list (Help ▸ Errors, or the status bar's count) with "Copy details"."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QByteArray, QCoreApplication, QEvent, QSettings, Qt, QTimer
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QDockWidget,
    QLabel,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core.devices import DeviceInventory
from llm_tuner.core.units import format_mib
from llm_tuner.qt.context import AppContext
from llm_tuner.qt.errors import Failure, error_center
from llm_tuner.qt.probes import start_probes
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.services.binaries import SERVER, BinaryInfo, gpu_backend_advice
from llm_tuner.services.paths import config_dir
from llm_tuner.services.settings_store import save_settings
from llm_tuner.services.supervised import ServerState
from llm_tuner.store.profiles import ProfileRepository
from llm_tuner.store.runs import RunRepository
from llm_tuner.ui.dialogs.about_dialog import AboutDialog
from llm_tuner.ui.dialogs.errors_dialog import ErrorsDialog
from llm_tuner.ui.dialogs.settings_dialog import SettingsDialog
from llm_tuner.ui.panels.bench_panel import BenchPanel
from llm_tuner.ui.panels.chat_panel import ChatPanel
from llm_tuner.ui.panels.compare_panel import ComparePanel
from llm_tuner.ui.panels.live_panel import LivePanel
from llm_tuner.ui.panels.live_quit import await_stops, in_thread
from llm_tuner.ui.panels.models_panel import ModelsPanel
from llm_tuner.ui.panels.plan_panel import PlanPanel
from llm_tuner.ui.panels.profile_panel import ProfilePanel
from llm_tuner.ui.panels.tune_panel import TunePanel
from llm_tuner.ui.plots import follow_palette
from llm_tuner.ui.quick_start import QuickStartBar
from llm_tuner.ui.shortcuts import SHORTCUTS
from llm_tuner.ui.widgets import ElidedLabel


def ask_fresh_database(message: str, parent: QWidget | None = None) -> bool:
    """The one dialog for a damaged or newer history database: start with a fresh one (the old file is moved
    aside, never overwritten), or quit. True when the user chose a fresh database."""
    box = QMessageBox(QMessageBox.Icon.Critical, "llm-tuner: history database unusable", message,
                      QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Close, parent)
    box.button(QMessageBox.StandardButton.Yes).setText("Move it aside and start fresh")
    box.button(QMessageBox.StandardButton.Close).setText("Quit")
    box.setDefaultButton(QMessageBox.StandardButton.Close)
    box.setObjectName("database_dialog")
    try:
        return box.exec() == QMessageBox.StandardButton.Yes
    finally:
        box.deleteLater()


class MainWindow(QMainWindow):
    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.setWindowTitle("llm-tuner")
        self._resize_to_screen(1400, 900)
        follow_palette()  # plots take the light or dark palette's colours

        self.models_panel = ModelsPanel(ctx)
        self.profile_panel = ProfilePanel(ctx)
        self.plan_panel = PlanPanel(ctx)
        self.live_panel = LivePanel(ctx)
        self.chat_panel = ChatPanel(ctx)  # follows the Live tab's shown server through the workspace
        if (app := QCoreApplication.instance()) is not None:  # after the live servers (connected just before)
            app.aboutToQuit.connect(self._on_app_about_to_quit)
        self.bench_panel = BenchPanel(ctx)
        self.compare_panel = ComparePanel(ctx)
        self.tune_panel = TunePanel(ctx)

        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        for panel, title in ((self.profile_panel, "Profile"), (self.plan_panel, "Plan"), (self.live_panel, "Live"),
                             (self.chat_panel, "Chat"), (self.bench_panel, "Benchmarks"), (self.compare_panel, "Compare"),
                             (self.tune_panel, "Tune")):
            self.tabs.addTab(panel, title)
        self.quick_start = QuickStartBar(ctx.state.workspace, self.show_view, self)
        centre = QWidget()
        cl = QVBoxLayout(centre)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.setSpacing(2)
        cl.addWidget(self.quick_start)
        cl.addWidget(self.tabs, 1)
        self.setCentralWidget(centre)

        self.models_dock = QDockWidget("Models", self)
        self.models_dock.setObjectName("models_dock")
        self.models_dock.setWidget(self.models_panel)
        self.models_dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.models_dock)
        self.log_console = self.live_panel.take_log_console()
        self.log_dock = QDockWidget("Server log", self)
        self.log_dock.setObjectName("log_dock")
        self.log_dock.setWidget(self.log_console)
        self.log_dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                                  | QDockWidget.DockWidgetFeature.DockWidgetClosable)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.log_dock)
        ctx.state.server_log_lines_posted.connect(self.log_console.append_lines)  # a benchmark's or tune trial's
        # the models list keeps the whole left side; the log sits under the tabs only
        self.setCorner(Qt.Corner.BottomLeftCorner, Qt.DockWidgetArea.LeftDockWidgetArea)
        self._default_dock_sizes = True  # until a saved layout is restored

        self._build_menus()
        self._build_status_bar()
        ctx.state.binaries_probed.connect(self._on_state_binaries_probed)
        ctx.state.inventory_detected.connect(self._on_state_inventory_detected)
        ctx.state.status_message_posted.connect(self._on_state_status_message_posted)
        self.errors = error_center()
        self.errors.reported.connect(self._on_errors_reported)
        self.errors.cleared.connect(self._update_errors_button)
        self._errors_dialog: ErrorsDialog | None = None
        self._update_errors_button()
        ctx.state.server_shown.connect(self._on_state_server_shown)
        ctx.state.tune_requested.connect(self._on_state_tune_requested)  # Compare: re-tune for another build
        ctx.state.compare_requested.connect(self._on_state_compare_requested)  # History: compare two runs
        self._on_state_server_shown()
        self._restore_layout()
        self.quick_start.setVisible(False)
        self._first_run_job = BackgroundJob(lambda _ctl, engine=ctx.engine: _is_first_run(engine), self,
                                            what="Reading the history for the quick start")
        self._first_run_job.succeeded.connect(self._on_first_run_job_succeeded)  # SQL off the GUI thread
        self._first_run_job.start()

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
        self.view_menu.addSeparator()
        self.view_menu.addAction(self.models_dock.toggleViewAction())
        self.view_menu.addAction(self.log_dock.toggleViewAction())

        workspace = self.ctx.state.workspace
        server_menu = self.menuBar().addMenu("&Server")
        self.launch_action = self._action("&Launch", SHORTCUTS["launch"], self.launch_server,
                                          "Start llama-server with the edited profile (Live tab)")
        self.stop_action = self._action("&Stop", SHORTCUTS["stop"], self.stop_server, "Stop the selected server")
        self.test_action = self._action("Send &test prompt", SHORTCUTS["test_prompt"], self.send_test_prompt,
                                        "Send one short request to the selected server")
        self.bench_action = self._action("&Benchmark", SHORTCUTS["benchmark"], self.run_benchmark,
                                         "Benchmark the edited profile (Benchmarks tab)")
        self.copy_action = self._action("&Copy command", SHORTCUTS["copy_command"], workspace.request_copy_command,
                                        "Copy the llama-server command as a shell line (secrets masked)")
        self.new_server_action = self._action("&New server beside this one", None, workspace.request_new_server,
                                              "Keep the running servers and prepare another one")
        for a in (self.launch_action, self.stop_action, self.test_action, None, self.bench_action, None,
                  self.copy_action, self.new_server_action):
            if a is None:
                server_menu.addSeparator()
            else:
                server_menu.addAction(a)

        help_menu = self.menuBar().addMenu("&Help")
        help_menu.addAction(QAction("&Quick start", self, triggered=lambda: self.quick_start.setVisible(True)))
        help_menu.addAction(QAction("&Errors…", self, triggered=self.show_errors))
        help_menu.addAction(QAction("&About llm-tuner", self, triggered=self.show_about))

    def _action(self, text: str, shortcut: str | None, slot, tip: str) -> QAction:
        action = QAction(text, self)
        if shortcut:
            action.setShortcut(QKeySequence(shortcut))
            action.setToolTip(f"{tip} ({shortcut})")
        else:
            action.setToolTip(tip)
        action.setStatusTip(tip)
        action.triggered.connect(slot)
        return action

    def _build_status_bar(self) -> None:
        # messages: a label of our own, not QStatusBar.showMessage, so a long one is cut with "…" to the room
        # the permanent labels leave, and cut again when that room changes (it ran under them, or was cut to a
        # few letters when said before the window had its size)
        self.status_message = ElidedLabel()
        self.statusBar().addWidget(self.status_message, 1)
        self._status_timer = QTimer(self)
        self._status_timer.setSingleShot(True)
        self._status_timer.timeout.connect(lambda: self.status_message.set_parts(""))
        self.server_state_label = QLabel()
        self.server_state_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.statusBar().addPermanentWidget(self.server_state_label)
        self.errors_button = QPushButton()  # "⚠ 2 errors": opens the Errors list; hidden while there is none
        self.errors_button.setFlat(True)
        self.errors_button.setToolTip("What went wrong in this session, with what to do (Help ▸ Errors)")
        self.errors_button.clicked.connect(self.show_errors)
        self.statusBar().addPermanentWidget(self.errors_button)
        self.server_label = QLabel("llama-server: looking…")
        self.devices_label = QLabel("devices: detecting…")
        for label in (self.server_label, self.devices_label):
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.statusBar().addPermanentWidget(label)

    def _on_first_run_job_succeeded(self, first_run: bool) -> None:
        if first_run:
            self.quick_start.setVisible(True)

    # -- actions (menu and shortcuts) -------------------------------------------------------------
    def show_view(self, title: str) -> None:
        """Bring the tab named `title` to the front (the quick start's steps)."""
        for i in range(self.tabs.count()):
            if self.tabs.tabText(i) == title:
                self.tabs.setCurrentIndex(i)
                return
        raise ValueError(f"no tab {title!r}")

    def launch_server(self) -> None:
        self.tabs.setCurrentWidget(self.live_panel)
        self.ctx.state.workspace.request_launch()

    def stop_server(self) -> None:
        self.ctx.state.workspace.request_stop()

    def send_test_prompt(self) -> None:
        self.tabs.setCurrentWidget(self.live_panel)
        self.ctx.state.workspace.request_test_prompt()

    def _on_state_tune_requested(self, _profile: str, _binary: str) -> None:
        self.tabs.setCurrentWidget(self.tune_panel)  # the Tune tab takes the request itself (TuneState)

    def _on_state_compare_requested(self, _a: int, _b: int) -> None:
        self.tabs.setCurrentWidget(self.compare_panel)  # the Compare tab loads the two runs itself

    def run_benchmark(self) -> None:
        """Benchmark the edited profile (Run waits for a profile save still on its way to the store)."""
        self.tabs.setCurrentWidget(self.bench_panel)
        self.ctx.state.workspace.request_benchmark()

    # -- slots ----------------------------------------------------------------------------------
    def _show_status(self, text: str, timeout_ms: int = 0) -> None:
        """A status message in the room left of the permanent labels, cut to it with "…" as that room changes
        (a window resized, a label that grew), whole in the tooltip; cleared after `timeout_ms` (0: kept)."""
        self.status_message.set_parts("", text)
        if timeout_ms:
            self._status_timer.start(timeout_ms)
        else:
            self._status_timer.stop()

    def status_text(self) -> str:
        """The status message shown now, whole ('' when none)."""
        return self.status_message.full_text()

    def _on_state_status_message_posted(self, text: str) -> None:
        self._show_status(text, 8000)

    # -- the error surface ----------------------------------------------------------------------
    def _on_errors_reported(self, failure: Failure) -> None:
        """A failure: the status bar says what happened and what to do (unless the view said it in its place);
        a dialog only when the user must act; the Errors list has it either way."""
        self._update_errors_button()
        if self._errors_dialog is not None:
            self._errors_dialog.reload()
        if not failure.shown:
            self._show_status(failure.summary(), 20_000)
        if failure.needs_action:
            box = QMessageBox(QMessageBox.Icon.Warning, "llm-tuner", f"{failure.what} failed.",
                              QMessageBox.StandardButton.Ok, self)
            box.setObjectName("action_needed_dialog")
            box.setInformativeText(f"{failure.message}\n\n{failure.advice}")
            box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            box.open()  # not exec: a failure never blocks the thread that reported it

    def _update_errors_button(self) -> None:
        n = len(self.errors.failures())
        self.errors_button.setText(f"⚠ {n} error{'s' if n != 1 else ''}")
        self.errors_button.setVisible(n > 0)

    def show_errors(self) -> None:
        """The Errors list (one window, raised when open already)."""
        if self._errors_dialog is None:
            self._errors_dialog = ErrorsDialog(self.errors, self)
        self._errors_dialog.reload()
        self._errors_dialog.show()
        self._errors_dialog.raise_()

    def _on_state_server_shown(self) -> None:
        slots, slot = self.ctx.state.servers, self.ctx.state.server
        running = [s for s in slots if s.running]
        if slot is None or (not slot.running and not running):
            self.server_state_label.setText("server: not running (F5 launches)" if slot is None or
                                            slot.server_state is ServerState.IDLE else f"server: {slot.display_state}")
            self.server_state_label.setToolTip("")
            return
        text = f"<b style='color:{slot.colour}'>● {slot.display_state}</b> {slot.name} · {slot.url or ''}"
        others = [s for s in running if s is not slot]
        if others:
            text += f" (+{len(others)} more running)"
        self.server_state_label.setText(text)
        self.server_state_label.setToolTip("\n".join(
            [s.title() + (f" · {s.url}" if s.url else "") for s in slots] + [t for t in [slot.status_text()] if t]))

    def _on_state_binaries_probed(self, binaries: dict[str, BinaryInfo]) -> None:
        info = binaries.get(SERVER)
        if info is None or not info.ok:
            self.server_label.setText("llama-server: not usable")
            self.server_label.setToolTip(info.error if info else "not probed")
            self.server_label.setStyleSheet("color: #c0392b;")
            return
        self.server_label.setStyleSheet("")
        self.server_label.setText(f"llama-server {info.build_text} [{', '.join(info.backends)}]")
        self.server_label.setToolTip(f"{info.path}\nfound via {info.source}\n--version: {info.version or '?'}")
        self._update_advice()

    def _on_state_inventory_detected(self, inv: DeviceInventory) -> None:
        gpus = [f"{d.name}: {d.model or '?'} ({(d.memory_total_mib or 0) / 1024:.0f} GiB)" for d in inv.devices]
        host = inv.host
        ram = f"{format_mib(host.memory_total_mib)} RAM"  # as the Plan writes it
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
            self._show_status(advice)

    def show_settings(self) -> None:
        dialog = SettingsDialog(self.ctx.settings, self, pool=self.ctx.workers,
                                history_folder=Path(str(self.ctx.engine.url.database)).parent)
        if dialog.exec() != SettingsDialog.DialogCode.Accepted:
            return
        self.apply_settings(dialog.result_settings())

    def apply_settings(self, settings) -> None:
        """Save, publish, and re-probe the binaries (their paths may have changed)."""
        save_settings(settings)
        self.ctx.settings = settings  # the workspace says "settings" (settings_changed)
        self.server_label.setText("llama-server: looking…")
        start_probes(self.ctx)

    def show_about(self) -> None:
        AboutDialog(self.ctx.state.binaries, self).exec()

    # -- layout persistence -----------------------------------------------------------------
    def _resize_to_screen(self, width: int, height: int) -> None:
        """The first-run size, never larger than the screen's free area (a 1366x768 laptop included)."""
        screen = QGuiApplication.primaryScreen()
        if screen is not None:
            area = screen.availableGeometry()
            width, height = min(width, area.width()), min(height, area.height())
        self.resize(width, height)

    def _restore_layout(self) -> None:
        qs = _layout_settings()
        geometry, state = qs.value("main_window/geometry"), qs.value("main_window/state")
        if isinstance(geometry, QByteArray):
            self.restoreGeometry(geometry)
        if isinstance(state, QByteArray) and self.restoreState(state):
            self._default_dock_sizes = False
        self.tabs.setCurrentIndex(int(qs.value("main_window/tab", 0)))

    def changeEvent(self, event) -> None:  # noqa: N802 - Qt override
        if event.type() == QEvent.Type.PaletteChange:  # the desktop switched light/dark: plots follow
            follow_palette(self)
        super().changeEvent(event)

    def showEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        if self._default_dock_sizes:  # first run: a models list wide enough for its columns, a short log
            self._default_dock_sizes = False
            QTimer.singleShot(0, self._apply_default_dock_sizes)  # after the window has its final size

    def _apply_default_dock_sizes(self) -> None:
        # 390 px at 1366 (the editor keeps its room), 550 at 1920
        self.resizeDocks([self.models_dock], [max(340, min(580, int(self.width() / 3.5)))], Qt.Orientation.Horizontal)
        # the log: 150 px on a tall screen, 100 on a 768 px laptop (the Live plots and the Tune form need the rest)
        self.resizeDocks([self.log_dock], [max(100, min(150, self.height() // 8))], Qt.Orientation.Vertical)

    def _on_app_about_to_quit(self) -> None:
        """After the Live servers (LivePanel.shutdown ran first): the RPC workers this app started stop on a
        thread, the dialog naming them while the GUI thread waits in an event loop."""
        workers = self.ctx.workers.workers
        if workers:
            await_stops([(f"RPC workers ({', '.join(w.endpoint for w in workers)})",
                          in_thread(self.ctx.workers.stop_all, "llm-tuner:workers-stop"))], timeout_s=20.0, parent=self)

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt override

        # Quitting stops the servers this app launched: ask first, unless nobody can see the question (a smoke
        # test, an offscreen run: tests, headless screenshots), where a modal box would wait forever.
        question = self.live_panel.quit_question()
        if question and not os.environ.get("LLM_TUNER_SMOKE_TEST") and QGuiApplication.platformName() != "offscreen":
            box = QMessageBox(QMessageBox.Icon.Question, "Quit llm-tuner", question, parent=self)
            stop = box.addButton("Stop and quit", QMessageBox.ButtonRole.AcceptRole)
            box.addButton(QMessageBox.StandardButton.Cancel)
            box.setDefaultButton(stop)
            box.exec()
            if box.clickedButton() is not stop:
                event.ignore()
                return
        qs = _layout_settings()
        qs.setValue("main_window/geometry", self.saveGeometry())
        qs.setValue("main_window/state", self.saveState())
        qs.setValue("main_window/tab", self.tabs.currentIndex())
        super().closeEvent(event)


def _is_first_run(engine) -> bool:
    """No saved profiles and no benchmark runs: the quick start is shown (runs on a worker thread)."""
    return not ProfileRepository(engine).names() and not RunRepository(engine).labels()


def _layout_settings() -> QSettings:
    """Window geometry, dock layout and tab: an INI file beside settings.json (so LLM_TUNER_DATA_DIR isolates
    it too; Qt's global QSettings path kept the first test's file for the whole test run)."""
    return QSettings(str(config_dir() / "window.ini"), QSettings.Format.IniFormat)
