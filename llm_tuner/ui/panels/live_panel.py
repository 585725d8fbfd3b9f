"""Live panel: start/stop/restart or attach, state and URL, device plots, memory by owner, throughput,
the request table, the log console and the session history.

The fleet (the server slots, the one shown, where a Start goes, port clashes, the binary a launch runs and
its trust) is llm_tuner.state.live.LiveFleet, Qt-free; this panel binds its widgets to it and runs each slot's
server through its own ServerBridge. The Server selector shows each slot's name, port and state.

One QTimer (10 Hz) redraws only the visible tab from the ring buffers; the bridge batches log lines (every
FRAME_MS) and the Requests tab batches rows (live_requests.py), inserted with the lines that came with them,
so both views repaint once per batch; per request the GUI thread does O(1) work, and keeps the newest
requests only (the store keeps all). Nothing here waits on the server, a process, NVML or SQL.
"""

from __future__ import annotations

from functools import partial

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

from llm_tuner.qt.context import AppContext
from llm_tuner.qt.server_bridge import ServerBridge
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.services.client import LlamaClient
from llm_tuner.services.logparse import LogLine
from llm_tuner.services.supervised import ServerState
from llm_tuner.services.telemetry.breakdown import live_segments
from llm_tuner.state.live import RECENT_RECORDS, LiveFleet, ServerSlot, StartFacts
from llm_tuner.state.live_views import SessionHistory
from llm_tuner.store.sessions import SessionRepository
from llm_tuner.ui.panels.live_devices import DevicesView
from llm_tuner.ui.panels.live_history import HistoryTable
from llm_tuner.ui.panels.live_models import RouterModelsView
from llm_tuner.ui.panels.live_quit import await_stops
from llm_tuner.ui.panels.live_requests import RequestsView
from llm_tuner.ui.panels.log_console import LogConsole
from llm_tuner.ui.plots.live_plots import ThroughputPlots
from llm_tuner.ui.shortcuts import with_shortcut

TEST_PROMPT = "Write one short sentence about the sea."
ARGS_HINT = "llama-server arguments, e.g. -m model.gguf -c 8192 -ngl 99 (or pick a model in the Models list)"
START_TIP = ("Launch llama-server with these arguments (a running server keeps running: a new one starts "
             "beside it)")
GONE = "The server is not running: the memory it held is free again."


