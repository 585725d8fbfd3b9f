"""The one module that starts child processes: every llama.cpp program the app runs, short or long-lived.

Every child gets an argument list (never a shell), closed stdin, its own process group (a stop reaches all of
it; the terminal's Ctrl-C reaches only us, and we stop the child), and on Linux a parent-death signal
(PR_SET_PDEATHSIG, SIGKILL): it never outlives the app, also when the app is killed with SIGKILL. A stop is
SIGINT, then SIGTERM, then SIGKILL to the group, each with its timeout. `run` (a short run: --help,
--list-devices, llama-bench, llama-perplexity, llama-fit-params) stops its child on timeout, on cancel and on
any exception in the waiting thread (KeyboardInterrupt included). `spawn` starts a long-lived child
(llama-server, ggml-rpc-server) whose owner stops it (services.server.ServerProcess).

PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process. Thread-pool threads
come and go, so every child is forked from one long-lived spawner thread owned here (`llm-tuner-spawner`).
"""

from __future__ import annotations

import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from llm_tuner.core import flags

_LINUX = sys.platform.startswith("linux")


def child_env(profile_env: dict[str, str] | None = None,
              base_env: dict[str, str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """The environment of every llama.cpp process the app starts, and the inherited variables it drops.

    Inherited LLAMA_ARG_* variables are dropped unless the profile sets them (they would change a launch
    silently); the profile's own variables are added; CUDA_DEVICE_ORDER=PCI_BUS_ID unless set (so CUDA's
    device numbering matches NVML's, which device labels depend on); NO_COLOR=1 (plain logs to parse).
    """
    profile_env = dict(profile_env or {})
    base = dict(os.environ if base_env is None else base_env)
    dropped = {k: v for k, v in base.items() if k.startswith(flags.ENV_PREFIX) and k not in profile_env}
    env = {k: v for k, v in base.items() if k not in dropped}
    env.update(profile_env)
    env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    env.setdefault("NO_COLOR", "1")
    return env, dropped


# libc's prctl, looked up once here in the parent. The child must not load it between fork and exec: dlopen
# there waits on the dynamic loader's lock, and when another thread of the app held it at the fork (a job
# thread importing an extension module, Qt loading a plugin) the child hung before exec, and the spawner with
# it (seen in a full test run: every later start waited forever).
_PRCTL = ctypes.CDLL("libc.so.6", use_errno=True).prctl if _LINUX else None
_PR_SET_PDEATHSIG = 1


def _pdeathsig(parent_pid: int) -> Callable[[], None]:
    """The child's first act between fork and exec (Linux): die with SIGKILL when the spawner thread ends.

    When the parent died before prctl ran, the signal would never come: the child then exits at once. Only
    async-signal-safe work here (a call through the prctl pointer resolved in the parent, getppid, _exit)."""
    prctl, sigkill = _PRCTL, int(signal.SIGKILL)

    def set_it() -> None:  # pragma: no cover - runs in the child
        if prctl is not None:  # Linux: looked up in the parent
            prctl(_PR_SET_PDEATHSIG, sigkill)
        if os.getppid() != parent_pid:
            os._exit(1)

    return set_it


class _Spawner:
    """One daemon thread that performs every Popen (see the module docstring)."""

    def __init__(self) -> None:
        self._q: queue.Queue[tuple[Callable[[], subprocess.Popen[str]], Future[subprocess.Popen[str]]]] = \
            queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _loop(self) -> None:
        while True:
            fn, fut = self._q.get()
            try:
                fut.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed back to the caller
                fut.set_exception(exc)

    def run(self, fn: Callable[[], subprocess.Popen[str]]) -> subprocess.Popen[str]:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="llm-tuner-spawner", daemon=True)
                self._thread.start()
        fut: Future[subprocess.Popen[str]] = Future()
        self._q.put((fn, fut))
        try:
            return fut.result()
        except BaseException as exc:
            # interrupted (Ctrl-C) while the child was started
            if not (fut.done() and fut.exception() is exc):
                _end_started(fut)
            raise


def _end_started(fut: Future[subprocess.Popen[str]]) -> None:
    """The wait for a spawn was interrupted: the spawner still starts the child, which no caller will ever
    hold (a Ctrl-C at that moment left a model load running): wait for it and kill its group."""
    try:
        popen = fut.result(timeout=30)
    except BaseException:  # noqa: BLE001 - it did not start after all (or a second Ctrl-C): nothing to end
        return
    child = Child(popen)
    child.stop(0.0, 0.0, 5.0)
    _drain(child)  # its pipes closed


_spawner = _Spawner()


@dataclass(frozen=True)
class StopResult:
    returncode: int | None
    how: str  # "SIGINT", "SIGTERM", "SIGKILL", "already exited"


class Child:
    """One started child process in its own process group (`popen`: its subprocess.Popen)."""

    def __init__(self, popen: subprocess.Popen[str]) -> None:
        self.popen = popen

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        return self.popen.poll()

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code, or None when it still runs after `timeout` seconds."""
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def lines(self) -> Iterator[str]:
        """The child's stdout, line by line, until it closes; then the pipe is closed (one reader thread)."""
        out = self.popen.stdout
        assert out is not None
        with out:
            yield from out

    def signal(self, sig: int) -> None:
        """Send `sig` to the child's process group (Windows: Ctrl-Break for SIGINT, else kill)."""
        try:
            if os.name != "nt":
                os.killpg(self.popen.pid, sig)
            elif sig == signal.SIGINT:  # pragma: no cover - Windows
                self.popen.send_signal(signal.CTRL_BREAK_EVENT)  # type: ignore[attr-defined,unused-ignore]
            else:  # pragma: no cover
                self.popen.kill()
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self, sigint_s: float = 10.0, sigterm_s: float = 5.0, sigkill_s: float = 5.0) -> StopResult:
        """SIGINT, then SIGTERM, then SIGKILL to the process group, each with its timeout. Interrupted while
        it waits (Ctrl-C), it kills the group at once and re-raises: the child never outlives an interrupted
        stop."""
        if self.popen.poll() is not None:
            return StopResult(self.popen.returncode, "already exited")
        kill = getattr(signal, "SIGKILL", signal.SIGTERM)
        try:
            for sig, timeout, name in ((signal.SIGINT, sigint_s, "SIGINT"), (signal.SIGTERM, sigterm_s, "SIGTERM"),
                                       (kill, sigkill_s, "SIGKILL")):
                self.signal(sig)
                code = self.wait(timeout)
                if code is not None:
                    return StopResult(code, name)
        except BaseException:
            self.signal(kill)
            self.wait(sigkill_s)
            raise
        return StopResult(self.popen.poll(), "SIGKILL")  # pragma: no cover - unkillable


