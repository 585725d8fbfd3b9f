"""Start, stop and supervise the long-lived llama-server process.

Its processes start through services.process (the one spawner): an argument list (never a shell), its own
process group, and on Linux a parent-death signal, so a server never outlives the app, also when the app is
killed.
"""

from __future__ import annotations

import collections
import enum
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from llm_tuner.core.session import RequestRecord
from llm_tuner.services import device_ids, logparse, process
from llm_tuner.services.client import LlamaClient
from llm_tuner.services.failures import log_once
from llm_tuner.services.launch import LaunchPlan, config_ini_paths, plan_from_profile, plan_launch  # noqa: F401
from llm_tuner.services.process import StopResult
from llm_tuner.services.telemetry.server_metrics import SlotWatcher, parse_metrics


class ServerProcess:
    """One llama-server child: its output lines go to `on_line` (from a reader thread)."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None,
                 on_line: Callable[[str], None] | None = None, keep_lines: int = 2000, *,
                 ignore_sigpipe: bool = False) -> None:
        self.argv = list(argv)
        self.ignore_sigpipe = ignore_sigpipe  # keep Python's SIG_IGN (a worker writing to a gone client lives on)
        self.env = env
        self.on_line = on_line
        self.lines: collections.deque[str] = collections.deque(maxlen=keep_lines)
        self._child: process.Child | None = None
        self._reader: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child else None

    @property
    def _proc(self):
        """The subprocess.Popen (tests send it signals)."""
        return self._child.popen if self._child else None

    def start(self) -> None:
        self._child = process.spawn(self.argv, env=self.env, ignore_sigpipe=self.ignore_sigpipe, line_buffered=True)
        self._reader = threading.Thread(target=self._read, name=f"llama-server-log-{self._child.pid}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._child is not None and self._child.popen.stdout is not None
        for line in self._child.popen.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            if self.on_line is not None:
                try:
                    self.on_line(line)
                except Exception as exc:  # noqa: BLE001 - a consumer bug must not stop log reading
                    log_once("a reader of llama-server's log failed", exc)

    def poll(self) -> int | None:
        return self._child.poll() if self._child else None

    def alive(self) -> bool:
        return self._child is not None and self._child.poll() is None

    def wait(self, timeout: float | None = None) -> int | None:
        return self._child.wait(timeout) if self._child else None

    def join_reader(self, timeout: float = 5.0) -> None:
        if self._reader is not None:
            self._reader.join(timeout)

    def kill(self) -> None:
        """SIGKILL to the process group at once (a stuck or stopped process; stop() asks politely first)."""
        if self._child is not None:
            self._child.signal(getattr(signal, "SIGKILL", signal.SIGTERM))

    def stop(self, sigint_s: float = 10.0, sigterm_s: float = 5.0, sigkill_s: float = 5.0) -> StopResult:
        """SIGINT, then SIGTERM, then SIGKILL to the process group, each with its timeout."""
        if self._child is None:
            return StopResult(None, "already exited")
        result = self._child.stop(sigint_s, sigterm_s, sigkill_s)
        self.join_reader(1.0 if result.how == "already exited" else 2.0)
        return result


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now on `host`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_in_use(host: str, port: int) -> bool:
    """True when something already listens on host:port (checked before a launch)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.3)
        return s.connect_ex((host if host not in ("0.0.0.0", "") else "127.0.0.1", port)) == 0


# ================================================================================================
# Supervised sessions: states, health, log events, watch flags, environment hygiene.
# ================================================================================================


# The newest request records a session keeps in memory (a busy server answers ~15/s for hours); every
# record also goes out as RequestFinished, and the store keeps them all.
RECENT_RECORDS = 10_000


class ServerState(enum.StrEnum):
    IDLE = "idle"
    STARTING = "starting"  # process started, nothing listening yet
    LOADING = "loading"  # /health answers 503 while the model loads
    READY = "ready"
    STOPPING = "stopping"
    EXITED = "exited"
    GONE = "gone"  # attach: a server that answered stopped answering (EXITED follows after a grace period)


