"""Telemetry samplers: one thread per source, a stop event, a drift-corrected interval.

Each sampler calls its reader (NVML, AMD, host, server) and hands the immutable samples it returns to
`on_samples` (ring buffers, a bridge, the CLI). A reader that raises is reported once per distinct
error through `on_error` and retried on the next tick; it never kills the thread.

`Telemetry` owns the samplers of one watched server and its ring buffers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from llm_tuner.services.failures import log_once
from llm_tuner.services.telemetry.ring import SeriesRing


# --------------------------------------------------------------------------------------------- samples
@dataclass(frozen=True)
class GpuSample:
    """One GPU at one moment. `device`: llama.cpp's name ("CUDA0") when the inventory maps the card, else
    the vendor library's ("nvidia:0", "amd:1")."""

    t: float
    device: str
    vendor: str
    util_pct: float | None = None
    vram_used_mib: float | None = None
    vram_total_mib: float | None = None
    vram_reserved_mib: float | None = None
    process_vram_mib: float | None = None  # the watched server's own memory on this GPU
    gtt_used_mib: float | None = None
    temp_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    throttle_reasons: int | None = None
    throttled: bool | None = None  # slowed by power, heat or a hardware brake (not idle)

    source = "gpu"


@dataclass(frozen=True)
class HostSample:
    t: float
    cpu_pct: float | None = None
    ram_used_mib: float | None = None
    ram_total_mib: float | None = None
    server_rss_mib: float | None = None
    server_cpu_pct: float | None = None  # of one core (100 = one core busy)

    source = "host"
    device = "host"


@dataclass(frozen=True)
class ServerSample:
    """/metrics turned into rates between two scrapes, and /slots progress."""

    t: float
    prompt_tokens_per_s: float | None = None
    predicted_tokens_per_s: float | None = None
    requests_processing: float | None = None
    requests_deferred: float | None = None
    prompt_tokens_total: float | None = None
    tokens_predicted_total: float | None = None
    slots_busy: int | None = None
    slots_total: int | None = None
    # ((slot id, n_decoded, n_remain), ...) for slots processing
    slot_progress: tuple[tuple[int | None, int | None, int | None], ...] = ()

    source = "server"
    device = "server"


Sample = GpuSample | HostSample | ServerSample

GPU_FIELDS = tuple(f.name for f in fields(GpuSample) if f.name not in ("t", "device", "vendor"))
HOST_FIELDS = tuple(f.name for f in fields(HostSample) if f.name != "t")
SERVER_FIELDS = ("prompt_tokens_per_s", "predicted_tokens_per_s", "requests_processing", "requests_deferred",
                 "slots_busy")


def sample_to_json(s: Sample) -> dict[str, Any]:
    """The CLI's `{"event": "sample", "source": ..., ...}` object."""
    d: dict[str, Any] = {"event": "sample", "source": s.source}
    body = asdict(s)
    if isinstance(s, ServerSample):
        body["slot_progress"] = [list(x) for x in s.slot_progress]
    d.update(body)
    return d


# --------------------------------------------------------------------------------------------- sampler
THREAD_PREFIX = "llm-tuner:"  # every thread the services start is named so (the tests' leak check finds them)

Clock = Callable[[], float]  # monotonic seconds


class TickSchedule:
    """When the next tick of a fixed-rate loop is due, drift-corrected, on an injectable clock.

    Tick k is due at start + k*interval, so a slow read does not push every later tick back; ticks missed
    while a read overran are skipped, not bunched.
    """

    def __init__(self, interval_s: float, clock: Clock = time.monotonic) -> None:
        self.interval_s = float(interval_s)
        self.clock = clock
        self.start = clock()
        self._k = 0
        self.skipped = 0  # ticks missed because a read overran

    def wait_s(self) -> float:
        """Seconds from now until the next tick is due (call after each tick)."""
        self._k += 1
        now = self.clock()
        due = self.start + self._k * self.interval_s
        if due < now:  # late: skip the missed ticks
            k = int((now - self.start) / self.interval_s) + 1
            self.skipped += k - self._k
            self._k = k
            due = self.start + k * self.interval_s
        return due - now


class Sampler:
    """Calls `read()` every `interval_s` on its own thread until stopped (drift-corrected: `TickSchedule`).

    `clock` (monotonic seconds) times the schedule; tests step a fake one and call `tick()` themselves.
    """

    def __init__(self, name: str, read: Callable[[], Sequence[Sample]], interval_s: float,
                 on_samples: Callable[[Sequence[Sample]], None],
                 on_error: Callable[[str, str], None] | None = None, *, clock: Clock = time.monotonic) -> None:
        self.name = name
        self.read = read
        self.interval_s = float(interval_s)
        self.on_samples = on_samples
        self.on_error = on_error
        self.clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.ticks = 0
        self.cpu_s = 0.0  # thread CPU time spent reading (for the watch-cost benchmark)
        self._last_error: str | None = None

    def start(self) -> Sampler:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=f"{THREAD_PREFIX}sampler-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def tick(self) -> None:
        """One read: samples go to `on_samples`; an error goes to `on_error` once until it changes or
        clears."""
        c0 = time.thread_time()
        try:
            samples = self.read()
        except Exception as exc:  # noqa: BLE001 - a driver hiccup must not end watching
            msg = f"{exc.__class__.__name__}: {exc}"
            if msg != self._last_error and self.on_error is not None:
                self.on_error(self.name, msg)
            self._last_error = msg
        else:
            self._last_error = None
            if samples:
                try:
                    self.on_samples(samples)
                except Exception as exc:  # noqa: BLE001 - a consumer bug must not end watching
                    log_once(f"a consumer of the {self.name} samples failed", exc)
        self.cpu_s += time.thread_time() - c0
        self.ticks += 1

    def _loop(self) -> None:
        schedule = TickSchedule(self.interval_s, self.clock)
        while not self._stop.is_set():
            self.tick()
            self._stop.wait(schedule.wait_s())


