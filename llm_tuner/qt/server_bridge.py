"""ServerBridge: a watched llama-server (launch or attach) as Qt signals for the Live panel.

The session, its samplers and the store writes live on service threads (services/watch.py); their
callbacks land here and are re-emitted as queued signals on the GUI thread. Log lines are batched
(they can come by the thousand at -lv 4) and flushed every FRAME_MS (four times a second: each flush repaints
the log view, and with it the Live panel inserts the request rows that came since, in the same paint, at most
once a second while the table shows; painting, not the Python work, was most of the app's CPU under a busy
server, benchmarks/results/live_load/live_load_profile.txt).
Samples are not signalled: they go to ring buffers that the panel's redraw timer reads. What the server said
about its memory arrives as frozen snapshots (memory_changed; the latest is `memory`), for Live's memory bars.

A session starts on a `server-start` thread and stops on a `server-stop` thread; what either raises goes to
the app's error surface (qt.errors) and ends the session as failed, so no view waits on a start or stop that
died. At quit, `stop_at_quit` stops each server on its own thread: the Live panel stops them all in parallel.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from PySide6.QtCore import QObject, QTimer, Signal

from llm_tuner.qt.errors import report_failure
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
        # the watched server's latest, as memory_changed brought it (GUI thread)
        self.memory = MemorySnapshot()
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
        return s is not None and ServerState(s.state).running

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
        threading.Thread(target=self._start_watched, args=(self.watched,), name="server-start",
                         daemon=True).start()

    @staticmethod
    def _start_watched(w: WatchedServer) -> None:
        """The `server-start` thread: a start that raises is reported and ends the session as failed (the
        panel then says it did not start, with why)."""
        try:
            w.start()
        except Exception as exc:  # noqa: BLE001 - reported, and the session ends as failed
            report_failure("Starting the server", exc, shown=True,
                           advice="Check the arguments and llama-server's path in Settings, then start it "
                                  "again.")
            w.session.abandon(logparse.Failure("not_started", f"it could not be started: {exc}", repr(exc)))

    def _unfinished(self) -> bool:
        """Launched (or launching: its start thread may not have run yet) and not yet exited."""
        w = self.watched
        return w is not None and not w.session.wait(0)

    def stop(self) -> None:
        """Stop (or detach) on a worker thread; the exit arrives as state_changed."""
        w = self.watched
        if w is not None and self._unfinished():
            threading.Thread(target=self._stop_watched, args=(w,), name="server-stop", daemon=True).start()

    def stop_at_quit(self, timeout_s: float = 8.0) -> threading.Event | None:
        """At application quit: stop (or detach) on a `server-stop` thread, SIGINT then SIGTERM then SIGKILL
        within about `timeout_s`, and give the history a moment to write the end. The Event is set once it
        is over; None when nothing runs. The GUI thread never waits here (the parent-death signal covers a
        quit that does not wait)."""
        w = self.watched
        if w is None or not self._unfinished():
            return None
        done = threading.Event()

        def run() -> None:
            try:
                self._stop_watched(w, timeout_s)
            finally:
                done.set()

        threading.Thread(target=run, name="server-stop", daemon=True).start()
        return done

    @staticmethod
    def _stop_watched(w: WatchedServer, timeout_s: float | None = None) -> None:
        """The `server-stop` thread: a stop that raises is reported, and the session is ended all the same."""
        try:
            if timeout_s is None:
                w.stop()
            else:
                w.session.stop(sigint_s=timeout_s * 0.6, sigterm_s=timeout_s * 0.2, sigkill_s=timeout_s * 0.2)
                w.wait(5.0)  # the history's end (WatchedServer forwards EXITED once written)
        except Exception as exc:  # noqa: BLE001 - reported; the session still has to end
            report_failure("Stopping the server", exc,
                           advice="If it still runs, end it from a terminal (its pid is in the server log).")
            if not w.session.wait(0):
                w.session.abandon(logparse.Failure("stop_failed", f"it could not be stopped cleanly: {exc}",
                                                   repr(exc)))

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
