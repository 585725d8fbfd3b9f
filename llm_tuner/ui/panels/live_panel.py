"""Live panel: start/stop/restart or attach, state and URL, device plots, memory by owner, throughput,
the request table, the log console and the session history.

Several servers can run at once (e.g. a chat model and a code model on two ports): each launch or attach
is a *server slot* (its own ServerBridge, requests and log); the Server selector shows each one's name,
port and state, and the views show the selected one. Starting while the selected server runs opens a new
slot; a port already taken is refused by the launcher with a clear message.

One QTimer (10 Hz) redraws only the visible tab from the ring buffers; the bridge batches log lines (every
FRAME_MS) and the Requests tab batches rows (live_requests.py), inserted with the lines that came with them, so
both views repaint once per batch; per request the GUI thread does O(1) work, and keeps the newest
requests only (the store keeps all). Nothing here waits on the server, a process, NVML or SQL.
"""

from __future__ import annotations

import shlex
import time
from functools import partial
from pathlib import Path

from PySide6.QtCore import QCoreApplication, Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core import flags
from llm_tuner.core.cmdline import profile_to_argv
from llm_tuner.qt.context import AppContext
from llm_tuner.qt.server_bridge import ServerBridge
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.services.binaries import SERVER, BinaryError, locate, require_trusted
from llm_tuner.services.client import LlamaClient
from llm_tuner.services.demo_model import find_demo_model
from llm_tuner.services.logparse import LogLine
from llm_tuner.services.preflight import ModelLook, preflight_errors, refusal_text
from llm_tuner.services.server import RECENT_RECORDS, plan_launch
from llm_tuner.services.telemetry.breakdown import live_segments
from llm_tuner.store.sessions import SessionRepository
from llm_tuner.ui.panels.live_devices import DevicesView
from llm_tuner.ui.panels.live_history import HistoryTable
from llm_tuner.ui.panels.live_requests import RequestsView
from llm_tuner.ui.panels.live_slots import ServerSlot
from llm_tuner.ui.panels.log_console import LogConsole
from llm_tuner.ui.plots.live_plots import ThroughputPlots

STATE_COLOURS = {"idle": "#777", "starting": "#b8860b", "loading": "#b8860b", "ready": "#2e7d32",
                 "stopping": "#b8860b", "exited": "#777"}
TEST_PROMPT = "Write one short sentence about the sea."