# --------------------------------------------------------------------------------------------- readers
class GpuReader:
    """NVML/AMD readings -> GpuSample. `source.read(watch_pids)` is NvmlSource, AmdSource or a script.

    `labels` names the samples: {"nvidia:0": "CUDA0"} (inventory.sample_labels), or a callable giving
    that mapping, called once on the sampler's thread at the first read (it may run --list-devices).
    A card the mapping does not name keeps its vendor name.
    """

    def __init__(self, source: Any, vendor: str, pids: Callable[[], frozenset[int]] = frozenset,
                 throttle_mask: int | None = None,
                 labels: Mapping[str, str] | Callable[[], Mapping[str, str]] | None = None) -> None:
        self.source = source
        self.vendor = vendor
        self.pids = pids
        self.throttle_mask = throttle_mask
        self._labels_source = labels
        self._labels: Mapping[str, str] | None = None if callable(labels) else dict(labels or {})

    @property
    def labels(self) -> Mapping[str, str]:
        if self._labels is None:
            source = self._labels_source
            try:
                self._labels = dict((source() if callable(source) else source) or {})
            except Exception:  # noqa: BLE001 - unnamed cards keep their vendor names
                self._labels = {}
        return self._labels

    def __call__(self) -> list[GpuSample]:
        t = time.time()
        readings = self.source.read(self.pids()) if self.vendor == "nvidia" else self.source.read()
        labels = self.labels
        out = []
        for r in readings:
            reasons = getattr(r, "throttle_reasons", None)
            throttled = None
            if reasons is not None and self.throttle_mask is not None:
                throttled = bool(reasons & self.throttle_mask)
            out.append(GpuSample(
                t=t, device=labels.get(f"{self.vendor}:{r.index}", f"{self.vendor}:{r.index}"), vendor=self.vendor,
                util_pct=r.util_pct,
                vram_used_mib=r.vram_used_mib, vram_total_mib=r.vram_total_mib,
                vram_reserved_mib=getattr(r, "vram_reserved_mib", None),
                process_vram_mib=getattr(r, "process_vram_mib", None), gtt_used_mib=getattr(r, "gtt_used_mib", None),
                temp_c=r.temp_c, power_w=r.power_w, power_limit_w=getattr(r, "power_limit_w", None),
                sm_clock_mhz=r.sm_clock_mhz, mem_clock_mhz=r.mem_clock_mhz, throttle_reasons=reasons,
                throttled=throttled))
        return out


# --------------------------------------------------------------------------------------------- hub
DEFAULT_RATES_S = {"gpu": 0.5, "host": 1.0, "server": 1.0}


class Telemetry:
    """The samplers and ring buffers of one watched server.

    Rings are keyed by device name ("CUDA0" or "nvidia:0", "host", "server"); `on_samples` (optional) also
    gets every batch (bridges, the CLI). Rates are seconds between samples per source kind.
    """

    def __init__(self, readers: dict[str, Callable[[], Sequence[Sample]]], *,
                 rates_s: dict[str, float] | None = None, capacity: int = 36_000,
                 on_samples: Callable[[Sequence[Sample]], None] | None = None,
                 on_error: Callable[[str, str], None] | None = None, clock: Clock = time.monotonic) -> None:
        self.rates_s = {**DEFAULT_RATES_S, **(rates_s or {})}
        self.capacity = capacity
        self.rings: dict[str, SeriesRing] = {}
        self._rings_lock = threading.Lock()
        self._on_samples = on_samples
        self.errors: dict[str, str] = {}
        self._on_error = on_error
        self.samplers = [Sampler(name, read, self.rates_s.get(name.split(":")[0], 1.0), self._store, self._error,
                                 clock=clock) for name, read in readers.items()]

    def _error(self, name: str, msg: str) -> None:
        self.errors[name] = msg
        if self._on_error is not None:
            self._on_error(name, msg)

    def ring(self, device: str, kind: str = "gpu") -> SeriesRing:
        with self._rings_lock:
            ring = self.rings.get(device)
            if ring is None:
                flds = {"gpu": GPU_FIELDS, "host": HOST_FIELDS, "server": SERVER_FIELDS}[kind]
                ring = self.rings[device] = SeriesRing(flds, self.capacity)
            return ring

    def _store(self, samples: Sequence[Sample]) -> None:
        for s in samples:
            d = asdict(s)
            if isinstance(s, GpuSample) and s.throttled is not None:
                d["throttled"] = 1.0 if s.throttled else 0.0
            self.ring(s.device, s.source).append(s.t, d)
        if self._on_samples is not None:
            self._on_samples(samples)

    def start(self) -> Telemetry:
        for s in self.samplers:
            s.start()
        return self

    def stop(self) -> None:
        for s in self.samplers:
            s._stop.set()
        for s in self.samplers:
            s.stop()

    def summary(self) -> dict[str, Any]:
        """Per device, min/mean/max of each field: kept with the session when it ends."""
        with self._rings_lock:
            rings = dict(self.rings)
        return {dev: ring.summary() for dev, ring in rings.items()}

    def cpu_seconds(self) -> float:
        return sum(s.cpu_s for s in self.samplers)
