"""Live panel: start/stop/restart or attach, state and URL, device plots, memory by owner, throughput,
the request table, the log console and the session history.

One QTimer (10 Hz) redraws only the visible tab from the ring buffers; the bridge batches log lines;
nothing here waits on the server, a process, NVML or SQL.
"""

from __future__ import annotations

import shlex
import time

from PySide6.QtCore import QCoreApplication, Qt, QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QHeaderView,
    QInputDialog,
    QLabel,
    QLineEdit,
    QPushButton,
    QSplitter,
    QTableView,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.qt.context import AppContext
from llm_tuner.qt.request_table_model import RequestTableModel
from llm_tuner.qt.server_bridge import ServerBridge
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.services.logparse import LogLine
from llm_tuner.services.server import ServerState, plan_launch
from llm_tuner.services.telemetry.breakdown import gpu_segments, server_parts
from llm_tuner.ui.panels.log_console import LogConsole
from llm_tuner.ui.plots.live_plots import DevicePlots, MemoryBars, ThroughputPlots

STATE_COLOURS = {"idle": "#777", "starting": "#b8860b", "loading": "#b8860b", "ready": "#2e7d32",
                 "stopping": "#b8860b", "exited": "#777"}
TEST_PROMPT = "Write one short sentence about the sea."