class LivePanel(QWidget):
    server_status_changed = Signal()  # the selected server's state/URL, or the list of servers, changed

    def __init__(self, ctx: AppContext, parent: QWidget | None = None, *, bridge: ServerBridge | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        repo = None
        try:
            repo = SessionRepository(ctx.engine)
        except Exception:  # noqa: BLE001 - the panel works without a history
            repo = None
        self.repo = repo
        self.slots: list[ServerSlot] = []
        self._profile_args: tuple[str, dict] | None = None  # the edited profile's command line and env
        self.slot: ServerSlot | None = None
        self._memory_refreshed = 0.0

        # -- controls --------------------------------------------------------------------------
        self.server_combo = QComboBox()
        self.server_combo.setMinimumWidth(320)
        self.server_combo.setToolTip("Servers started or attached in this session: name · port · state. "
                                     "The views below show the selected one.")
        self.new_server_button = QPushButton("New server")
        self.new_server_button.setToolTip("Keep the running servers and prepare another one (e.g. a code model "
                                          "beside a chat model); Start then launches it on its own port")
        self.args_edit = QLineEdit()
        self.args_edit.setPlaceholderText("llama-server arguments, e.g. -m model.gguf -c 8192 -ngl 99 "
                                          "(or pick a model in the Models list)")
        self.watch_check = QCheckBox("Add watch flags")
        self.watch_check.setChecked(True)
        self.watch_check.setToolTip("Adds --metrics (and --log-jsonl where the binary has it) so the server "
                                    "reports memory and request figures. Not part of the copied command.")
        self.start_button = QPushButton("Start")
        self.start_button.setToolTip("Launch llama-server with these arguments (a running server keeps running: "
                                     "a new one starts beside it)")
        self.anyway_button = QPushButton("Launch anyway")  # shown when Start was refused for advice errors
        self.anyway_button.setToolTip("Start despite the errors above (a fork may accept what this build refuses)")
        self.anyway_button.hide()
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("Stop the selected server (SIGINT, then SIGTERM, then SIGKILL)")
        self.restart_button = QPushButton("Restart")
        self.attach_button = QPushButton("Attach…")
        self.attach_button.setToolTip("Watch a llama-server started elsewhere, by URL (not stopped by this app)")
        self.test_button = QPushButton("Send test prompt")
        self.test_button.setToolTip("Send one short completion request; it appears in the Requests tab")
        self.copy_button = QPushButton("Copy command")
        self.copy_button.setToolTip("Copy the command as a shell line (without the watch flags; secrets masked)")
        self.state_label = QLabel()
        self.url_label = QLabel()
        self.url_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message_label = QLabel()
        self.message_label.setWordWrap(True)
        self.notes_label = QLabel()
        self.notes_label.setWordWrap(True)
        self.notes_label.setStyleSheet("color: palette(placeholder-text)")

        row0 = QHBoxLayout()
        row0.addWidget(QLabel("Server:"))
        row0.addWidget(self.server_combo, 1)
        row0.addWidget(self.new_server_button)
        row1 = QHBoxLayout()
        row1.addWidget(QLabel("llama-server"))
        row1.addWidget(self.args_edit, 1)
        row1.addWidget(self.watch_check)
        row2 = QHBoxLayout()
        for b in (self.start_button, self.anyway_button, self.stop_button, self.restart_button, self.attach_button, self.test_button,
                  self.copy_button):
            row2.addWidget(b)
        row2.addSpacing(12)
        row2.addWidget(self.state_label)
        row2.addWidget(self.url_label, 1)

        # -- views -----------------------------------------------------------------------------
        self.devices = DevicesView()
        self.device_plots, self.memory_bars = self.devices.device_plots, self.devices.memory_bars
        self.window_combo, self.devices_note = self.devices.window_combo, self.devices.devices_note
        self.throughput = ThroughputPlots()
        self.requests = RequestsView(max_rows=RECENT_RECORDS)
        self.requests.all_requested.connect(self._on_requests_all_requested)
        self.request_model, self.request_table, self.requests_hint = (self.requests.model, self.requests.table,
                                                                      self.requests.hint)
        self.log_console = LogConsole()
        self.history_table = HistoryTable()
        self.tabs = QTabWidget()
        self.tabs.addTab(self.devices, "Devices")
        self.tabs.addTab(self.throughput, "Throughput")
        self.tabs.addTab(self.requests, "Requests")
        self.tabs.addTab(self.log_console, "Log")
        self.tabs.addTab(self.history_table, "History")

        lay = QVBoxLayout(self)
        lay.addLayout(row0)
        lay.addLayout(row1)
        lay.addLayout(row2)
        lay.addWidget(self.message_label)
        lay.addWidget(self.notes_label)
        lay.addWidget(self.tabs, 1)

        # -- wiring ----------------------------------------------------------------------------
        self.start_button.clicked.connect(self._on_start_clicked)
        self.anyway_button.clicked.connect(lambda: self.start(force=True))
        self.stop_button.clicked.connect(self._on_stop_clicked)
        self.restart_button.clicked.connect(self._on_restart_clicked)
        self.attach_button.clicked.connect(self._on_attach_clicked)
        self.test_button.clicked.connect(self._on_test_clicked)
        self.copy_button.clicked.connect(self._on_copy_clicked)
        self.new_server_button.clicked.connect(self._on_new_server_clicked)
        self.server_combo.currentIndexChanged.connect(self._on_server_combo_changed)
        self.tabs.currentChanged.connect(self._on_tabs_changed)
        ctx.state.model_selected.connect(self._on_state_model_selected)
        ctx.state.profile_changed.connect(self._on_state_profile_changed)
        ctx.state.inventory_detected.connect(self._on_state_inventory_detected)
        self._on_state_inventory_detected(ctx.state.inventory)
        self.redraw_timer = QTimer(self)
        self.redraw_timer.setInterval(100)
        self.redraw_timer.timeout.connect(self._on_redraw_timer_timeout)
        self.redraw_timer.start()
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)
        self._select_slot(self._new_slot(bridge))
        self._prefill_args()

    # -- server slots -------------------------------------------------------------------------------
    @property
    def bridge(self) -> ServerBridge:
        """The selected server's bridge."""
        return self.slot.bridge

    @property
    def _last_plan(self):
        return self.slot.plan if self.slot else None

    def _new_slot(self, bridge: ServerBridge | None = None) -> ServerSlot:
        bridge = bridge or ServerBridge(self, repo=self.repo, agents=lambda: self.ctx.settings.rpc_workers)
        slot = ServerSlot(bridge, name=f"server {len(self.slots) + 1}",
                          message="Start a server to watch it: health, device plots and every request.")
        bridge.state_changed.connect(partial(self._on_bridge_state_changed, slot))
        bridge.log_lines_received.connect(partial(self._on_bridge_log_lines_received, slot))
        bridge.request_finished.connect(partial(self._on_bridge_request_finished, slot))
        bridge.sampler_failed.connect(partial(self._on_bridge_sampler_failed, slot))
        self.slots.append(slot)
        self.server_combo.blockSignals(True)
        self.server_combo.addItem(slot.title())
        self.server_combo.blockSignals(False)
        return slot

    def _select_slot(self, slot: ServerSlot) -> None:
        """Show `slot` in every view (its requests, log, state, message)."""
        self.slot = slot
        i = self.slots.index(slot)
        if self.server_combo.currentIndex() != i:
            self.server_combo.blockSignals(True)
            self.server_combo.setCurrentIndex(i)
            self.server_combo.blockSignals(False)
        self.requests.reset(slot.records, total=slot.n_requests)
        self.throughput.clear()
        self.throughput.extend(slot.records)
        self.log_console.clear()
        if slot.log_lines:
            self.log_console.append_lines(list(slot.log_lines))
        self.device_plots._versions.clear()
        self.memory_bars.set_segments([])
        self.notes_label.setText(slot.notes)
        if slot.state == "exited" and slot.message_error and slot.plan is not None:
            self.args_edit.setText(shlex.join(slot.plan.user_args))  # what failed, with its message
        self._show_message(slot.message, error=slot.message_error)
        self._set_state_display(slot.state, slot.url)

    def _refresh_slot_titles(self) -> None:
        for i, slot in enumerate(self.slots):
            self.server_combo.setItemText(i, slot.title())
        self.server_status_changed.emit()

    def _slot_for_start(self) -> ServerSlot:
        """The selected slot when it is free, else a free one, else a new one (servers keep running)."""
        if not self.slot.running and self.slot.state != "stopping":
            return self.slot
        for s in self.slots:
            if not s.running and s.state != "stopping":
                return s
        return self._new_slot()

    def servers(self) -> list[ServerSlot]:
        """Every server slot (for the status bar and tests)."""
        return list(self.slots)

    def quit_question(self) -> str | None:
        """The question to ask before quitting while servers this app launched run (quitting stops them), or
        None. Attached servers are only watched and keep running; one already stopping needs no answer."""
        running = [s for s in self.slots if s.plan is not None and s.state in ("starting", "loading", "ready")]
        if not running:
            return None
        # host:port without "http://": a dialog would break the line after the slashes
        names = "; ".join(f"{s.name}, {s.url.split('//')[-1].rstrip('/')}" if s.url else s.name for s in running)
        if len(running) == 1:
            return f"A server is running ({names}).\nStop it and quit?"
        return f"{len(running)} servers are running ({names}).\nStop them and quit?"

    # -- helpers ------------------------------------------------------------------------------------
    def _prefill_args(self) -> None:
        if self.args_edit.text().strip():
            return
        model = self.ctx.state.model_path
        if model is None:
            try:
                model = find_demo_model()
            except Exception:  # noqa: BLE001 - no demo model: the arguments stay empty
                model = None
        if model is not None:
            self.args_edit.setText(shlex.join(flags.argv_for("model", str(model))))

    def _binary(self):
        info = self.ctx.state.binaries.get("llama-server") if self.ctx.state.binaries else None
        if info is not None and info.ok:
            return str(info.path), info.catalog

        loc = locate(SERVER, self.ctx.settings)
        return (str(loc.path), None) if loc else (None, None)

    def _set_state_display(self, state: str, url: str | None) -> None:
        colour = STATE_COLOURS.get(state, "#777")
        self.state_label.setText(f"<b style='color:{colour}'>● {state}</b>")
        self.url_label.setText(url or "")
        running = state in ("starting", "loading", "ready")
        self.start_button.setEnabled(state != "stopping")
        self.attach_button.setEnabled(state != "stopping")
        self.stop_button.setEnabled(running)
        self.restart_button.setEnabled(running and self._last_plan is not None)
        self.test_button.setEnabled(state == "ready")
        self.new_server_button.setEnabled(running)

    def _build_plan(self):
        binary, catalog = self._binary()
        if binary is None:
            raise ValueError("No llama-server found: set its path in Settings (or install the `server` extra).")
        try:
            args = shlex.split(self.args_edit.text())
        except ValueError as exc:
            raise ValueError(f"The arguments cannot be read ({exc}): check the quotes.") from exc
        if not args:
            raise ValueError("Give llama-server arguments (at least -m MODEL), or pick a model in the Models list.")
        env = self._profile_args[1] if self._args_from_editor() else {}
        own = getattr(self.ctx.state.profile, "binary", None) if self._args_from_editor() else None
        if own:  # the profile's own program (a fork, another build) runs only once the user confirmed it

            try:
                require_trusted(own, self.ctx.settings)
            except BinaryError as exc:
                raise ValueError(f"Not started: {exc}") from None
            binary, catalog = own, None  # its --help is not read on the GUI thread: only --metrics is added
        return plan_launch(binary, args, env, catalog=catalog, watch=self.watch_check.isChecked())

    def _args_from_editor(self) -> bool:
        """The command line is the edited profile's as published (not typed over by the user)."""
        return self._profile_args is not None and self._profile_args[0] == self.args_edit.text()

    def _server_name(self, args: list[str]) -> str:
        """The profile's name when the command is the edited profile's, else the model file's stem (marked
        "unsaved" for the edited profile before it has a name: it is not the saved profile of that name)."""
        from_editor = self._args_from_editor()
        if from_editor:
            name = self.ctx.state.profile_name
            if name:
                return name
        model = flags.value_of(args, "model")
        if model:
            return Path(model).stem + (" (unsaved)" if from_editor else "")
        return f"server {len(self.slots)}"

    # -- actions ------------------------------------------------------------------------------------
    def _preflight_errors(self) -> list:
        """The advice errors of what Start would launch: the edited profile's (the Profile tab found them, the
        model file included), else those of the typed arguments (core rules only: no file I/O here)."""
        if self._args_from_editor():
            return list(self.ctx.state.profile_errors)

        return preflight_errors(argv=shlex.split(self.args_edit.text()), catalog=self._binary()[1],
                                look=ModelLook(None))

    def start(self, force: bool = False) -> bool:
        """Launch the arguments in the edit; a running server keeps running and the new one gets its own slot.
        Arguments with advice errors (no model, a value llama-server refuses...) are refused unless `force`
        (the "Launch anyway" button that the refusal shows)."""
        problem = self.ctx.state.profile_problem
        if problem and self._args_from_editor():
            self._show_message(problem, error=True)
            return False
        try:
            plan = self._build_plan()
        except ValueError as exc:
            self._show_message(str(exc), error=True)
            return False
        errors = [] if force else self._preflight_errors()
        self.anyway_button.setVisible(bool(errors))
        if errors:
            self._show_message("Not started: " + refusal_text(errors, "Launch anyway"), error=True)
            return False
        busy = [s for s in self.slots if s.running and s.url and s.url.endswith(f":{plan.port}")]
        if busy:  # refused before anything starts: the slot keeps what it showed (no second entry "exited")
            self._show_message(f"Port {plan.port} is already used by “{busy[0].name}” in this app: give this "
                               "profile another --port (or leave it out and a free port is chosen).", error=True)
            return False
        slot = self._slot_for_start()
        slot.clear()
        slot.plan, slot.attach = plan, None
        slot.name = self._server_name(list(plan.user_args))
        slot.notes = "<br>".join(plan.notes())
        slot.state, slot.url, slot.never_ready = "starting", plan.url, False
        self._select_slot(slot)
        self._show_message(f"Starting: {plan.command_line()}")
        self.bridge.launch(plan)
        self._refresh_slot_titles()
        return True

    # names the main window and scripts use (menu actions, screenshots)
    def launch_current_profile(self) -> bool:
        return self.start()

    def stop_server(self) -> None:
        if self.slot.running:
            self._on_stop_clicked()

    def send_test_prompt(self) -> None:
        if self.test_button.isEnabled():
            self._on_test_clicked()

    def is_ready(self) -> bool:
        return self.slot.state == "ready"

    def copy_command(self) -> None:
        self._on_copy_clicked()

    def _show_message(self, text: str, *, error: bool = False, slot: ServerSlot | None = None) -> None:
        slot = slot or self.slot
        if slot is not None:
            slot.message, slot.message_error = text, error
        if slot is self.slot:
            self.message_label.setStyleSheet("color: #c62828" if error else "")
            self.message_label.setText(text)

    def _on_start_clicked(self) -> None:
        self.start()

    def _on_stop_clicked(self) -> None:
        self.bridge.stop()
        self.slot.state = "stopping"
        self._set_state_display("stopping", self.url_label.text())
        self._refresh_slot_titles()

    def _on_restart_clicked(self) -> None:
        self.slot.restart_pending = True
        self._on_stop_clicked()

    def _on_new_server_clicked(self) -> None:
        slot = self._new_slot()
        self._select_slot(slot)
        self._show_message("A new server: pick a profile or model (or edit the arguments) and press Start. "
                           "The other servers keep running; choose them in the Server list.")
        self._refresh_slot_titles()

    def _on_server_combo_changed(self, index: int) -> None:
        if 0 <= index < len(self.slots) and self.slots[index] is not self.slot:
            self._select_slot(self.slots[index])
            self.server_status_changed.emit()

    def _on_attach_clicked(self) -> None:
        url, ok = QInputDialog.getText(self, "Attach to a server", "URL of a running llama-server:",
                                       text="http://127.0.0.1:8080")
        if not ok or not url.strip():
            return
        log, _ok = QInputDialog.getText(self, "Attach to a server",
                                        "Its log file (optional; without it request figures are approximate):")
        self.attach(url.strip(), log.strip() or None)

    def attach(self, url: str, log_path: str | None = None) -> None:
        slot = self._slot_for_start()
        slot.clear()
        slot.plan, slot.attach = None, (url, log_path)
        slot.name = f"attached {url.split('//')[-1]}"
        slot.notes = ("" if log_path else "No log file: request records come from /slots and /metrics "
                      "and are approximate (marked ≈).")
        slot.state, slot.url = "starting", url
        self._select_slot(slot)
        slot.bridge.attach(url, log_path)
        self._refresh_slot_titles()

    def _on_test_clicked(self) -> None:
        session = self.bridge.session
        if session is None or not session.url:
            return
        url = session.url
        slot = self.slot

        def run(_ctl):
            with LlamaClient(url, timeout=120) as c:
                return c.completion(TEST_PROMPT, n_predict=32)

        job = BackgroundJob(run, self)
        job.succeeded.connect(partial(self._on_test_job_succeeded, slot))
        job.failed.connect(partial(self._on_test_job_failed, slot))
        self.test_button.setEnabled(False)
        self._show_message("Sending a test prompt…")
        job.finished.connect(lambda: self.test_button.setEnabled(self.slot.state == "ready"))
        job.start()

    def _on_test_job_succeeded(self, slot: ServerSlot, result: dict) -> None:
        t = result.get("timings", {})
        text = (result.get("content") or "").strip().replace("\n", " ")
        self._show_message(f"Test prompt answered: {t.get('predicted_n', '?')} tokens at "
                           f"{t.get('predicted_per_second', 0):.1f} tokens/s: “{text[:120]}”. "
                           "See it in the Requests tab.", slot=slot)

    def _on_test_job_failed(self, slot: ServerSlot, exc: object) -> None:
        self._show_message(f"The test prompt failed: {exc}. Check the log.", error=True, slot=slot)

    def _on_copy_clicked(self) -> None:
        if self._last_plan is None or not self.slot.running:
            try:
                plan = self._build_plan()
            except ValueError as exc:
                self._show_message(str(exc), error=True)
                return
        else:
            plan = self._last_plan
        QGuiApplication.clipboard().setText(plan.command_line())
        self._show_message("Command copied (without the watch flags; secrets masked).")

    def shutdown(self) -> None:
        """At application quit: stop every server this panel started."""
        for slot in self.slots:
            slot.bridge.shutdown()

    def take_log_console(self) -> LogConsole:
        """Hand the log console to the main window (a bottom dock visible from every tab)."""
        i = self.tabs.indexOf(self.log_console)
        if i >= 0:
            self.tabs.removeTab(i)
        return self.log_console

    # -- bridge slots -------------------------------------------------------------------------------
    def _on_bridge_state_changed(self, slot: ServerSlot, ev) -> None:
        state = str(ev.state)
        was_ready = slot.state == "ready"
        slot.state = state
        if state == "starting":
            slot.never_ready = False
        elif state == "exited":
            slot.never_ready = not was_ready and ev.failure is not None
        slot.url = ev.url or slot.url
        if state == "ready":
            self._show_message(f"Ready at {ev.url}. Requests from any client appear in the Requests tab.", slot=slot)
        elif state == "loading":
            self._show_message("Loading the model…", slot=slot)
        elif state == "exited":
            if ev.failure is not None:
                # a server that never got ready (port taken, model missing, out of memory) did not start
                what = "stopped" if was_ready else "did not start"
                self._show_message(f"The server {what}: {ev.failure.message}", error=True, slot=slot)
                if slot is self.slot and slot.plan is not None:  # the failed session's own command, not the
                    self.args_edit.setText(shlex.join(slot.plan.user_args))  # profile edited since
            else:
                self._show_message(f"The server {ev.reason or 'exited'} (exit code {ev.code}). "
                                   f"{slot.n_requests} requests kept in the history.", slot=slot)
            self._load_history()
            if slot.restart_pending:
                slot.restart_pending = False
                if slot.plan is not None:
                    slot.clear()
                    slot.state = "starting"
                    if slot is self.slot:
                        self._select_slot(slot)
                    slot.bridge.launch(slot.plan)
        if slot is self.slot:
            self._set_state_display(slot.state, slot.url)
        self._refresh_slot_titles()

    def _on_bridge_log_lines_received(self, slot: ServerSlot, lines: list) -> None:
        slot.log_lines.extend(lines)
        if slot is self.slot:
            self.log_console.append_lines(lines)
            self.requests.flush()  # the rows of the requests these lines finished: one paint for both views

    def _on_bridge_request_finished(self, slot: ServerSlot, rec) -> None:
        """O(1) per request: the table takes rows in batches, the plots draw only while their tab shows."""
        slot.records.append(rec)
        slot.n_requests += 1
        if slot is self.slot:
            self.requests.add(rec)
            self.throughput.add(rec)

    def _on_requests_all_requested(self) -> None:
        slot, watched = self.slot, self.slot.bridge.watched
        self.requests.read_all(self.repo, watched.session_id if watched is not None else None,
                               lambda: (slot.n_requests, slot.records) if slot is self.slot else None)

    def _on_bridge_sampler_failed(self, slot: ServerSlot, name: str, message: str) -> None:
        self._on_bridge_log_lines_received(slot, [LogLine("warn", f"telemetry {name}: {message}")])

    def _on_state_profile_changed(self, profile) -> None:
        """The profile being edited becomes the command Start launches next (its env travels with it); a
        running server keeps its own command (Copy command copies that one while it runs)."""
        if profile is None:
            return
        try:
            argv, env = profile_to_argv(profile)
        except Exception as exc:  # noqa: BLE001 - an incomplete profile: keep the current command
            self.notes_label.setText(f"The profile cannot be turned into a command yet: {exc}")
            return
        text = shlex.join(argv)
        self._profile_args = (text, dict(env))
        self.args_edit.setText(text)

    def _on_state_model_selected(self, path) -> None:
        """Without a profile panel publishing, a picked model becomes `-m PATH`; with one, the profile's
        whole command (which now has this model) already arrived through profile_changed."""
        if path is not None and self.ctx.state.profile is None:
            self.args_edit.setText(shlex.join(flags.argv_for("model", str(path))))

    def _on_state_inventory_detected(self, inventory) -> None:
        self.devices.set_inventory(inventory)

    def _on_tabs_changed(self, index: int) -> None:
        if self.tabs.widget(index) is self.history_table:
            self._load_history()

    def _on_redraw_timer_timeout(self) -> None:
        if not self.isVisible():
            return
        tel = self.bridge.telemetry
        current = self.tabs.currentIndex()
        if current == 0 and tel is not None:
            self.device_plots.refresh(tel.rings)
            now = time.monotonic()
            if now - self._memory_refreshed > 1.0:
                self._memory_refreshed = now
                self._refresh_memory_bars(tel)
        elif current == 1:
            self.throughput.refresh()

    def _refresh_memory_bars(self, tel) -> None:
        session = self.bridge.session
        if session is None:
            return
        latest = {dev: (last[1] if (last := ring.last()) is not None else None) for dev, ring in tel.rings.items()}
        self.memory_bars.set_segments(live_segments(
            latest, breakdown=getattr(session, "memory", None), buffers=getattr(session, "buffers", None),
            inventory=self.ctx.state.inventory, devices=getattr(session, "devices", ())))

    def _load_history(self) -> None:
        if self.repo is None:
            return
        repo = self.repo
        job = BackgroundJob(lambda _ctl: repo.history(200), self)
        job.succeeded.connect(self._on_history_job_succeeded)
        job.start()

    def _on_history_job_succeeded(self, sessions) -> None:
        ours = {s.bridge.watched.session_id for s in self.slots if s.running and s.bridge.watched is not None}
        self.history_table.show_sessions(sessions, ours)

