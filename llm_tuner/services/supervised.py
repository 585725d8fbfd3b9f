"""One interface for a watched llama-server, launched (services.server) or attached (services.attach).

In the spirit of jupyter_client's KernelManagerABC: the watcher (services.watch), the Qt bridge and `llm-tuner
run` hold a `SupervisedSession` and never ask which kind it is. Each kind starts, stops and waits in its own
way; what they share (states, the events they send, the one request record, the memory snapshot) is defined
here once.

A session sends its events to `on_event` from its own threads; the consumer must be quick and thread-safe:
- `StateChanged` (idle -> starting -> loading -> ready -> stopping -> exited; `gone` for an attach that
  stopped answering),
- `RequestFinished`, exactly one per finished request, with its one record (the log's timings, or in attach
  mode without a log the `/slots` + `/metrics` deltas, marked approximate),
- `MemorySnapshot`, frozen, whenever what the server said about its memory grew (buffers, breakdown, devices),
- and the log parser's other events (LogLine, Listening, MemoryBreakdown, ...; services.logparse).
"""

from __future__ import annotations

import abc
import enum
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

from llm_tuner.core.devices import LlamaDevice
from llm_tuner.core.memory_log import MemoryBreakdown
from llm_tuner.core.session import RequestRecord
from llm_tuner.services import logparse
from llm_tuner.services.failures import log_once

if TYPE_CHECKING:
    from llm_tuner.services.launch import LaunchPlan
    from llm_tuner.services.telemetry.server_metrics import ApproxRequest


class ServerState(enum.StrEnum):
    """A watched server's state: the one definition every view reads (state.live gives each its colour and
    words)."""

    IDLE = "idle"
    STARTING = "starting"  # process started, nothing listening yet
    LOADING = "loading"  # /health answers 503 while the model loads
    READY = "ready"
    STOPPING = "stopping"
    EXITED = "exited"
    GONE = "gone"  # attach: a server that answered stopped answering (EXITED follows after a grace period)

    @property
    def running(self) -> bool:
        """Launched or attached and not yet ended: stopping and gone included (its port is not free, its
        session has yet to end)."""
        return self not in (ServerState.IDLE, ServerState.EXITED)

    @property
    def coming_up(self) -> bool:
        """Started, not yet ready (the process runs or the URL is being reached, the model loads)."""
        return self in (ServerState.STARTING, ServerState.LOADING)

    @property
    def stoppable(self) -> bool:
        """Stop (or detach) means something now: running and not already stopping."""
        return self.running and self is not ServerState.STOPPING


@dataclass(frozen=True)
class StateChanged:
    """The session moved to `state`. For EXITED: the exit code, a reason and (if it failed) a Failure."""

    state: ServerState
    url: str | None = None
    code: int | None = None
    reason: str | None = None
    failure: logparse.Failure | None = None
    t: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"event": "state", "state": str(self.state), "url": self.url}
        if self.state == ServerState.EXITED:
            d.update(code=self.code, reason=self.reason)
            if self.failure is not None:
                d.update(failure=self.failure.kind, message=self.failure.message)
        return d


@dataclass(frozen=True)
class RequestFinished:
    """One finished request: the only event a request makes (the store, Live and `run` read this one)."""

    record: RequestRecord


@dataclass(frozen=True)
class MemorySnapshot:
    """What the server said about its memory so far: `-lv 4` buffer lines, the breakdown table (at exit, or
    with
    --log-jsonl at load) and the device list it logged (RPC endpoints). Live's memory bars draw it."""

    breakdown: MemoryBreakdown | None = None
    buffers: tuple[logparse.BufferSize, ...] = ()
    devices: tuple[LlamaDevice, ...] = ()


def record_from_timings(t: logparse.RequestTimings, time_unix: float | None = None) -> RequestRecord:
    """The record of a request the server's log timed (precise)."""
    return RequestRecord(time_unix=time_unix or time.time(), slot=t.slot, task=t.task, cache_n=t.cache_n,
                         prompt_n=t.prompt_n, prompt_ms=t.prompt_ms, prompt_per_second=t.prompt_per_second,
                         predicted_n=t.predicted_n, predicted_ms=t.predicted_ms,
                         predicted_per_second=t.predicted_per_second, draft_n=t.draft_n,
                         draft_n_accepted=t.draft_n_accepted, ttft_ms=t.ttft_ms, latency_ms=t.latency_ms,
                         model=t.model)


