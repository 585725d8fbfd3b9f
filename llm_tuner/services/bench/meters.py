"""Optional telemetry while a benchmark runs: GPU sources, peak memory/power, other processes' CPU."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

import psutil

from llm_tuner.core.bench_spec import DevicePeak
from llm_tuner.core.stats import median
from llm_tuner.services.failures import log_once
from llm_tuner.services.telemetry import amd, nvml
from llm_tuner.services.telemetry.host import ProcessTree
from llm_tuner.services.telemetry.inventory import gpu_labels

log = logging.getLogger(__name__)

# -- telemetry (optional) -----------------------------------------------------------------------

class TelemetrySource(Protocol):
    """Anything with `read()` returning per-device readings (objects or dicts) with some of:
    `device`/`name`/`index`, `vram_used_mib`/`memory_used_mib`, `power_w`, `temp_c`/`temperature_c`,
    `energy_mj` (a total energy counter; without it energy is integrated from `power_w` samples), `throttled`,
    `sm_clock_mhz`, `mem_clock_mhz`, `throttle_reasons` (NVML's bits). A missing attribute is simply not measured."""

    def read(self) -> Iterable[object]: ...


class _VendorSource(Protocol):
    """One vendor's sampler (services.telemetry: NvmlSource, AmdSource): readings with `index` and some of
    TelemetrySource's fields."""

    def read(self) -> Iterable[Any]: ...


def _attr(obj: Any, *names: str) -> Any:
    for n in names:
        v = getattr(obj, n, None) if not isinstance(obj, dict) else obj.get(n)
        if v is not None:
            return v
    return None


class _GpuSources:
    """NVIDIA (NVML) and AMD readings as one source. Devices carry llama.cpp's names ("CUDA0") where the
    inventory maps the card (`labels`, or a callable giving them, resolved at the first read on the
    sampling thread), else the vendor's ("nvidia:0", "amd:0")."""

    def __init__(self, sources: list[tuple[str, _VendorSource]],
                 labels: Mapping[str, str] | Callable[[], Mapping[str, str] | None] | None = None) -> None:
        self.sources = sources
        self._labels_source = labels if callable(labels) else None
        self._labels: dict[str, str] | None = None if callable(labels) else dict(labels or {})

    def _names(self) -> dict[str, str]:
        if self._labels is None:
            try:
                source = self._labels_source
                self._labels = dict((source() if source is not None else None) or {})
            except Exception:  # noqa: BLE001 - unnamed cards keep their vendor names
                self._labels = {}
        return self._labels

    def read(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        names = self._names()
        for vendor, src in self.sources:
            mask = getattr(src, "throttle_mask", None)  # the reasons that mean "slowed" (services.telemetry.nvml)
            for r in src.read():
                app = f"{vendor}:{r.index}"
                reasons = getattr(r, "throttle_reasons", None)
                out.append({"device": names.get(app, app), "vram_used_mib": getattr(r, "vram_used_mib", None),
                            "power_w": getattr(r, "power_w", None), "temp_c": getattr(r, "temp_c", None),
                            "sm_clock_mhz": getattr(r, "sm_clock_mhz", None),
                            "mem_clock_mhz": getattr(r, "mem_clock_mhz", None), "throttle_reasons": reasons,
                            "throttled": None if reasons is None or mask is None else bool(reasons & mask)})
        return out


def default_telemetry(binary: str | Path | None = None) -> TelemetrySource | None:
    """GPU readings through services.telemetry (NVML, AMD) when a driver is present; None otherwise.

    Devices are named as llama.cpp names them (peak_vram_mib:CUDA0) when the inventory maps them:
    the app's latest detection, else `binary`'s (or the configured llama-server's) --list-devices.
    """
    sources: list[tuple[str, _VendorSource]] = []
    try:
        if nvml.nvml_available()[0] and hasattr(nvml, "NvmlSource"):
            nv = nvml.NvmlSource()
            if getattr(nv, "count", 0):
                sources.append(("nvidia", nv))
    except Exception as exc:  # noqa: BLE001 - telemetry is optional: the benchmark runs without NVIDIA readings
        log_once("NVIDIA readings for benchmarks", exc, logger=log)
    try:
        if hasattr(amd, "AmdSource"):
            amd_src = amd.AmdSource()
            if getattr(amd_src, "count", 0):
                sources.append(("amd", amd_src))
    except Exception as exc:  # noqa: BLE001 - telemetry is optional: the benchmark runs without AMD readings
        log_once("AMD readings for benchmarks", exc, logger=log)
    if not sources:
        return None

    return _GpuSources(sources, labels=lambda: gpu_labels(binary))


class PeakTracker:
    """Samples a TelemetrySource on its own thread while a repetition runs; keeps peaks per device.

    `clock` (monotonic seconds) times the energy integration and the schedule; tests step a fake one and
    call `sample()` themselves.
    """

    def __init__(self, source: TelemetrySource | None, interval_s: float = 0.1, server_pid: int | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.source = source
        self.interval_s = interval_s
        self.clock = clock
        self._server: ProcessTree | None = None
        if server_pid:
            try:
                self._server = ProcessTree(server_pid)
            except Exception:  # noqa: BLE001 - gone already, or no psutil
                self._server = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._peaks: dict[str, dict[str, Any]] = {}

    def sample(self) -> None:
        """One reading of every device: peaks kept, energy integrated since the previous reading."""
        readings: list[Any] = []
        if self._server is not None:
            try:  # host memory of the server and a router's model instances (RSS: the mmap-ed weights they touched)
                readings.append({"device": "Host", "vram_used_mib": self._server.rss_mib()})
            except Exception:  # noqa: BLE001 - the server is gone: no host reading from now on
                self._server = None
        try:
            if self.source is not None:
                readings += list(self.source.read())
        except Exception as exc:  # noqa: BLE001 - a failing sensor must not fail the benchmark (its peaks stay unknown)
            log_once("reading GPU sensors during a benchmark", exc, logger=log)
        for r in readings:
            self._take(r)

    def _take(self, r: object) -> None:
        """Fold one device's reading into its peaks, clocks, throttle reasons and energy."""
        index = _attr(r, "index")
        dev = str(_attr(r, "device", "name") or (f"gpu:{index}" if index is not None else "?"))
        p = self._peaks.setdefault(dev, {"vram": None, "power": None, "temp": None, "e0": None, "e1": None,
                                         "t_last": None, "p_last": None, "e_int": 0.0, "throttled": None,
                                         "temp0": None, "sm": [], "mem": [], "reasons": None})
        throttled = _attr(r, "throttled")
        if throttled is not None:
            p["throttled"] = bool(p["throttled"]) or bool(throttled)
        reasons = _attr(r, "throttle_reasons")
        if reasons is not None:
            p["reasons"] = int(reasons) | (p["reasons"] or 0)
        if p["temp0"] is None:
            p["temp0"] = _attr(r, "temp_c", "temperature_c")
        for key, name in (("sm", "sm_clock_mhz"), ("mem", "mem_clock_mhz")):
            v = _attr(r, name)
            if v is not None:
                p[key].append(float(v))
        for key, names in (("vram", ("vram_used_mib", "memory_used_mib")), ("power", ("power_w",)),
                           ("temp", ("temp_c", "temperature_c"))):
            v = _attr(r, *names)
            if v is not None:
                p[key] = v if p[key] is None else max(p[key], v)
        power, now = _attr(r, "power_w"), self.clock()
        if power is not None:
            if p["p_last"] is not None:  # trapezoid: energy from power samples when no counter exists
                p["e_int"] += (power + p["p_last"]) / 2.0 * (now - p["t_last"])
            p["t_last"], p["p_last"] = now, power
        e = _attr(r, "energy_mj")
        if e is not None:
            p["e0"] = e if p["e0"] is None else p["e0"]
            p["e1"] = e

    def _loop(self) -> None:
        next_t = self.clock()
        while not self._stop.is_set():
            self.sample()
            next_t += self.interval_s
            self._stop.wait(max(0.0, next_t - self.clock()))

    def __enter__(self) -> PeakTracker:
        if self.source is not None or self._server is not None:
            self._peaks = {}
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="llm-tuner:bench-peaks", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(2.0)
            self.sample()
            self._thread = None

    def peaks(self) -> tuple[DevicePeak, ...]:
        def energy(p: dict[str, Any]) -> float | None:
            if p["e0"] is not None:
                return float(p["e1"] - p["e0"]) / 1000.0
            return float(p["e_int"]) if p["p_last"] is not None and p["e_int"] > 0 else None

        return tuple(DevicePeak(device=d, vram_used_mib=p["vram"], power_w=p["power"], temp_c=p["temp"],
                                energy_j=energy(p), throttled=p.get("throttled"), temp_start_c=p.get("temp0"),
                                sm_clock_mhz=median(p.get("sm") or []), mem_clock_mhz=median(p.get("mem") or []),
                                throttle_reasons=p.get("reasons"))
                     for d, p in sorted(self._peaks.items()))


class OtherCpuMeter:
    """CPU used by processes other than the server (with a router's model instances, its children) and this app
    while a repetition runs, as % of all cores. A busy machine (a browser, a build, another benchmark) makes runs
    differ for reasons that are not the settings; comparisons warn when this is high. `ours_cpu_s`: the CPU
    seconds the server and this app used meanwhile."""

    def __init__(self, server_pid: int | None) -> None:
        self._psutil = psutil
        self._server: ProcessTree | None = None
        self._app: psutil.Process | None = None
        try:
            self._server = ProcessTree(server_pid, refresh_s=0.0) if server_pid else None
        except psutil.Error:
            pass
        try:
            self._app = psutil.Process(os.getpid())
        except psutil.Error:
            pass
        self.pct: float | None = None
        self.ours_cpu_s: float | None = None

    def _busy(self) -> tuple[float, float, float]:
        t = self._psutil.cpu_times()
        total_busy = sum(t) - t.idle - getattr(t, "iowait", 0.0)
        ours = 0.0
        if self._server is not None:
            try:
                ours += self._server.cpu_s()
            except self._psutil.Error:
                self._server = None  # gone (the run fails on it): no reading of it from now on
        if self._app is not None:
            ours += sum(self._app.cpu_times()[:2])
        return time.monotonic(), total_busy, ours

    def __enter__(self) -> OtherCpuMeter:
        self._t0 = self._busy()
        self.pct = self.ours_cpu_s = None
        return self

    def __exit__(self, *exc: object) -> None:
        w0, b0, o0 = self._t0
        w1, b1, o1 = self._busy()
        self.ours_cpu_s = max(0.0, o1 - o0)
        wall = (w1 - w0) * (os.cpu_count() or 1)
        if wall > 0:
            self.pct = max(0.0, min(100.0, 100.0 * ((b1 - b0) - (o1 - o0)) / wall))
