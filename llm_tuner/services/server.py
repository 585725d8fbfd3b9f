"""Start, stop and supervise the long-lived llama-server process.

The only module (with services/binaries.py for short runs) that starts processes. The server gets
an argument list (never a shell), its own process group, and on Linux a parent-death signal so it
never outlives the app, also when the app is killed.

PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process. Thread-pool
threads come and go, so every server is forked from one long-lived spawner thread owned here.
"""

from __future__ import annotations

import collections
import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass


def _linux_pdeathsig() -> None:  # pragma: no cover - runs in the child between fork and exec
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1


class _Spawner:
    """One daemon thread that performs every Popen for long-lived children (see module docstring)."""

    def __init__(self) -> None:
        self._q: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _loop(self) -> None:
        while True:
            fn, fut = self._q.get()
            try:
                fut.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed back to the caller
                fut.set_exception(exc)

    def run(self, fn: Callable[[], subprocess.Popen]) -> subprocess.Popen:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="llm-tuner-spawner", daemon=True)
                self._thread.start()
        fut: Future = Future()
        self._q.put((fn, fut))
        return fut.result()


_spawner = _Spawner()


@dataclass(frozen=True)
class StopResult:
    returncode: int | None
    how: str  # "SIGINT", "SIGTERM", "SIGKILL", "already exited"


class ServerProcess:
    """One llama-server child: its output lines go to `on_line` (from a reader thread)."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None,
                 on_line: Callable[[str], None] | None = None, keep_lines: int = 2000) -> None:
        self.argv = list(argv)
        self.env = env
        self.on_line = on_line
        self.lines: collections.deque[str] = collections.deque(maxlen=keep_lines)
        self._proc: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> None:
        kwargs: dict = {}
        if os.name != "nt":
            kwargs["start_new_session"] = True
            if sys.platform.startswith("linux"):
                kwargs["preexec_fn"] = _linux_pdeathsig
        else:  # pragma: no cover - Windows
            kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP

        def spawn() -> subprocess.Popen:
            return subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, env=self.env, text=True, errors="replace",
                                    bufsize=1, **kwargs)

        self._proc = _spawner.run(spawn)
        self._reader = threading.Thread(target=self._read, name=f"llama-server-log-{self._proc.pid}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            if self.on_line is not None:
                try:
                    self.on_line(line)
                except Exception:  # noqa: BLE001 - a consumer bug must not stop log reading
                    pass

    def poll(self) -> int | None:
        return self._proc.poll() if self._proc else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def wait(self, timeout: float | None = None) -> int | None:
        if self._proc is None:
            return None
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def join_reader(self, timeout: float = 5.0) -> None:
        if self._reader is not None:
            self._reader.join(timeout)

    def _signal(self, sig: int) -> None:
        assert self._proc is not None
        try:
            if os.name != "nt":
                os.killpg(self._proc.pid, sig)
            elif sig == signal.SIGINT:  # pragma: no cover - Windows
                self._proc.send_signal(signal.CTRL_BREAK_EVENT)
            else:  # pragma: no cover
                self._proc.kill()
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self, sigint_s: float = 10.0, sigterm_s: float = 5.0, sigkill_s: float = 5.0) -> StopResult:
        """SIGINT, then SIGTERM, then SIGKILL to the process group, each with its timeout."""
        if self._proc is None or self._proc.poll() is not None:
            self.join_reader(1.0)
            return StopResult(self._proc.returncode if self._proc else None, "already exited")
        for sig, timeout, name in ((signal.SIGINT, sigint_s, "SIGINT"), (signal.SIGTERM, sigterm_s, "SIGTERM"),
                                   (getattr(signal, "SIGKILL", signal.SIGTERM), sigkill_s, "SIGKILL")):
            self._signal(sig)
            code = self.wait(timeout)
            if code is not None:
                self.join_reader(2.0)
                return StopResult(code, name)
        return StopResult(self._proc.poll(), "SIGKILL")  # pragma: no cover - unkillable


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now on `host`."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_in_use(host: str, port: int) -> bool:
    """True when something already listens on host:port (checked before a launch)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.3)
        return s.connect_ex((host if host not in ("0.0.0.0", "") else "127.0.0.1", port)) == 0
