"""AMD GPUs through pyamdgpuinfo (Linux only). The only module that imports pyamdgpuinfo."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llm_tuner.core.devices import GpuInfo

try:  # pragma: no cover - import guard
    import pyamdgpuinfo
except Exception:  # noqa: BLE001 - not installed, not Linux, or libdrm missing
    pyamdgpuinfo = None


def _why_unavailable() -> str | None:
    if not sys.platform.startswith("linux"):
        return "AMD: GPU telemetry through pyamdgpuinfo is available on Linux only"
    if pyamdgpuinfo is None:
        return "AMD: the pyamdgpuinfo package is not installed or failed to load"
    if not os.path.isdir("/dev/dri"):
        return "AMD: /dev/dri is missing (no GPU driver, or not visible in this container)"
    return None


def amd_gpus() -> tuple[list[GpuInfo], str | None]:
    """AMD GPUs, or ([], reason)."""
    reason = _why_unavailable()
    if reason:
        return [], reason
    try:
        count = pyamdgpuinfo.detect_gpus()
    except Exception as exc:  # noqa: BLE001 - the reason is shown where the GPUs are listed
        return [], f"AMD: detection failed: {exc}"
    gpus = []
    for i in range(count):
        try:
            g = pyamdgpuinfo.get_gpu(i)
            total = g.memory_info.get("vram_size")
            used = _safe(g.query_vram_usage)
            gpus.append(GpuInfo(
                name=f"amd:{i}", backend=None, vendor="amd", index=i, model=g.name,
                pci_bus_id=str(g.pci_slot).lower() if getattr(g, "pci_slot", None) else None,
                memory_total_mib=int(total / 2**20) if total else None,
                memory_free_mib=int((total - used) / 2**20) if total and used is not None else None,
            ))
        except Exception as exc:  # noqa: BLE001 - one bad card must not hide the others
            gpus.append(GpuInfo(name=f"amd:{i}", vendor="amd", index=i, model=f"(unreadable: {exc})"))
    return gpus, None if gpus else "AMD: no AMD GPU found"


def _safe(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - a query a card does not support is simply unknown
        return None


@dataclass(frozen=True)
class AmdReading:
    index: int
    util_pct: float | None
    vram_used_mib: float | None
    vram_total_mib: float | None
    gtt_used_mib: float | None
    temp_c: float | None
    power_w: float | None
    sm_clock_mhz: float | None
    mem_clock_mhz: float | None


class AmdSource:
    def __init__(self) -> None:
        self.reason = _why_unavailable()
        self._gpus = []
        if self.reason is None:
            try:
                self._gpus = [pyamdgpuinfo.get_gpu(i) for i in range(pyamdgpuinfo.detect_gpus())]
            except Exception as exc:  # noqa: BLE001 - the reason is shown instead of AMD readings
                self.reason = f"AMD: {exc}"

    @property
    def count(self) -> int:
        return len(self._gpus)

    def read(self) -> list[AmdReading]:
        out = []
        for i, g in enumerate(self._gpus):
            total = g.memory_info.get("vram_size") if hasattr(g, "memory_info") else None
            vram = _safe(g.query_vram_usage)
            gtt = _safe(g.query_gtt_usage)
            sclk = _safe(g.query_sclk)
            mclk = _safe(g.query_mclk)
            out.append(AmdReading(
                index=i, util_pct=(_safe(g.query_load) or 0.0) * 100.0,
                vram_used_mib=vram / 2**20 if vram is not None else None,
                vram_total_mib=total / 2**20 if total else None,
                gtt_used_mib=gtt / 2**20 if gtt is not None else None,
                temp_c=_safe(g.query_temperature), power_w=_safe(g.query_power),
                sm_clock_mhz=sclk / 1e6 if sclk else None, mem_clock_mhz=mclk / 1e6 if mclk else None,
            ))
        return out
