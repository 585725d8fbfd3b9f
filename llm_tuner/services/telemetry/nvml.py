"""NVIDIA GPUs through NVML. The only module that imports pynvml.

Inventory (`nvidia_gpus`) and a sampler source (`NvmlSource.read`). Every call is guarded: a missing
driver or library gives an empty list and a reason, never a traceback. Some NVML queries block for
milliseconds (PCIe throughput ~21 ms, total energy ~5 ms on an H200): they are not polled here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from llm_tuner.core.devices import GpuInfo

try:  # pragma: no cover - import guard
    import pynvml
except Exception:  # noqa: BLE001 - any import failure means "no NVML"
    pynvml = None

_init_lock = threading.Lock()
_init_state: tuple[bool, str | None] | None = None


def _decode(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_available() -> tuple[bool, str | None]:
    """Initialise NVML once. Returns (ok, reason-if-not)."""
    global _init_state
    with _init_lock:
        if _init_state is not None:
            return _init_state
        if pynvml is None:
            _init_state = (False, "NVIDIA: the nvidia-ml-py package is not installed")
        else:
            try:
                pynvml.nvmlInit()
                _init_state = (True, None)
            except Exception as exc:  # noqa: BLE001 - NVMLError subclasses vary by driver
                _init_state = (False, f"NVIDIA: no NVIDIA driver found (NVML: {exc})")
        return _init_state


def _memory(handle: Any) -> tuple[float, float, float | None, float]:
    """(used_mib, total_mib, reserved_mib|None, free_mib). v2 memory info separates driver-reserved memory."""
    try:
        info = pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
        reserved = getattr(info, "reserved", None)
        return info.used / 2**20, info.total / 2**20, (reserved / 2**20 if reserved is not None else None), info.free / 2**20
    except Exception:  # noqa: BLE001 - old drivers lack v2
        info = pynvml.nvmlDeviceGetMemoryInfo(handle)
        return info.used / 2**20, info.total / 2**20, None, info.free / 2**20


def nvidia_gpus() -> tuple[list[GpuInfo], str | None]:
    """Physical NVIDIA GPUs in NVML order (PCI bus order), or ([], reason)."""
    ok, reason = nvml_available()
    if not ok:
        return [], reason
    try:
        driver = _decode(pynvml.nvmlSystemGetDriverVersion())
        count = pynvml.nvmlDeviceGetCount()
    except Exception as exc:  # noqa: BLE001 - the reason is shown where the GPUs are listed
        return [], f"NVIDIA: NVML query failed: {exc}"
    gpus: list[GpuInfo] = []
    for i in range(count):
        try:
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            _used, total, _res, free = _memory(h)
            pci = pynvml.nvmlDeviceGetPciInfo(h)
            gpus.append(GpuInfo(
                name=f"nvidia:{i}", backend="CUDA", vendor="nvidia", index=i,
                model=_decode(pynvml.nvmlDeviceGetName(h)), uuid=_decode(pynvml.nvmlDeviceGetUUID(h)),
                pci_bus_id=_decode(pci.busId).lower(), memory_total_mib=int(total), memory_free_mib=int(free),
                driver=driver,
            ))
        except Exception as exc:  # noqa: BLE001 - one bad card must not hide the others
            gpus.append(GpuInfo(name=f"nvidia:{i}", vendor="nvidia", index=i, model=f"(unreadable: {exc})"))
    return gpus, None if gpus else "NVIDIA: the driver reports no GPU"


def driver_versions() -> tuple[str | None, str | None]:
    """(NVIDIA driver version, CUDA driver version "13.0") from NVML; (None, None) without an NVIDIA driver.
    A driver update moves speed as much as a new llama.cpp build, so runs and profile versions record both."""
    if not nvml_available()[0]:
        return None, None
    driver = _try(pynvml.nvmlSystemGetDriverVersion)
    cuda = _try(pynvml.nvmlSystemGetCudaDriverVersion_v2) if hasattr(pynvml, "nvmlSystemGetCudaDriverVersion_v2") \
        else _try(pynvml.nvmlSystemGetCudaDriverVersion)
    cuda_text = f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) and cuda > 0 else None
    return (_decode(driver) if driver is not None else None), cuda_text


@dataclass(frozen=True)
class NvmlReading:
    """One NVML sample of one GPU. Unknown values are None."""

    index: int
    util_pct: float | None
    mem_util_pct: float | None
    vram_used_mib: float | None
    vram_total_mib: float | None
    vram_reserved_mib: float | None
    temp_c: float | None
    power_w: float | None
    power_limit_w: float | None
    sm_clock_mhz: float | None
    mem_clock_mhz: float | None
    throttle_reasons: int | None
    process_vram_mib: float | None  # the watched process's own memory on this GPU


_T = TypeVar("_T")


def _try(fn: Callable[..., _T], *args: Any) -> _T | None:
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - a query a card does not support is simply unknown
        return None


class NvmlSource:
    """Reads every NVIDIA GPU once per call (cheap queries only)."""

    def __init__(self) -> None:
        ok, reason = nvml_available()
        self.reason = reason
        self.throttle_mask = THROTTLE_MASK  # what bench peaks count as "throttled" (services.bench.meters)
        self._handles: list[Any] = []  # NVML device handles
        if ok:
            for i in range(pynvml.nvmlDeviceGetCount()):
                self._handles.append(pynvml.nvmlDeviceGetHandleByIndex(i))

    @property
    def count(self) -> int:
        return len(self._handles)

    def read(self, watch_pids: frozenset[int] = frozenset()) -> list[NvmlReading]:
        out: list[NvmlReading] = []
        for i, h in enumerate(self._handles):
            util = _try(pynvml.nvmlDeviceGetUtilizationRates, h)
            mem = _try(_memory, h)
            power = _try(pynvml.nvmlDeviceGetPowerUsage, h)
            limit = _try(pynvml.nvmlDeviceGetEnforcedPowerLimit, h)
            proc_mib = None
            if watch_pids:
                procs = _try(pynvml.nvmlDeviceGetComputeRunningProcesses, h) or []
                used = [p.usedGpuMemory for p in procs if p.pid in watch_pids and p.usedGpuMemory is not None]
                proc_mib = sum(used) / 2**20 if used else 0.0
            out.append(NvmlReading(
                index=i,
                util_pct=float(util.gpu) if util else None,
                mem_util_pct=float(util.memory) if util else None,
                vram_used_mib=mem[0] if mem else None,
                vram_total_mib=mem[1] if mem else None,
                vram_reserved_mib=mem[2] if mem else None,
                temp_c=_try(pynvml.nvmlDeviceGetTemperature, h, pynvml.NVML_TEMPERATURE_GPU),
                power_w=power / 1000.0 if power is not None else None,
                power_limit_w=limit / 1000.0 if limit is not None else None,
                sm_clock_mhz=_try(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_SM),
                mem_clock_mhz=_try(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_MEM),
                throttle_reasons=_try(pynvml.nvmlDeviceGetCurrentClocksEventReasons, h)
                if hasattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons")
                else _try(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons, h),
                process_vram_mib=proc_mib,
            ))
        return out


def memory_bandwidth_gbps() -> dict[int, float]:
    """Peak memory bandwidth per NVIDIA GPU (NVML index -> GB/s): the maximum memory clock × the bus width ×
    2 (double data rate). {} without NVML; a GPU whose figures NVML lacks is left out."""
    if not nvml_available()[0]:
        return {}
    out: dict[int, float] = {}
    for i in range(_try(pynvml.nvmlDeviceGetCount) or 0):
        h = _try(pynvml.nvmlDeviceGetHandleByIndex, i)
        clock = _try(pynvml.nvmlDeviceGetMaxClockInfo, h, pynvml.NVML_CLOCK_MEM) if h is not None else None
        width = _try(pynvml.nvmlDeviceGetMemoryBusWidth, h) if h is not None else None
        if clock and width:
            out[i] = clock * 1e6 * 2 * width / 8 / 1e9
    return out


# Throttle reasons that mean "slowed down by something other than idling or the app's clocks".
THROTTLE_MASK = 0
if pynvml is not None:  # pragma: no branch
    for _name in ("nvmlClocksThrottleReasonSwPowerCap", "nvmlClocksThrottleReasonHwSlowdown",
                  "nvmlClocksThrottleReasonSwThermalSlowdown", "nvmlClocksThrottleReasonHwThermalSlowdown",
                  "nvmlClocksThrottleReasonHwPowerBrakeSlowdown"):
        THROTTLE_MASK |= getattr(pynvml, _name, 0)
