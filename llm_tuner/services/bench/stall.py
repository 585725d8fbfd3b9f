"""A benchmark's watch on its own llama-server: no progress within a bound ends the run, with the reason.

A stopped (SIGSTOP) or hung server keeps its connections open and counts as alive, so a request would wait
for the HTTP read timeout (minutes). While the runner waits on the server (its load, a request in flight),
progress is any streamed byte, any log line, or any CPU time the server spends; none of them for `stall_s`
seconds means the server is stuck: the watch kills it (SIGKILL reaches a stopped process too), which ends the
waiting request at once, and keeps the reason for the run's record.

Two signs need no long bound: a process the kernel shows stopped (SIGSTOP, a debugger), and a server that answered
/health before and stops answering it while a request waits, with no CPU time, byte or log line either (llama-server
answers /health on its HTTP threads however busy it computes, so that silence is a frozen process). Either for
QUICK_STALL_S ends the run.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

import psutil

from llm_tuner.services.client import LlamaClient

# The default bound: far above llama.cpp's longest silence with CPU time standing still that we know of.
DEFAULT_STALL_S = 120.0
# A stopped process, or a /health that stopped answering while a request waits, for this long: stuck.
QUICK_STALL_S = 5.0
HEALTH_EVERY_S = 1.0


class StallWatch:
    """Watches one server process (`pid`) on its own thread; `kill()` ends it when it is stuck.

    `progress()` notes a sign of life (a streamed chunk, a log line); `waiting()` is the context in which the
    runner waits on the server (outside it an idle server is no hang)."""

    def __init__(self, pid: int, kill: Callable[[], None], stall_s: float = DEFAULT_STALL_S, *,
                 poll_s: float = 0.25, clock: Callable[[], float] = time.monotonic,
                 url: str | None = None, health: Callable[[], bool] | None = None,
                 quick_s: float = QUICK_STALL_S) -> None:
        self.pid = pid
        self.stall_s = stall_s
        self.quick_s = min(quick_s, stall_s)
        # one short /health call: True when the server answered it (any status); on its own connection (`url`),
        # beside the request that waits
        self._client = LlamaClient(url) if url is not None and health is None else None
        self._health = health or (self._answers_health if self._client is not None else None)
        self._health_at = 0.0
        self._answered = False  # /health answered once: from then on its silence means a frozen server
        self._silent_since: float | None = None
        self._stopped_since: float | None = None
        self.poll_s = min(poll_s, stall_s / 4)
        self.clock = clock
        self.reason: str | None = None  # set once the server was found stuck (and killed)
        self._kill = kill
        self._last = clock()
        self._waiting = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        try:
            self._proc: psutil.Process | None = psutil.Process(pid)
        except psutil.Error:
            self._proc = None
        self._cpu = self._cpu_s()
        self._thread = threading.Thread(target=self._loop, name=f"llm-tuner:stall-watch-{pid}", daemon=True)

    def __enter__(self) -> StallWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5.0)
        if self._client is not None:
            self._client.close()

    def _answers_health(self) -> bool:
        return self._client is not None and self._client.health(timeout=1.0).status_code is not None

    def progress(self) -> None:
        self._last = self.clock()

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        with self._lock:
            if self._waiting == 0:
                self._last = self.clock()
            self._waiting += 1
        try:
            yield
        finally:
            with self._lock:
                self._waiting -= 1

    def _cpu_s(self) -> float | None:
        if self._proc is None:
            return None
        try:
            t = self._proc.cpu_times()
            return float(t.user + t.system)  # psutil ships no type hints
        except psutil.Error:
            return None

    def _stopped(self) -> bool:
        try:
            return self._proc is not None and self._proc.status() == psutil.STATUS_STOPPED
        except psutil.Error:
            return False

    def _quick_reason(self) -> str | None:
        """Why the server is stuck without waiting `stall_s`: stopped, or silent on /health, for `quick_s`."""
        now = self.clock()
        self._stopped_since = (self._stopped_since or now) if self._stopped() else None
        if self._stopped_since is not None and now - self._stopped_since >= self.quick_s:
            return (f"llama-server (pid {self.pid}) is stopped (SIGSTOP or a debugger) and has been for "
                    f"{self.quick_s:g} s while a request waited. It was killed and the run ended; the repetitions "
                    "finished before are kept.")
        if self._health is not None and now - self._health_at >= HEALTH_EVERY_S:
            self._health_at = now
            if self._health():
                self._answered, self._silent_since = True, None
            elif self._answered:
                self._silent_since = self._silent_since or now
        # silent on /health and no other sign of life (CPU time, a byte, a log line): a /health queued behind busy
        # HTTP threads comes with CPU time spent, a frozen server with none
        if self._silent_since is not None and now - self._silent_since >= self.quick_s \
                and now - self._last >= self.quick_s:
            return (f"llama-server (pid {self.pid}) stopped answering /health for {self.quick_s:g} s while a request "
                    "waited: it is frozen (it answers /health however busy it is). It was killed and the run "
                    "ended; the repetitions finished before are kept.")
        return None

    def check(self) -> bool:
        """One look: True when the server was found stuck now (and killed)."""
        cpu = self._cpu_s()
        if cpu is not None and (self._cpu is None or cpu > self._cpu):
            self._cpu = cpu
            self.progress()
        quick = self._quick_reason() if self._waiting > 0 else None
        if self._waiting == 0:
            self._silent_since = self._stopped_since = None
        with self._lock:
            if quick is not None and self._waiting > 0 and self.reason is None:
                self.reason = quick
                stuck = True
            else:
                stuck = self._waiting > 0 and self.reason is None and self.clock() - self._last >= self.stall_s
            if stuck and self.reason is None:
                status = ""
                try:
                    if self._proc is not None and self._proc.status() == psutil.STATUS_STOPPED:
                        status = " It is stopped (SIGSTOP or a debugger)."
                except psutil.Error:
                    pass
                self.reason = (f"llama-server (pid {self.pid}) made no progress for {self.stall_s:g} s: no tokens, "
                               f"no log line, no CPU time.{status} It was killed and the run ended; the "
                               "repetitions finished before are kept.")
        if stuck:
            self._kill()
        return stuck

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            if self.check():
                return