def spawn(argv: list[str], *, env: dict[str, str] | None = None, merge_stderr: bool = True,
          ignore_sigpipe: bool = False, line_buffered: bool = False) -> Child:
    """Start `argv` (text pipes: stdout, and stderr unless `merge_stderr` sends it to stdout) from the spawner
    thread, in its own process group, with the parent-death signal. `env` None: `child_env()`.

    `ignore_sigpipe` keeps Python's SIG_IGN for SIGPIPE in the child (ggml-rpc-server writes to clients that
    are gone). Raises OSError when it cannot start."""
    kwargs: dict[str, Any] = {}
    if os.name != "nt":
        kwargs.update(start_new_session=True, restore_signals=not ignore_sigpipe)
        if _LINUX:
            kwargs["preexec_fn"] = _pdeathsig(os.getpid())
    else:  # pragma: no cover - Windows
        kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined,unused-ignore]
    if line_buffered:
        kwargs["bufsize"] = 1
    env = child_env()[0] if env is None else env

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE, env=env, text=True,
                                errors="replace", **kwargs)

    return Child(_spawner.run(start))


def signal_name(code: int | None) -> str | None:
    """SIGKILL for an exit code of -9 (a process killed by a signal); None for an ordinary exit."""
    if code is not None and code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return None


@dataclass(frozen=True)
class Completed:
    """What a short run gave: `ended` is "exited", "timeout" or "cancelled" (then the child was stopped)."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    ended: str = "exited"


# A short run that is stopped (timeout, cancel, Ctrl-C) has nothing to save: these are its stop's timeouts.
SHORT_STOP_S = (1.0, 1.0, 5.0)


def run(argv: list[str], *, timeout: float, env: dict[str, str] | None = None,
        cancel_check: Callable[[], bool] | None = None, poll_s: float = 0.2) -> Completed:
    """Run `argv` to its end and capture stdout and stderr; stop it (see SHORT_STOP_S) on the timeout, when
    `cancel_check()` turns true, or when anything interrupts the wait (KeyboardInterrupt included,
    re-raised)."""
    deadline = time.monotonic() + timeout
    ended = "exited"
    child = spawn(argv, env=env, merge_stderr=False)
    try:
        while True:
            try:
                out, err = child.popen.communicate(timeout=max(0.0, min(poll_s, deadline - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                if cancel_check is not None and cancel_check():
                    ended = "cancelled"
                elif time.monotonic() >= deadline:
                    ended = "timeout"
                else:
                    continue
            child.stop(*SHORT_STOP_S)
            out, err = _drain(child)
            break
    except BaseException:
        child.stop(*SHORT_STOP_S)
        _drain(child)
        raise
    return Completed(tuple(argv), child.popen.returncode, out or "", err or "", ended)


def _drain(child: Child) -> tuple[str, str]:
    """The output of a stopped child; pipes closed even when something outside its group still holds them."""
    try:
        return child.popen.communicate(timeout=5.0)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        for pipe in (child.popen.stdout, child.popen.stderr):
            if pipe is not None:
                pipe.close()
        return "", ""