class LivePanel(QWidget):
    # the selected server's state, URL or router models, or the servers, changed
    server_status_changed = Signal()

    def __init__(self, ctx: AppContext, parent: QWidget | None = None, *,
                 bridge: ServerBridge | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        repo = None
        try:
            repo = SessionRepository(ctx.engine)
        except Exception:  # noqa: BLE001 - the panel works without a history
            repo = None
        self.repo = repo
        # the slots, the shown one, the command Start launches: the state this view binds
        self.fleet = LiveFleet()
        self._bridges: dict[ServerSlot, ServerBridge] = {}  # each slot's server, run through Qt
        self._memory_stale = True  # the memory bars wait for a redraw (a new snapshot from the server)

        # -- controls --------------------------------------------------------------------------
        self.server_combo = QComboBox()
        self.server_combo.setMinimumWidth(320)
        self.server_combo.setToolTip("Servers started or attached in this session: name · port · state. "
                                     "The views below show the selected one.")
        self.new_server_button = QPushButton("New server")
        self.new_server_button.setToolTip("Keep the running servers and prepare another one (e.g. a code "
                                          "model beside a chat model); Start then launches it on its own "
                                          "port")
        self.args_edit = QLineEdit()
        self.args_edit.setPlaceholderText(ARGS_HINT)
        self.watch_check = QCheckBox("Add watch flags")
        self.watch_check.setChecked(True)
        self.watch_check.setToolTip("Adds --metrics (and --log-jsonl where the binary has it) so the server "
                                    "reports memory and request figures. Not part of the copied command.")
        self.start_button = QPushButton("Start")
        self.start_button.setToolTip(START_TIP)
        self.anyway_button = QPushButton("Launch anyway")  # shown when Start was refused for advice errors
        self.anyway_button.setToolTip("Start despite the errors above (a fork may accept what this build "
                                      "refuses)")
        self.anyway_button.hide()
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("Stop the selected server (SIGINT, then SIGTERM, then SIGKILL)")
        self.restart_button = QPushButton("Restart")
        self.attach_button = QPushButton("Attach…")
        self.attach_button.setToolTip("Watch a llama-server started elsewhere, by URL (not stopped by this "
                                      "app)")
        self.test_button = QPushButton("Send test prompt")
        self.test_button.setToolTip("Send one short completion request; it appears in the Requests tab")
        self.copy_button = QPushButton("Copy command")
        self.copy_button.setToolTip("Copy the command as a shell line (without the watch flags; secrets "
                                    "masked)")
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
        for b in (self.start_button, self.anyway_button, self.stop_button, self.restart_button,
                  self.attach_button, self.test_button, self.copy_button):
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
        self.request_model, self.request_table = self.requests.model, self.requests.table
        self.requests_hint = self.requests.hint
        self.log_console = LogConsole()
        self.history = SessionHistory(self.repo, self._running_sessions, run=self._run_history)
        self.history_table = HistoryTable(self.history)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.devices, "Devices")
        self.tabs.addTab(self.throughput, "Throughput")
        self.tabs.addTab(self.requests, "Requests")
        self.tabs.addTab(self.log_console, "Log")
        self.tabs.addTab(self.history_table, "History")
        self.router_models = RouterModelsView()  # a router's models: its tab shows while the server is one
        self.tabs.setTabVisible(self.tabs.addTab(self.router_models, "Models"), False)

        lay = QVBoxLayout(self)
        lay.addLayout(row0)
        lay.addLayout(row1)
        lay.addLayout(row2)
        lay.addWidget(self.message_label)
        lay.addWidget(self.notes_label)
        lay.addWidget(self.tabs, 1)

        # -- wiring ----------------------------------------------------------------------------
        self.args_edit.textChanged.connect(self._on_args_edit_text_changed)
        self.watch_check.toggled.connect(self._on_watch_check_toggled)
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
        self.fleet.add_callback(self._on_fleet_changed)
        self._add_bridge(self.fleet.selected, bridge)  # the fleet's first slot exists already
        self._show_slot(self.fleet.selected)
        self.fleet.prefill(ctx.state.model_path)
        # the workspace's wiring: the Server menu's requests, and the shown server for Chat and the status bar
        for button, action in ((self.start_button, "launch"), (self.stop_button, "stop"),
                               (self.test_button, "test_prompt"), (self.copy_button, "copy_command")):
            with_shortcut(button, action)
        ctx.state.launch_requested.connect(self.start)
        ctx.state.stop_requested.connect(self.stop_server)
        ctx.state.test_prompt_requested.connect(self._on_state_test_prompt_requested)
        ctx.state.copy_command_requested.connect(self.copy_command)
        ctx.state.new_server_requested.connect(self._on_state_new_server_requested)
        self.server_status_changed.connect(self._publish_server)
        self._publish_server()

    # -- the fleet: slots and what they show ------------------------------------------------------------
    @property
    def slot(self) -> ServerSlot:
        """The selected server slot."""
        return self.fleet.selected

    @property
    def slots(self) -> list[ServerSlot]:
        return self.fleet.slots

    @property
    def bridge(self) -> ServerBridge:
        """The selected server's bridge."""
        return self._bridges[self.fleet.selected]

    def api_key(self) -> str | None:
        """The key a client of the selected server sends (a launch's or an attach's), or None (for Chat)."""
        watched = self._bridges[self.fleet.selected].watched if self.fleet.selected in self._bridges else None
        return watched.api_key() if watched is not None else None

    def servers(self) -> list[ServerSlot]:
        """Every server slot (for the status bar and tests)."""
        return list(self.fleet.slots)

    def quit_question(self) -> str | None:
        return self.fleet.quit_question()

    def start_facts(self) -> StartFacts:
        """What a Start reads from the app now: settings, probed binaries, the edited profile as published."""
        st = self.ctx.state
        return StartFacts(settings=self.ctx.settings, binaries=st.binaries or {}, profile=st.profile,
                          profile_name=st.profile_name, profile_problem=st.profile_problem,
                          profile_errors=tuple(st.profile_errors))

    def _on_fleet_changed(self, what: str, *details) -> None:
        fleet = self.fleet
        if what == "added":
            self._add_bridge(details[0])
        elif what == "selected":
            self._show_slot(details[0])
        elif what == "titles":
            for i, slot in enumerate(fleet.slots):
                self.server_combo.setItemText(i, slot.title())
            self.server_status_changed.emit()
        elif what == "message" and details[0] is fleet.selected:
            self._show_message(details[0])
        elif what == "state" and details[0] is fleet.selected:
            self._set_state_display(details[0])
            self._show_command()
        elif what == "command":
            self._show_command()
        elif what == "note":
            self._show_notes(details[0])
        elif what == "refusal":
            self.anyway_button.setVisible(fleet.refused_for_advice)

    def _add_bridge(self, slot: ServerSlot, bridge: ServerBridge | None = None) -> None:
        """A new slot's server bridge and its entry in the Server list."""
        bridge = bridge or ServerBridge(self, repo=self.repo, agents=lambda: self.ctx.settings.rpc_workers)
        bridge.state_changed.connect(partial(self._on_bridge_state_changed, slot))
        bridge.log_lines_received.connect(partial(self._on_bridge_log_lines_received, slot))
        bridge.request_finished.connect(partial(self._on_bridge_request_finished, slot))
        bridge.sampler_failed.connect(partial(self._on_bridge_sampler_failed, slot))
        bridge.memory_changed.connect(partial(self._on_bridge_memory_changed, slot))
        bridge.router_models_changed.connect(partial(self._on_bridge_router_models_changed, slot))
        self._bridges[slot] = bridge
        self.server_combo.blockSignals(True)
        self.server_combo.addItem(slot.title())
        self.server_combo.blockSignals(False)

    def _show_slot(self, slot: ServerSlot) -> None:
        """Show `slot` in every view (its requests, log, state, message)."""
        i = self.fleet.slots.index(slot)
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
        self._show_notes(slot.notes)
        self._show_router_models(slot)
        self._show_message(slot)
        self._set_state_display(slot)
        self._show_command()

    def _show_command(self) -> None:
        """The arguments line: the selected server's own command while it runs (read-only: a running server's
        command cannot change), else the command Start launches; Start's tooltip says what it starts."""
        fleet = self.fleet
        locked = fleet.command_locked
        if self.args_edit.text() != fleet.shown_command:
            self.args_edit.setText(fleet.shown_command)
        self.args_edit.setReadOnly(locked)
        self.args_edit.setPlaceholderText(
            ("An attached server: its command line is not known here" if fleet.selected.plan is None else "")
            if locked else ARGS_HINT)
        self.start_button.setToolTip(
            f"Start another server beside this one, with: {fleet.command[:300] or '(no arguments yet)'}"
            if locked else START_TIP)

    def _show_notes(self, text: str) -> None:
        """The launch's notes, or nothing: an empty line is not kept (a 768 px screen needs it for the
        plots)."""
        self.notes_label.setText(text)
        self.notes_label.setVisible(bool(text))

    def _show_message(self, slot: ServerSlot) -> None:
        self.message_label.setStyleSheet("color: #c62828" if slot.message_error else "")
        self.message_label.setText(slot.message)

    def _set_state_display(self, slot: ServerSlot) -> None:
        state = slot.server_state
        self.state_label.setText(f"<b style='color:{slot.colour}'>● {slot.display_state}</b>")
        self.url_label.setText(slot.url or "")
        self.start_button.setEnabled(state is not ServerState.STOPPING)
        self.attach_button.setEnabled(state is not ServerState.STOPPING)
        self.stop_button.setEnabled(state.stoppable)
        self.restart_button.setEnabled(state.stoppable and slot.plan is not None)
        self.test_button.setEnabled(state is ServerState.READY)
        self.new_server_button.setEnabled(state.running)

    # -- actions ------------------------------------------------------------------------------------
    def start(self, force: bool = False) -> bool:
        """Launch the arguments in the edit where the fleet's start policy puts it (a running server keeps
        running). Refused with a message (advice errors unless `force`, a port in use, no binary...):
        False."""
        slot = self.fleet.start(self.start_facts(), force=force)
        if slot is None:
            return False
        self._bridges[slot].launch(slot.plan)
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

    def _on_state_test_prompt_requested(self) -> None:
        """The Server menu's or the quick start's test prompt: sent, and the Requests tab shows its row."""
        if self.test_button.isEnabled():
            self.send_test_prompt()
            self.tabs.setCurrentIndex(self.tabs.indexOf(self.request_table.parentWidget()))

    def is_ready(self) -> bool:
        return self.slot.server_state is ServerState.READY

    def copy_command(self) -> None:
        self._on_copy_clicked()

    def _on_args_edit_text_changed(self, text: str) -> None:
        if not self.fleet.command_locked:  # the line shows a running server's command, not the next Start's
            self.fleet.command = text

    def _on_watch_check_toggled(self, checked: bool) -> None:
        self.fleet.watch = checked

    def _on_start_clicked(self) -> None:
        self.start()

    def _on_stop_clicked(self) -> None:
        self.bridge.stop()
        self.fleet.stopping()

    def _on_restart_clicked(self) -> None:
        self.bridge.stop()
        self.fleet.stopping(restart=True)  # launched again once it exited (server_state_changed says when)

    def _on_new_server_clicked(self) -> None:
        self.fleet.new_server()

    def _on_state_new_server_requested(self) -> None:
        if self.new_server_button.isEnabled():  # only beside a running server, as the button
            self.fleet.new_server()

    def _publish_server(self) -> None:
        """The shown server (its state, URL, router models) and the servers, for Chat and the status bar."""
        self.ctx.state.workspace.show_server(self.slot, self.api_key(), self.servers())

    def _on_server_combo_changed(self, index: int) -> None:
        self.fleet.select_index(index)

    def _on_attach_clicked(self) -> None:
        url, ok = QInputDialog.getText(self, "Attach to a server", "URL of a running llama-server:",
                                       text="http://127.0.0.1:8080")
        if not ok or not url.strip():
            return
        log, _ok = QInputDialog.getText(self, "Attach to a server",
                                        "Its log file (optional; without it request figures are "
                                        "approximate):")
        self.attach(url.strip(), log.strip() or None)

    def attach(self, url: str, log_path: str | None = None) -> None:
        slot = self.fleet.attach(url, log_path)
        self._bridges[slot].attach(url, log_path)

    def _on_test_clicked(self) -> None:
        session = self.bridge.session
        if session is None or not session.url:
            return
        url = session.url
        slot = self.slot

        def run(_ctl):
            with LlamaClient(url, timeout=120) as c:
                return c.completion(TEST_PROMPT, n_predict=32)

        job = BackgroundJob(run, self, what="The test prompt",
                            on_failed=partial(self._on_test_job_failed, slot))
        job.succeeded.connect(partial(self._on_test_job_succeeded, slot))
        self.test_button.setEnabled(False)
        self.fleet.show_message("Sending a test prompt…")
        job.finished.connect(lambda: self.test_button.setEnabled(self.is_ready()))
        job.start()

    def _on_test_job_succeeded(self, slot: ServerSlot, result: dict) -> None:
        t = result.get("timings", {})
        text = (result.get("content") or "").strip().replace("\n", " ")
        self.fleet.show_message(f"Test prompt answered: {t.get('predicted_n', '?')} tokens at "
                                f"{t.get('predicted_per_second', 0):.1f} tokens/s: “{text[:60]}”. "
                                "See it in the Requests tab.", slot=slot)

    def _on_test_job_failed(self, slot: ServerSlot, exc: object) -> None:
        self.fleet.show_message(f"The test prompt failed: {exc}. Check the log.", error=True, slot=slot)

    def _on_copy_clicked(self) -> None:
        try:
            plan = self.fleet.copy_plan(self.start_facts())
        except ValueError as exc:
            self.fleet.show_message(str(exc), error=True)
            return
        QGuiApplication.clipboard().setText(plan.command_line())
        self.fleet.show_message("Command copied (without the watch flags; secrets masked).")

    def shutdown(self, timeout_s: float = 30.0) -> list[str]:
        """At application quit: stop every server this panel watches, all at once, each on its own thread, and
        wait in an event loop (a small dialog names what is still stopping) until they ended or `timeout_s`.
        Returns the servers still stopping then (the parent-death signal takes those along)."""
        stops = [(f"{slot.name} (port {slot.port})" if slot.port is not None else slot.name, done)
                 for slot, bridge in self._bridges.items() if (done := bridge.stop_at_quit()) is not None]
        return await_stops(stops, timeout_s=timeout_s, parent=self.window())

    def take_log_console(self) -> LogConsole:
        """Hand the log console to the main window (a bottom dock visible from every tab)."""
        i = self.tabs.indexOf(self.log_console)
        if i >= 0:
            self.tabs.removeTab(i)
        return self.log_console

    # -- bridge slots -------------------------------------------------------------------------------
    def _on_bridge_state_changed(self, slot: ServerSlot, ev) -> None:
        restart = self.fleet.server_state_changed(slot, ev)
        if ev.state is ServerState.EXITED:
            self._load_history()
            if slot is self.slot:
                self._memory_stale = True  # the bars let go of what it held at the next redraw
        if restart:
            self._bridges[slot].launch(slot.plan)

    def _on_bridge_log_lines_received(self, slot: ServerSlot, lines: list) -> None:
        self.fleet.log_lines(slot, lines)
        if slot is self.slot:
            self.log_console.append_lines(lines)
            self.requests.flush()  # the rows of the requests these lines finished: one paint for both views

    def _on_bridge_request_finished(self, slot: ServerSlot, rec) -> None:
        """O(1) per request: the table takes rows in batches, the plots draw only while their tab shows."""
        self.fleet.request_finished(slot, rec)
        if slot is self.slot:
            self.requests.add(rec)
            self.throughput.add(rec)

    def _on_bridge_router_models_changed(self, slot: ServerSlot, listed) -> None:
        slot.router_models = listed
        if slot is self.slot:
            self._show_router_models(slot)
            self.server_status_changed.emit()  # the Chat tab's model picker follows the router's models

    def _show_router_models(self, slot: ServerSlot) -> None:
        watched = self._bridges[slot].watched if slot in self._bridges else None
        self.router_models.show_models(slot.router_models, url=slot.url, records=slot.records,
                                       api_key=watched.session.api_key if watched is not None else None)
        self.tabs.setTabVisible(self.tabs.indexOf(self.router_models), slot.router_models is not None)

    def _on_requests_all_requested(self) -> None:
        slot, watched = self.slot, self.bridge.watched
        self.requests.read_all(self.repo, watched.session_id if watched is not None else None,
                               lambda: (slot.n_requests, slot.records) if slot is self.slot else None)

    def _on_bridge_sampler_failed(self, slot: ServerSlot, name: str, message: str) -> None:
        self._on_bridge_log_lines_received(slot, [LogLine("warn", f"telemetry {name}: {message}")])

    def _on_state_profile_changed(self, profile) -> None:
        """The profile being edited becomes the command Start launches next (LiveFleet.use_profile)."""
        self.fleet.use_profile(profile)

    def _on_state_model_selected(self, path) -> None:
        self.fleet.use_model(path, profile_shown=self.ctx.state.profile is not None)

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
            # The memory bars change in the plots' frame (one paint of the window), or when the server said
            # more.
            if self.device_plots.refresh(tel.rings) or self._memory_stale:
                self._memory_stale = False
                self._refresh_memory_bars(tel)
        elif current == 1:
            self.throughput.refresh()

    def _on_bridge_memory_changed(self, slot: ServerSlot, _snapshot) -> None:
        if slot is self.slot:
            self._memory_stale = True  # the bars take it at the next redraw

    def _refresh_memory_bars(self, tel) -> None:
        if self.bridge.session is None:
            return
        # exited (stopped or crashed): the memory it held is free, its last figures stale
        if not self.bridge.running:
            self.memory_bars.set_segments([], empty_text=GONE)
            return
        memory = self.bridge.memory  # the server's own memory lines, as its latest snapshot brought them
        latest = {dev: (last[1] if (last := ring.last()) is not None else None)
                  for dev, ring in tel.rings.items()}
        self.memory_bars.set_segments(live_segments(
            latest, breakdown=memory.breakdown, buffers=memory.buffers, inventory=self.ctx.state.inventory,
            devices=memory.devices))

    def _load_history(self) -> None:
        self.history.load()

    def _run_history(self, work, done, _failed) -> None:
        """SessionHistory's read as a job whose failure the app's error surface reports (the table has no line
        of its own)."""
        job = BackgroundJob(lambda _ctl: work(), self, what="Loading the server history")
        job.succeeded.connect(done)
        job.start()

    def _running_sessions(self) -> set[int]:
        return {b.watched.session_id for b in self._bridges.values() if b.running and b.watched is not None}