@dataclass(frozen=True)
class StateChanged:
    """The session moved to `state`. For EXITED: the exit code, a reason and (if it failed) a Failure."""

    state: ServerState
    url: str | None = None
    code: int | None = None
    reason: str | None = None
    failure: logparse.Failure | None = None
    t: float = field(default_factory=time.time)

    def to_json(self) -> dict:
        d = {"event": "state", "state": str(self.state), "url": self.url}
        if self.state == ServerState.EXITED:
            d.update(code=self.code, reason=self.reason)
            if self.failure is not None:
                d.update(failure=self.failure.kind, message=self.failure.message)
        return d


@dataclass(frozen=True)
class RequestFinished:
    record: RequestRecord


def signal_name(code: int | None) -> str | None:
    """SIGKILL for an exit code of -9 (a process killed by a signal); None for an ordinary exit."""
    if code is not None and code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return None


class ServerSession:
    """One supervised llama-server launch: states, health, parsed log events, request records.

    Everything it learns goes to `on_event` from its own threads (log reader, health poller, exit
    waiter): StateChanged, logparse events (LogLine, Listening, MemoryBreakdown, ...) and
    RequestFinished. The consumer (a Qt bridge, the CLI) must be quick and thread-safe.
    """

    def __init__(self, plan: LaunchPlan, on_event: Callable[[object], None], *, health_poll_s: float = 0.25,
                 client_factory=None) -> None:
        self.plan = plan
        self.on_event = on_event
        self.health_poll_s = health_poll_s
        self.state = ServerState.IDLE
        self.url: str | None = None
        self.exit_code: int | None = None
        self.exit_reason: str | None = None
        self.failure: logparse.Failure | None = None
        self.records: collections.deque[RequestRecord] = collections.deque(maxlen=RECENT_RECORDS)  # all in the store
        self.memory: logparse.MemoryBreakdown | None = None
        self.buffers: list[logparse.BufferSize] = []
        self.devices: list = []  # llama.cpp's device list as the server logged it (RPC endpoints; -lv 4)
        self.started_unix: float | None = None
        self.ended_unix: float | None = None
        self._parser = logparse.LogParser()
        self._proc: ServerProcess | None = None
        self._stop_requested = threading.Event()
        self._launched = threading.Event()  # start() has returned: a process exists, or the session ended
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        if client_factory is None:
            client_factory = LlamaClient
        self._client_factory = client_factory

    # -- properties -----------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.alive()

    @property
    def lines(self):
        return self._proc.lines if self._proc else collections.deque()

    # -- lifecycle ------------------------------------------------------------------------------
    def _set_state(self, state: ServerState, **kw) -> None:
        with self._lock:
            if self.state == state or self.state == ServerState.EXITED:
                return
            self.state = state
        self._emit(StateChanged(state, url=self.url, **kw))

    def _emit(self, ev: object) -> None:
        try:
            self.on_event(ev)
        except Exception as exc:  # noqa: BLE001 - a consumer bug must not stop supervision
            log_once("a consumer of a llama-server session's events failed", exc)

    def start(self) -> None:
        """Launch (non-blocking). A port already in use ends the session at once with a clear reason."""
        try:
            self._start()
        finally:
            self._launched.set()

    def _start(self) -> None:
        self.started_unix = time.time()
        if self._stop_requested.is_set():  # stopped (the app quit) before the launch thread got here
            self._finish(None, "stopped before it started")
            return
        self._set_state(ServerState.STARTING)
        if port_in_use(self.plan.host, self.plan.port):
            self.failure = logparse.Failure(
                "port_in_use", f"Port {self.plan.host}:{self.plan.port} is already in use (another server?). "
                "Stop it or choose another port.", "checked before launch")
            self._finish(None, "port in use")
            return
        self._proc = ServerProcess(self.plan.argv, self.plan.env, on_line=self._on_line)
        try:
            self._proc.start()
        except OSError as exc:
            self.failure = logparse.Failure("not_started", f"Could not start {self.plan.binary}: {exc}. "
                                            "Check the binary path in Settings.", str(exc))
            self._finish(None, "could not start")
            return
        self.url = self.plan.url
        for target, name in ((self._health_loop, "health"), (self._wait_loop, "exit-waiter")):
            t = threading.Thread(target=target, name=f"llama-server-{name}-{self._proc.pid}", daemon=True)
            self._threads.append(t)
            t.start()

    def stop(self, sigint_s: float = 10.0, sigterm_s: float = 5.0, sigkill_s: float = 5.0) -> None:
        """Stop and wait for the exit to be recorded (SIGINT -> SIGTERM -> SIGKILL). Safe while start() is
        still launching on another thread: the process it starts is stopped too."""
        if self._done.is_set():
            return
        self._stop_requested.set()
        if not self._launched.wait(10.0) or self._proc is None or self._done.is_set():
            return  # never launched (start ends the session itself)
        self._set_state(ServerState.STOPPING)
        result = self._proc.stop(sigint_s, sigterm_s, sigkill_s)
        self._stop_how = result.how
        self._done.wait(10.0)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the session has exited and been recorded. True if it has."""
        return self._done.wait(timeout)

    # -- threads --------------------------------------------------------------------------------
    def _on_line(self, line: str) -> None:
        for ev in self._parser.feed(line):
            self._handle(ev)

    def _handle(self, ev: object) -> None:
        if isinstance(ev, logparse.Listening):
            self.url = ev.url if ev.url.startswith("http") else self.url
            self._emit(ev)
            self._set_state(ServerState.READY)
            return
        if isinstance(ev, logparse.Loading):
            self._set_state(ServerState.LOADING)
        elif isinstance(ev, logparse.MemoryBreakdown):
            self.memory = ev
        elif isinstance(ev, logparse.BufferSize):
            self.buffers.append(ev)
        elif isinstance(ev, logparse.DeviceListed):
            self.devices.append(ev.device)
        elif isinstance(ev, logparse.DeviceIdLine) and ev.pci_bus_id:  # kept for the inventory (device_ids)
            device_ids.remember(self.plan.binary, {ev.name: ev.pci_bus_id})
        elif isinstance(ev, logparse.RequestTimings):
            rec = record_from_timings(ev)
            self.records.append(rec)
            self._emit(ev)
            self._emit(RequestFinished(rec))
            return
        self._emit(ev)

    def _health_loop(self) -> None:
        client = self._client_factory(self.plan.url, timeout=5.0)
        try:
            while not self._done.is_set() and not self._stop_requested.is_set():
                h = client.health(timeout=1.0)
                if h.status_code == 503:
                    self._set_state(ServerState.LOADING)
                elif h.ready:
                    self._set_state(ServerState.READY)
                    return
                self._done.wait(self.health_poll_s)
        finally:
            client.close()

    def _wait_loop(self) -> None:
        assert self._proc is not None
        code = self._proc.wait()
        self._proc.join_reader(5.0)
        for ev in self._parser.flush():
            self._handle(ev)
        if self._stop_requested.is_set():
            reason = f"stopped ({getattr(self, '_stop_how', 'SIGINT')})"
        elif (sig := signal_name(code)) is not None:
            reason = f"killed by {sig}"
        elif code == 0:
            reason = "exited"
        else:
            reason = f"exited with code {code}"
        if not self._stop_requested.is_set() and code != 0:
            self.failure = logparse.classify_failure(list(self._proc.lines), code)
            if (self.failure is None or self.failure.kind == "unknown") and signal_name(code):
                self.failure = logparse.signal_failure(signal_name(code), self._proc.lines)
                if self.failure.kind == "crashed":
                    reason = f"crashed ({signal_name(code)})"
            if self.failure is not None and self.failure.kind not in ("killed", "crashed", "unknown"):
                reason = f"{reason}: {self.failure.kind}"
        self._finish(code, reason)

    def _finish(self, code: int | None, reason: str) -> None:
        self.exit_code = code
        self.exit_reason = reason
        self.ended_unix = time.time()
        with self._lock:
            self.state = ServerState.EXITED
        self._emit(StateChanged(ServerState.EXITED, url=self.url, code=code, reason=reason, failure=self.failure))
        self._done.set()


def record_from_timings(t: logparse.RequestTimings, time_unix: float | None = None) -> RequestRecord:
    return RequestRecord(time_unix=time_unix or time.time(), slot=t.slot, task=t.task, cache_n=t.cache_n,
                         prompt_n=t.prompt_n, prompt_ms=t.prompt_ms, prompt_per_second=t.prompt_per_second,
                         predicted_n=t.predicted_n, predicted_ms=t.predicted_ms,
                         predicted_per_second=t.predicted_per_second, draft_n=t.draft_n,
                         draft_n_accepted=t.draft_n_accepted, ttft_ms=t.ttft_ms, latency_ms=t.latency_ms)


class AttachedSession:
    """Watch a llama-server someone else started, by URL, without owning it (stop = detach).

    With `log_path` the log file is followed from its end and parsed like a launched server's output
    (precise per-request records). Without it, finished requests are inferred from `/slots` and the
    `/metrics` deltas and marked approximate.
    """

    def __init__(self, url: str, on_event: Callable[[object], None], *, log_path: str | Path | None = None,
                 api_key: str | None = None, poll_s: float = 0.5, client_factory=None,
                 connect_timeout_s: float = 5.0, gone_grace_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.connect_timeout_s = connect_timeout_s  # nothing answers at all: the attach fails
        self.gone_grace_s = gone_grace_s  # state GONE this long, then the session ends as failed
        self.on_event = on_event
        self.log_path = Path(log_path) if log_path else None
        self.api_key = api_key
        self.poll_s = poll_s
        self.state = ServerState.IDLE
        self.records: collections.deque[RequestRecord] = collections.deque(maxlen=RECENT_RECORDS)  # all in the store
        self.memory: logparse.MemoryBreakdown | None = None
        self.exit_code: int | None = None
        self.exit_reason: str | None = None
        self.failure = None
        self.started_unix: float | None = None
        self.ended_unix: float | None = None
        self.plan = None
        self.pid = None
        self._stop = threading.Event()
        self._done = threading.Event()
        self._parser = logparse.LogParser()
        self._finish_lock = threading.Lock()
        if client_factory is None:
            client_factory = LlamaClient
        self._client = client_factory(self.url, api_key=api_key, timeout=5.0) if api_key else \
            client_factory(self.url, timeout=5.0)
        self._threads: list[threading.Thread] = []

    def _emit(self, ev) -> None:
        try:
            self.on_event(ev)
        except Exception as exc:  # noqa: BLE001 - a consumer bug must not stop watching
            log_once("a consumer of an attached server's events failed", exc)

    def _set_state(self, state: ServerState, **kw) -> None:
        if self.state != state:
            self.state = state
            self._emit(StateChanged(state, url=self.url, **kw))

    def start(self) -> None:
        self.started_unix = time.time()
        self._set_state(ServerState.STARTING)
        targets = [self._poll_loop] + ([self._tail_loop] if self.log_path else [])
        for fn in targets:
            t = threading.Thread(target=fn, name=f"attach-{fn.__name__}", daemon=True)
            self._threads.append(t)
            t.start()

    def stop(self, *_a, **_kw) -> None:
        if self._done.is_set():
            return
        self._stop.set()
        self._set_state(ServerState.STOPPING)
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(5.0)
        self._finish("detached", None)

    def _finish(self, reason: str, failure) -> None:
        with self._finish_lock:
            if self._done.is_set():
                return
            self.exit_reason, self.failure = reason, failure
            self.ended_unix = time.time()
            self.state = ServerState.EXITED
            self._emit(StateChanged(ServerState.EXITED, url=self.url, code=None, reason=reason, failure=failure))
            self._client.close()
            self._done.set()

    def _give_up(self, kind: str, message: str) -> None:
        """The poll loop ends the session: nothing answered, or a server stopped answering for the grace period."""
        self._stop.set()
        self._emit(logparse.LogLine("error", message))
        self._finish(kind, logparse.Failure(kind=kind, message=message, evidence=""))

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def alive(self) -> bool:
        return self.state in (ServerState.READY, ServerState.LOADING)

    def _poll_loop(self) -> None:
        watcher = SlotWatcher()
        was_reachable = None
        ever_reachable = False
        since = time.monotonic()  # of the attach, then of the last answer
        while not self._stop.is_set():
            h = self._client.health(timeout=2.0)
            if h.status_code is not None:
                ever_reachable, since = True, time.monotonic()
            elif not ever_reachable and time.monotonic() - since >= self.connect_timeout_s:
                return self._give_up("unreachable", f"nothing answers at {self.url} ({h.message}): is the server "
                                     "running, and is the URL (host and port) right?")
            elif ever_reachable and time.monotonic() - since >= self.gone_grace_s:
                return self._give_up("gone", f"the server at {self.url} stopped answering {self.gone_grace_s:g} s "
                                     f"ago ({h.message}); it was stopped or crashed")
            if h.status_code == 503:
                self._set_state(ServerState.LOADING)
            if (h.status_code is not None) != was_reachable:
                was_reachable = h.status_code is not None
                if not was_reachable:
                    self._emit(logparse.LogLine("warn", f"server at {self.url} is not reachable ({h.message})"))
                    self._set_state(ServerState.GONE if ever_reachable else ServerState.STARTING)
            if h.ready and self.log_path is None:
                try:
                    slots = self._client.slots()
                    try:
                        metrics = parse_metrics(self._client.metrics_text())
                    except Exception:  # noqa: BLE001 - no --metrics: counts only
                        metrics = {}
                    for a in watcher.update(slots, metrics):
                        rec = RequestRecord(
                            time_unix=time.time(), slot=a.slot, task=a.task, cache_n=a.cache_n, prompt_n=a.prompt_n,
                            prompt_ms=a.prompt_ms, prompt_per_second=a.prompt_per_second, predicted_n=a.predicted_n,
                            predicted_ms=a.predicted_ms, predicted_per_second=a.predicted_per_second,
                            ttft_ms=a.prompt_ms, latency_ms=(a.prompt_ms or 0) + (a.predicted_ms or 0) or None,
                            approximate=True)
                        self.records.append(rec)
                        self._emit(RequestFinished(rec))
                except Exception as exc:  # noqa: BLE001 - /slots disabled or a transient error: the next poll asks again
                    log_once(f"reading /slots of {self.url}", exc)
            if h.ready:  # after the first /slots + /metrics poll, so requests sent on "ready" have a baseline
                self._set_state(ServerState.READY)
            self._stop.wait(self.poll_s)

    def _tail_loop(self) -> None:
        assert self.log_path is not None
        pos = self.log_path.stat().st_size if self.log_path.exists() else 0
        buf = ""
        while not self._stop.is_set():
            try:
                size = self.log_path.stat().st_size
                if size < pos:  # rotated or truncated: start over
                    pos = 0
                if size > pos:
                    with open(self.log_path, encoding="utf-8", errors="replace") as f:
                        f.seek(pos)
                        buf += f.read()
                        pos = f.tell()
                    *lines, buf = buf.split("\n")
                    for line in lines:
                        for ev in self._parser.feed(line):
                            if isinstance(ev, logparse.RequestTimings):
                                rec = record_from_timings(ev)
                                self.records.append(rec)
                                self._emit(ev)
                                self._emit(RequestFinished(rec))
                            else:
                                if isinstance(ev, logparse.MemoryBreakdown):
                                    self.memory = ev
                                self._emit(ev)
            except OSError:
                pass
            self._stop.wait(0.25)
