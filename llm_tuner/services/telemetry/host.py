"""Host CPU and memory through psutil (plus /proc/cpuinfo for the model name and flags)."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import psutil

from llm_tuner.core.devices import HostInfo


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
