"""ServerBridge: a watched llama-server (launch or attach) as Qt signals for the Live panel.

The session, its samplers and the store writes live on service threads (services/watch.py); their
callbacks land here and are re-emitted as queued signals on the GUI thread. Log lines are batched
(they can come by the thousand at -lv 4) and flushed every FRAME_MS (four times a second: each flush repaints the
log view, and with it the Live panel inserts the request rows that came since, in the same paint, at most once a
second while the table shows; painting, not the Python work, was most of the app's CPU under a busy server,
benchmarks/results/live_load/live_load_profile.txt).
Samples are not signalled: they go to ring buffers that the panel's redraw timer reads. What the server said about
its memory arrives as frozen snapshots (memory_changed; the latest is `memory`), for Live's memory bars.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from PySide6.QtCore import QObject, QTimer, Signal

from llm_tuner.services import logparse
from llm_tuner.services.attach import AttachedSession
from llm_tuner.services.launch import LaunchPlan
from llm_tuner.services.router_watch import RouterModels
from llm_tuner.services.server import ServerSession
from llm_tuner.services.supervised import (
    MemorySnapshot,
    RequestFinished,
    ServerState,
    StateChanged,
    SupervisedSession,
)
from llm_tuner.services.watch import WatchedServer

FRAME_MS = 250  # how often new log lines (and with them new request rows) reach the views


@dataclass(frozen=True)
class _SamplerFailed:
    name: str
    message: str


class ServerBridge(QObject):
    state_changed = Signal(object)  # StateChanged
    log_lines_received = Signal(list)  # list[LogLine]
    request_finished = Signal(object)  # RequestRecord
    memory_changed = Signal(object)  # MemorySnapshot
    sampler_failed = Signal(str, str)  # sampler name, message
    router_models_changed = Signal(object)  # RouterModels: a router's models and which are loaded
    _event_posted = Signal(object)

    def __init__(self, parent: QObject | None = None, *, repo=None, gpu_readers: dict | None = None,
                 rates_s: dict | None = None, capacity: int = 36_000, agents=None) -> None:
        super().__init__(parent)
        self.repo = repo
        self.gpu_readers = gpu_readers
        self.rates_s = rates_s
        self.agents = agents  # () -> the RPC workers whose agents' GPUs Live plots (read at each launch)
        self.capacity = capacity
        self.watched: WatchedServer | None = None
        self.memory = MemorySnapshot()  # the watched server's latest, as memory_changed brought it (GUI thread)
        self._pending_lines: list[logparse.LogLine] = []
        self._lock = threading.Lock()
        self._event_posted.connect(self._on_service_event)
        self._flush_timer = QTimer(self)
        self._flush_timer.setInterval(FRAME_MS)
        self._flush_timer.timeout.connect(self._on_flush_timer_timeout)
        self._flush_timer.start()

    # -- control (GUI thread; never blocks) -------------------------------------------------------
    @property
    def session(self) -> SupervisedSession | None:
        return self.watched.session if self.watched else None

    @property
    def telemetry(self):
        return self.watched.telemetry if self.watched else None

    @property
    def running(self) -> bool:
        s = self.session
        return s is not None and s.state not in (ServerState.EXITED, ServerState.IDLE)

    def launch(self, plan: LaunchPlan, profile_version_id: int | None = None) -> None:
        self._begin(ServerSession(plan, self._post), profile_version_id)

    def attach(self, url: str, log_path: str | None = None, api_key: str | None = None) -> None:
        self._begin(AttachedSession(url, self._post, log_path=log_path, api_key=api_key), None)

    def _begin(self, session: SupervisedSession, profile_version_id) -> None:
        if self.running:
            raise RuntimeError("a server is already running: stop it first")
        self.memory = MemorySnapshot()
        self.watched = WatchedServer(session, repo=self.repo, profile_version_id=profile_version_id,
                                     on_event=self._post, gpu_readers=self.gpu_readers, rates_s=self.rates_s,
                                     capacity=self.capacity, agents=self.agents() if self.agents else (),
                                     on_sampler_error=lambda name, msg: self._post(_SamplerFailed(name, msg)))
        for note in self.watched.notes:
            self._post(logparse.LogLine("info", note))
        threading.Thread(target=self.watched.start, name="server-start", daemon=True).start()

    def _unfinished(self) -> bool:
        """Launched (or launching: its start thread may not have run yet) and not yet exited."""
        w = self.watched
        return w is not None and not w.session.wait(0)

    def stop(self) -> None:
        """Stop (or detach) on a worker thread; the exit arrives as state_changed."""
        w = self.watched
        if self._unfinished():
            threading.Thread(target=w.stop, name="server-stop", daemon=True).start()

    def shutdown(self, timeout_s: float = 8.0) -> None:
        """At application quit: stop and wait briefly (the parent-death signal covers the rest)."""
        w = self.watched
        if self._unfinished():
            w.session.stop(sigint_s=timeout_s * 0.6, sigterm_s=timeout_s * 0.2, sigkill_s=timeout_s * 0.2)

    # -- service threads -> GUI thread -------------------------------------------------------------
    def _post(self, ev: object) -> None:
        if isinstance(ev, logparse.LogLine):
            with self._lock:
                self._pending_lines.append(ev)
            return
        if isinstance(ev, (StateChanged, RequestFinished, MemorySnapshot, _SamplerFailed, RouterModels)):
            self._event_posted.emit(ev)

    def _on_service_event(self, ev: object) -> None:
        if isinstance(ev, StateChanged):
            self._on_flush_timer_timeout()  # the lines that explain a state come first
            self.state_changed.emit(ev)
        elif isinstance(ev, RequestFinished):
            self.request_finished.emit(ev.record)
        elif isinstance(ev, MemorySnapshot):
            self.memory = ev
            self.memory_changed.emit(ev)
        elif isinstance(ev, _SamplerFailed):
            self.sampler_failed.emit(ev.name, ev.message)
        elif isinstance(ev, RouterModels):
            self.router_models_changed.emit(ev)

    def _on_flush_timer_timeout(self) -> None:
        with self._lock:
            lines, self._pending_lines = self._pending_lines, []
        if lines:
            self.log_lines_received.emit(lines)