class LivePanel(QWidget):
    def __init__(self, ctx: AppContext, parent: QWidget | None = None, *, bridge: ServerBridge | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        repo = None
        try:
            from llm_tuner.store.sessions import SessionRepository

            repo = SessionRepository(ctx.engine)
        except Exception:  # noqa: BLE001 - the panel works without a history
            repo = None
        self.repo = repo
        self.bridge = bridge or ServerBridge(self, repo=repo)
        self._last_plan = None
        self._last_attach = None
        self._memory_refreshed = 0.0

        # -- controls --------------------------------------------------------------------------
        self.args_edit = QLineEdit()
        self.args_edit.setPlaceholderText("llama-server arguments, e.g. -m model.gguf -c 8192 -ngl 99 "
                                          "(or pick a model in the Models list)")
        self.watch_check = QCheckBox("Add watch flags")
        self.watch_check.setChecked(True)
        self.watch_check.setToolTip("Adds --metrics (and --log-jsonl where the binary has it) so the server "
                                    "reports memory and request figures. Not part of the copied command.")
        self.start_button = QPushButton("Start")
        self.stop_button = QPushButton("Stop")
        self.restart_button = QPushButton("Restart")
        self.attach_button = QPushButton("Attach…")
        self.attach_button.setToolTip("Watch a llama-server started elsewhere, by URL (not stopped by this app)")
        self.test_button = QPushButton("Send test prompt")
        self.copy_button = QPushButton("Copy command")
        self.state_label = QLabel()
        self.url_label = QLabel()
        self.url_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message_label = QLabel("Start a server to watch it: health, device plots and every request.")
        self.message_label.setWordWrap(True)
        self.notes_label = QLabel()
        self.notes_label.setWordWrap(True)
        self.notes_label.setStyleSheet("color: #666")

        row1 = QHBoxLayout()
        row1.addWidget(QLabel("llama-server"))
        row1.addWidget(self.args_edit, 1)
        row1.addWidget(self.watch_check)
        row2 = QHBoxLayout()
        for b in (self.start_button, self.stop_button, self.restart_button, self.attach_button, self.test_button,
                  self.copy_button):
            row2.addWidget(b)
        row2.addSpacing(12)
        row2.addWidget(self.state_label)
        row2.addWidget(self.url_label, 1)

        # -- views -----------------------------------------------------------------------------
        self.device_plots = DevicePlots()
        self.memory_bars = MemoryBars()
        devices = QSplitter(Qt.Orientation.Vertical)
        devices.addWidget(self.device_plots)
        devices.addWidget(self.memory_bars)
        devices.setStretchFactor(0, 4)
        devices.setStretchFactor(1, 1)
        self.throughput = ThroughputPlots()
        self.request_model = RequestTableModel(self)
        self.request_table = QTableView()
        self.request_table.setModel(self.request_model)
        self.request_table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.request_table.verticalHeader().setVisible(False)
        self.log_console = LogConsole()
        self.history_table = QTableWidget(0, 7)
        self.history_table.setHorizontalHeaderLabels(["#", "Started", "Mode", "Requests", "Exit", "Reason",
                                                      "Command"])
        self.history_table.horizontalHeader().setStretchLastSection(True)
        self.history_table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.tabs = QTabWidget()
        self.tabs.addTab(devices, "Devices")
        self.tabs.addTab(self.throughput, "Throughput")
        self.tabs.addTab(self.request_table, "Requests")
        self.tabs.addTab(self.log_console, "Log")
        self.tabs.addTab(self.history_table, "History")

        lay = QVBoxLayout(self)
        lay.addLayout(row1)
        lay.addLayout(row2)
        lay.addWidget(self.message_label)
        lay.addWidget(self.notes_label)
        lay.addWidget(self.tabs, 1)

        # -- wiring ----------------------------------------------------------------------------
        self.start_button.clicked.connect(self._on_start_clicked)
        self.stop_button.clicked.connect(self._on_stop_clicked)
        self.restart_button.clicked.connect(self._on_restart_clicked)
        self.attach_button.clicked.connect(self._on_attach_clicked)
        self.test_button.clicked.connect(self._on_test_clicked)
        self.copy_button.clicked.connect(self._on_copy_clicked)
        self.tabs.currentChanged.connect(self._on_tabs_changed)
        self.bridge.state_changed.connect(self._on_bridge_state_changed)
        self.bridge.log_lines_received.connect(self.log_console.append_lines)
        self.bridge.request_finished.connect(self._on_bridge_request_finished)
        self.bridge.sampler_failed.connect(self._on_bridge_sampler_failed)
        ctx.state.model_selected.connect(self._on_state_model_selected)
        ctx.state.profile_changed.connect(self._on_state_profile_changed)
        self.redraw_timer = QTimer(self)
        self.redraw_timer.setInterval(100)
        self.redraw_timer.timeout.connect(self._on_redraw_timer_timeout)
        self.redraw_timer.start()
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.bridge.shutdown)
        self._prefill_args()
        self._set_state_display("idle", None)

    # -- helpers ------------------------------------------------------------------------------------
    def _prefill_args(self) -> None:
        if self.args_edit.text().strip():
            return
        model = self.ctx.state.model_path
        if model is None:
            try:
                from llm_tuner.services.demo_model import find_demo_model

                model = find_demo_model()
            except Exception:  # noqa: BLE001
                model = None
        if model is not None:
            self.args_edit.setText(shlex.join(["-m", str(model)]))

    def _binary(self):
        info = self.ctx.state.binaries.get("llama-server") if self.ctx.state.binaries else None
        if info is not None and info.ok:
            return str(info.path), info.catalog
        from llm_tuner.services.binaries import SERVER, locate

        loc = locate(SERVER, self.ctx.settings)
        return (str(loc.path), None) if loc else (None, None)

    def _set_state_display(self, state: str, url: str | None) -> None:
        colour = STATE_COLOURS.get(state, "#777")
        self.state_label.setText(f"<b style='color:{colour}'>● {state}</b>")
        self.url_label.setText(url or "")
        running = state in ("starting", "loading", "ready")
        self.start_button.setEnabled(not running and state != "stopping")
        self.attach_button.setEnabled(not running and state != "stopping")
        self.stop_button.setEnabled(running)
        self.restart_button.setEnabled(running and self._last_plan is not None)
        self.test_button.setEnabled(state == "ready")

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
        profile_args = getattr(self, "_profile_args", None)
        env = profile_args[1] if profile_args and profile_args[0] == self.args_edit.text() else {}
        return plan_launch(binary, args, env, catalog=catalog, watch=self.watch_check.isChecked())

    # -- actions ------------------------------------------------------------------------------------
    def start(self) -> bool:
        try:
            plan = self._build_plan()
        except ValueError as exc:
            self._show_message(str(exc), error=True)
            return False
        self._reset_views()
        self._last_plan = plan
        self.notes_label.setText("<br>".join(plan.notes()))
        self._show_message(f"Starting: {plan.command_line()}")
        self.bridge.launch(plan)
        self._set_state_display("starting", plan.url)
        return True

    def _reset_views(self) -> None:
        self.request_model.reset()
        self.throughput.clear()
        self.log_console.clear()
        self.device_plots._versions.clear()

    def _show_message(self, text: str, *, error: bool = False) -> None:
        self.message_label.setStyleSheet("color: #c62828" if error else "")
        self.message_label.setText(text)

    def _on_start_clicked(self) -> None:
        self.start()

    def _on_stop_clicked(self) -> None:
        self.bridge.stop()
        self._set_state_display("stopping", self.url_label.text())

    def _on_restart_clicked(self) -> None:
        self._restart_pending = True
        self._on_stop_clicked()

    def _on_attach_clicked(self) -> None:
        url, ok = QInputDialog.getText(self, "Attach to a server", "URL of a running llama-server:",
                                       text="http://127.0.0.1:8080")
        if not ok or not url.strip():
            return
        log, _ok = QInputDialog.getText(self, "Attach to a server",
                                        "Its log file (optional; without it request figures are approximate):")
        self.attach(url.strip(), log.strip() or None)

    def attach(self, url: str, log_path: str | None = None) -> None:
        self._reset_views()
        self._last_plan = None
        self._last_attach = (url, log_path)
        self.notes_label.setText("" if log_path else "No log file: request records come from /slots and /metrics "
                                 "and are approximate (marked ≈).")
        self.bridge.attach(url, log_path)
        self._set_state_display("starting", url)

    def _on_test_clicked(self) -> None:
        session = self.bridge.session
        if session is None or not session.url:
            return
        url = session.url

        def run(_ctl):
            from llm_tuner.services.client import LlamaClient

            with LlamaClient(url, timeout=120) as c:
                return c.completion(TEST_PROMPT, n_predict=32)

        job = BackgroundJob(run, self)
        job.succeeded.connect(self._on_test_job_succeeded)
        job.failed.connect(self._on_test_job_failed)
        self.test_button.setEnabled(False)
        job.finished.connect(lambda: self.test_button.setEnabled(self.bridge.session is not None
                                                                 and self.bridge.session.state == ServerState.READY))
        job.start()

    def _on_test_job_succeeded(self, result: dict) -> None:
        t = result.get("timings", {})
        text = (result.get("content") or "").strip().replace("\n", " ")
        self._show_message(f"Test prompt answered: {t.get('predicted_n', '?')} tokens at "
                           f"{t.get('predicted_per_second', 0):.1f} tokens/s: “{text[:120]}”")

    def _on_test_job_failed(self, exc: object) -> None:
        self._show_message(f"The test prompt failed: {exc}. Check the log tab.", error=True)

    def _on_copy_clicked(self) -> None:
        if self._last_plan is None:
            try:
                plan = self._build_plan()
            except ValueError as exc:
                self._show_message(str(exc), error=True)
                return
        else:
            plan = self._last_plan
        QGuiApplication.clipboard().setText(plan.command_line())
        self._show_message("Command copied (without the watch flags; secrets masked).")

    # -- bridge slots -------------------------------------------------------------------------------
    def _on_bridge_state_changed(self, ev) -> None:
        state = str(ev.state)
        self._set_state_display(state, ev.url)
        if state == "ready":
            self._show_message(f"Ready at {ev.url}. Requests from any client appear in the Requests tab.")
        elif state == "loading":
            self._show_message("Loading the model…")
        elif state == "exited":
            if ev.failure is not None:
                self._show_message(f"The server stopped: {ev.failure.message}", error=True)
            else:
                self._show_message(f"The server {ev.reason or 'exited'} (exit code {ev.code}). "
                                   f"{self.request_model.rowCount()} requests kept in the history.")
            self._load_history()
            if getattr(self, "_restart_pending", False):
                self._restart_pending = False
                if self._last_plan is not None:
                    self._reset_views()
                    self.bridge.launch(self._last_plan)
                    self._set_state_display("starting", self._last_plan.url)

    def _on_bridge_request_finished(self, rec) -> None:
        self.request_model.append(rec)
        self.throughput.add(rec)

    def _on_bridge_sampler_failed(self, name: str, message: str) -> None:
        self.log_console.append_lines([LogLine("warn", f"telemetry {name}: {message}")])

    def _on_state_profile_changed(self, profile) -> None:
        """The profile being edited becomes the command to launch (its env travels with it)."""
        if profile is None or self.bridge.running:
            return
        try:
            from llm_tuner.core.cmdline import profile_to_argv

            argv, env = profile_to_argv(profile)
        except Exception as exc:  # noqa: BLE001 - an incomplete profile: keep the current command
            self.notes_label.setText(f"The profile cannot be turned into a command yet: {exc}")
            return
        text = shlex.join(argv)
        self._profile_args = (text, dict(env))
        self.args_edit.setText(text)

    def _on_state_model_selected(self, path) -> None:
        if path is not None and not self.bridge.running:
            self.args_edit.setText(shlex.join(["-m", str(path)]))

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
        mapping = {}
        inv = self.ctx.state.inventory
        if inv is not None:
            for g in inv.devices:
                for n in g.llama_names:
                    mapping[n] = g.name
        parts = server_parts(getattr(session, "memory", None), getattr(session, "buffers", None), mapping)
        segments = []
        for dev in sorted(tel.rings):
            if dev == "server":
                continue
            last = tel.rings[dev].last()
            if last is None:
                continue
            _t, v = last

            def val(key, v=v):
                x = v.get(key)
                return None if x is None or x != x else x

            if dev == "host":
                if any(d not in ("host", "server") for d in tel.rings):
                    continue  # GPUs present: the bars show GPUs
                segments.append(gpu_segments("host RAM", parts.get("host"), used_mib=val("ram_used_mib"),
                                             total_mib=val("ram_total_mib"), process_mib=val("server_rss_mib")))
            else:
                segments.append(gpu_segments(dev, parts.get(dev), used_mib=val("vram_used_mib"),
                                             total_mib=val("vram_total_mib"), process_mib=val("process_vram_mib"),
                                             reserved_mib=val("vram_reserved_mib")))
        self.memory_bars.set_segments(segments)

    def _load_history(self) -> None:
        if self.repo is None:
            return
        repo = self.repo
        job = BackgroundJob(lambda _ctl: repo.history(200), self)
        job.succeeded.connect(self._on_history_job_succeeded)
        job.start()

    def _on_history_job_succeeded(self, sessions) -> None:
        self.history_table.setRowCount(len(sessions))
        for r, s in enumerate(sessions):
            cells = [str(s.id), time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.started_unix)), s.mode,
                     str(s.n_requests), "running" if s.ended_unix is None else str(s.exit_code),
                     s.exit_reason or "", shlex.join(s.argv) if s.argv else (s.url or "")]
            for c, text in enumerate(cells):
                self.history_table.setItem(r, c, QTableWidgetItem(text))