def record_from_slots(a: ApproxRequest, time_unix: float | None = None) -> RequestRecord:
    """The record of a request seen only through `/slots` and `/metrics` (attach without a log):
    approximate."""
    return RequestRecord(time_unix=time_unix or time.time(), slot=a.slot, task=a.task, cache_n=a.cache_n,
                         prompt_n=a.prompt_n, prompt_ms=a.prompt_ms, prompt_per_second=a.prompt_per_second,
                         predicted_n=a.predicted_n, predicted_ms=a.predicted_ms,
                         predicted_per_second=a.predicted_per_second, ttft_ms=a.prompt_ms,
                         latency_ms=(a.prompt_ms or 0) + (a.predicted_ms or 0) or None, approximate=True)


class SupervisedSession(abc.ABC):
    """A watched llama-server: start, stop, wait; its state, url, pid and plan; events to `on_event`.

    `kind` is "launch" or "attach" (the history's mode). `plan` is what a launch runs (None for an attach: the
    app does not know its command); `pid` is the process the app started (None for an attach).
    """

    kind: ClassVar[str]

    def __init__(self, on_event: Callable[[object], None]) -> None:
        self.on_event = on_event
        self.state = ServerState.IDLE
        self.url: str | None = None
        self.exit_code: int | None = None
        self.exit_reason: str | None = None
        self.failure: logparse.Failure | None = None
        self.started_unix: float | None = None
        self.ended_unix: float | None = None
        self.memory = MemorySnapshot()
        self._state_lock = threading.Lock()

    # -- what a session is -----------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def plan(self) -> LaunchPlan | None:
        """What the app launched (None for an attach)."""

    @property
    @abc.abstractmethod
    def pid(self) -> int | None:
        """The server's process id when the app started it, else None."""

    @property
    @abc.abstractmethod
    def api_key(self) -> str | None:
        """The key a client of this server sends (None: the server takes requests without one)."""

    # -- what a session does ---------------------------------------------------------------------
    @abc.abstractmethod
    def start(self) -> None:
        """Begin (non-blocking): launch the process, or start watching the URL."""

    @abc.abstractmethod
    def stop(self, sigint_s: float = 10.0, sigterm_s: float = 5.0, sigkill_s: float = 5.0) -> None:
        """Stop a launched server (SIGINT -> SIGTERM -> SIGKILL, each with its timeout) or detach; returns
        once the exit is recorded."""

    @abc.abstractmethod
    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the session has ended (EXITED sent). True if it has."""

    @abc.abstractmethod
    def abandon(self, failure: logparse.Failure) -> None:
        """End a session whose `start` raised: EXITED with `failure` (whatever it had begun is stopped), so
        its watcher and views see the end of a start that failed, not a server starting forever."""

    @abc.abstractmethod
    def alive(self) -> bool:
        """The server runs (a launch's process) or answers (an attach)."""

    # -- shared by both kinds --------------------------------------------------------------------
    def _emit(self, ev: object) -> None:
        try:
            self.on_event(ev)
        except Exception as exc:  # noqa: BLE001 - a consumer bug must not stop supervision
            log_once(f"a consumer of a {self.kind} session's events failed", exc)

    def _set_state(self, state: ServerState, **kw: Any) -> None:
        """Move to `state` and say so; nothing moves a session out of EXITED."""
        with self._state_lock:
            if self.state == state or self.state == ServerState.EXITED:
                return
            self.state = state
        self._emit(StateChanged(state, url=self.url, **kw))

    def _mark_exited(self, code: int | None, reason: str, failure: logparse.Failure | None) -> None:
        self.exit_code, self.exit_reason, self.failure = code, reason, failure
        self.ended_unix = time.time()
        with self._state_lock:
            self.state = ServerState.EXITED
        self._emit(StateChanged(ServerState.EXITED, url=self.url, code=code, reason=reason, failure=failure))

    def _on_log_event(self, ev: object) -> None:
        """A parsed log event of this server: a request's timings become its one record, memory lines grow the
        snapshot (sent after the line itself), everything else goes on as it is."""
        if isinstance(ev, logparse.RequestTimings):
            self._emit(RequestFinished(record_from_timings(ev)))
            return
        snap = self.memory
        if isinstance(ev, MemoryBreakdown):
            snap = replace(snap, breakdown=ev)
        elif isinstance(ev, logparse.BufferSize):
            snap = replace(snap, buffers=(*snap.buffers, ev))
        elif isinstance(ev, logparse.DeviceListed):
            snap = replace(snap, devices=(*snap.devices, ev.device))
        self._emit(ev)
        if snap is not self.memory:
            self.memory = snap
            self._emit(snap)
