"""Start, stop and supervise a long-lived llama-server process: ServerProcess (the child and its log lines)
and ServerSession (a launch as a services.supervised.SupervisedSession).

Its processes start through services.process (the one spawner): an argument list (never a shell), its own
process group, and on Linux a parent-death signal, so a server never outlives the app, also when the app is
killed. A session is ready when its log says it listens (logparse.Listening) or /health answers ready.
"""

from __future__ import annotations

import collections
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from llm_tuner.core.devices import DeviceIdLine, fa_quants_from_log
from llm_tuner.services import device_ids, logparse, process
from llm_tuner.services.client import LlamaClient
from llm_tuner.services.failures import log_once
from llm_tuner.services.launch import LaunchPlan, port_in_use
from llm_tuner.services.process import StopResult, signal_name
from llm_tuner.services.supervised import ServerState, SupervisedSession


class ServerProcess:
    """One llama-server child: its output lines go to `on_line` (from a reader thread)."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None,
                 on_line: Callable[[str], None] | None = None, keep_lines: int = 2000, *,
                 ignore_sigpipe: bool = False) -> None:
        self.argv = list(argv)
        # keep Python's SIG_IGN (a worker writing to a gone client lives on)
        self.ignore_sigpipe = ignore_sigpipe
        self.env = env
        self.on_line = on_line
        self.lines: collections.deque[str] = collections.deque(maxlen=keep_lines)
        self._child: process.Child | None = None
        self._reader: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child else None

    @property
    def _proc(self) -> Any:
        """The subprocess.Popen (tests send it signals; only services.process names that type)."""
        return self._child.popen if self._child else None

    def start(self) -> None:
        self._child = process.spawn(self.argv, env=self.env, ignore_sigpipe=self.ignore_sigpipe,
                                    line_buffered=True)
        self._reader = threading.Thread(target=self._read, name=f"llama-server-log-{self._child.pid}",
                                        daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._child is not None
        for line in self._child.lines():
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


class ServerSession(SupervisedSession):
    """One supervised llama-server launch: states, health, parsed log events, request records.

    Everything it learns goes to `on_event` from its own threads (log reader, health poller, exit
    waiter): the events of services.supervised. The consumer (a Qt bridge, the CLI) must be quick and
    thread-safe.
    """

    kind = "launch"

    def __init__(self, plan: LaunchPlan, on_event: Callable[[object], None], *, health_poll_s: float = 0.25,
                 client_factory: Callable[..., LlamaClient] | None = None) -> None:
        super().__init__(on_event)
        self._plan = plan
        self.health_poll_s = health_poll_s
        self._parser = logparse.LogParser()
        self._proc: ServerProcess | None = None
        self._stop_requested = threading.Event()
        self._stop_how = "SIGINT"
        self._launched = threading.Event()  # start() has returned: a process exists, or the session ended
        self._done = threading.Event()
        self._threads: list[threading.Thread] = []
        self._client_factory = client_factory or LlamaClient

    # -- properties -----------------------------------------------------------------------------
    @property
    def plan(self) -> LaunchPlan:
        return self._plan

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def api_key(self) -> str | None:
        return self._plan.api_key

    def alive(self) -> bool:
        return self._proc is not None and self._proc.alive()

    @property
    def lines(self) -> collections.deque[str]:
        """The newest lines of the server's output (a failed start's evidence)."""
        return self._proc.lines if self._proc else collections.deque()

    # -- lifecycle ------------------------------------------------------------------------------
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

    def abandon(self, failure: logparse.Failure) -> None:
        if self._done.is_set():
            return
        self._stop_requested.set()
        if self._proc is not None and self._proc.alive():  # started before the failure: it goes too
            self._proc.stop(2.0, 2.0, 2.0)
        self.failure = failure
        self._finish(None, "could not start")

    # -- threads --------------------------------------------------------------------------------
    def _on_line(self, line: str) -> None:
        if "system_info:" in line:  # the build's flash-attention pairs, kept for the advice (device_ids)
            quants = fa_quants_from_log([line])
            if quants is not None:
                device_ids.remember_fa_quants(self.plan.binary, quants)
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
        elif isinstance(ev, DeviceIdLine) and ev.pci_bus_id:  # kept for the inventory (device_ids)
            device_ids.remember(self.plan.binary, {ev.name: ev.pci_bus_id})
        self._on_log_event(ev)

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
            reason = f"stopped ({self._stop_how})"
        elif (sig := signal_name(code)) is not None:
            reason = f"killed by {sig}"
        elif code == 0:
            reason = "exited"
        else:
            reason = f"exited with code {code}"
        if not self._stop_requested.is_set() and code != 0:
            self.failure = logparse.classify_failure(list(self._proc.lines), code)
            sig = signal_name(code)
            if (self.failure is None or self.failure.kind == "unknown") and sig:
                self.failure = logparse.signal_failure(sig, self._proc.lines)
                if self.failure.kind == "crashed":
                    reason = f"crashed ({signal_name(code)})"
            if self.failure is not None and self.failure.kind not in ("killed", "crashed", "unknown"):
                reason = f"{reason}: {self.failure.kind}"
        self._finish(code, reason)

    def _finish(self, code: int | None, reason: str) -> None:
        self._mark_exited(code, reason, self.failure)
        self._done.set()
