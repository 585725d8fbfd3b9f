"""Host CPU and memory through psutil (plus /proc/cpuinfo for the model name and flags)."""

from __future__ import annotations

import platform
import sys
import time
from pathlib import Path

import psutil

from llm_tuner.core.devices import HostInfo
from llm_tuner.core.hardware import host_entry
from llm_tuner.services.telemetry.sampler import HostSample


def _cpuinfo() -> tuple[str | None, tuple[str, ...]]:
    model, flags = None, ()
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


def machine_record() -> dict:
    """This machine as a run records it (core.hardware.host_entry): CPU model, cores, RAM and the OS."""
    h = host_info()
    try:
        os_name = platform.platform(terse=False)
    except Exception:  # noqa: BLE001 - a report without the OS line is still a report
        os_name = None
    return host_entry(h.cpu_model, h.cores_physical, h.cores_logical, h.memory_total_mib, os_name)


class HostReader:
    """Host CPU and RAM, and the watched server's RSS and CPU (psutil). Callable: one HostSample."""

    def __init__(self, pid: callable = lambda: None) -> None:
        self.pid = pid
        self._proc: psutil.Process | None = None
        psutil.cpu_percent(None)  # the first call primes the counter

    def _server(self) -> psutil.Process | None:
        pid = self.pid()
        if pid is None:
            self._proc = None
            return None
        if self._proc is None or self._proc.pid != pid:
            try:
                self._proc = psutil.Process(pid)
                self._proc.cpu_percent(None)
            except psutil.Error:
                self._proc = None
        return self._proc

    def __call__(self) -> list:
        vm = psutil.virtual_memory()
        rss = cpu = None
        proc = self._server()
        if proc is not None:
            try:
                with proc.oneshot():
                    rss = proc.memory_info().rss / 2**20
                    cpu = proc.cpu_percent(None)
            except psutil.Error:
                self._proc = None
        return [HostSample(t=time.time(), cpu_pct=psutil.cpu_percent(None), ram_used_mib=(vm.total - vm.available) / 2**20,
                           ram_total_mib=vm.total / 2**20, server_rss_mib=rss, server_cpu_pct=cpu)]
