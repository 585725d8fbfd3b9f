"""Host CPU and memory through psutil (plus /proc/cpuinfo for the model name and flags)."""

from __future__ import annotations

import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from llm_tuner.core.devices import HostInfo
from llm_tuner.core.hardware import host_entry
from llm_tuner.services.telemetry.sampler import HostSample


def _cpuinfo() -> tuple[str | None, tuple[str, ...]]:
    model: str | None = None
    flags: tuple[str, ...] = ()
    if sys.platform.startswith("linux"):
        try:
            for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "Model", "Hardware") and model is None:
                    model = value.strip()
                elif key in ("flags", "Features") and not flags:
                    flags = tuple(sorted(set(value.split())))
                if model and flags:
                    break
        except OSError:
            pass
    return model or platform.processor() or None, flags


def host_info() -> HostInfo:
    model, flags = _cpuinfo()
    vm = psutil.virtual_memory()
    return HostInfo(
        cpu_model=model,
        cores_physical=psutil.cpu_count(logical=False),
        cores_logical=psutil.cpu_count(logical=True),
        memory_total_mib=int(vm.total / 2**20),
        memory_available_mib=int(vm.available / 2**20),
        cpu_flags=flags,
    )


def machine_record() -> dict[str, Any]:
    """This machine as a run records it (core.hardware.host_entry): CPU model, cores, RAM and the OS."""
    h = host_info()
    try:
        os_name = platform.platform(terse=False)
    except Exception:  # noqa: BLE001 - a report without the OS line is still a report
        os_name = None
    return host_entry(h.cpu_model, h.cores_physical, h.cores_logical, h.memory_total_mib, os_name)


class ProcessTree:
    """A server process with its descendants: a router (llama-server without a model of its own) serves each
    model from a child process, whose memory and CPU are the server's too. The list of descendants is looked
    up at most every `refresh_s` (psutil walks every process for it); each one's Process object is kept, so
    its CPU percent counts from the previous reading. psutil.Error when the server itself is gone."""

    def __init__(self, pid: int, refresh_s: float = 1.0) -> None:
        self.root = psutil.Process(pid)
        self.refresh_s = refresh_s
        self._procs: dict[int, psutil.Process] = {pid: self.root}
        self._listed_at = -float("inf")

    @property
    def pid(self) -> int:
        pid: int = self.root.pid
        return pid

    def processes(self) -> list[psutil.Process]:
        """The server, then its descendants (as listed at most `refresh_s` ago); raises when the server is
        gone."""
        now = time.monotonic()
        if now - self._listed_at >= self.refresh_s:
            self._listed_at = now
            children = {c.pid: c for c in self.root.children(recursive=True)}
            self._procs = {self.root.pid: self.root,
                           **{pid: self._procs.get(pid, c) for pid, c in children.items()}}
        return list(self._procs.values())

    def _each(self, read: Callable[[psutil.Process], float]) -> list[float]:
        out: list[float] = []
        for p in self.processes():
            try:
                out.append(read(p))
            except psutil.Error:
                if p is self.root:
                    raise
                self._procs.pop(p.pid, None)  # an instance that ended (a router unloads a model)
        return out

    def rss_mib(self) -> float:
        return float(sum(self._each(lambda p: p.memory_info().rss))) / 2**20

    def cpu_percent(self) -> float:
        """Per cent of one core since the previous call, every process summed (a new instance counts from its
        second reading)."""
        return float(sum(self._each(lambda p: p.cpu_percent(None))))

    def cpu_s(self) -> float:
        """CPU seconds (user + system) of the server and its live descendants, plus those of the children it
        has reaped: an instance that ended between two readings still counts."""
        times = self.root.cpu_times()
        # psutil names children_user/children_system on some systems only
        reaped = float(getattr(times, "children_user", 0.0) + getattr(times, "children_system", 0.0))
        return reaped + sum(self._each(lambda p: sum(p.cpu_times()[:2])))


class HostReader:
    """Host CPU and RAM, and the watched server's RSS and CPU with its model instances' (psutil). Callable:
    one HostSample."""

    def __init__(self, pid: Callable[[], int | None] = lambda: None) -> None:
        self.pid = pid
        self._tree: ProcessTree | None = None
        psutil.cpu_percent(None)  # the first call primes the counter

    def _server(self) -> ProcessTree | None:
        pid = self.pid()
        if pid is None:
            self._tree = None
            return None
        if self._tree is None or self._tree.pid != pid:
            try:
                self._tree = ProcessTree(pid)
                self._tree.cpu_percent()
            except psutil.Error:
                self._tree = None
        return self._tree

    def __call__(self) -> list[HostSample]:
        vm = psutil.virtual_memory()
        rss = cpu = None
        tree = self._server()
        if tree is not None:
            try:
                rss = tree.rss_mib()
                cpu = tree.cpu_percent()
            except psutil.Error:
                self._tree = None
        return [HostSample(t=time.time(), cpu_pct=psutil.cpu_percent(None),
                           ram_used_mib=(vm.total - vm.available) / 2**20, ram_total_mib=vm.total / 2**20,
                           server_rss_mib=rss, server_cpu_pct=cpu)]
