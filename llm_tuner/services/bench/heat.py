"""The cool-down gate of an A/B: before each run, wait until every GPU is back within N °C of where the A/B
began.

A hot GPU runs slower (clocks drop as it nears its thermal limit), so in an A/B the side that runs after a
long measurement is measured on a warmer card. `CoolDown` reads the GPUs' temperatures through the benchmark's
telemetry source (services.bench.meters: NVML readings, the scripted NVML double in tests), keeps the first
reading as the A/B's start, and `wait()` polls until every GPU is within `within_c` of it or `limit_s` passed;
what it did is one line for the run's notes. On a machine without GPU temperatures `for_telemetry` gives None:
nothing waits. `BenchRunner.heat_gated(cool)` makes every run started inside it wait first.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from llm_tuner.core.heat import COOL_LIMIT_S, COOL_WITHIN_C
from llm_tuner.services.bench.meters import TelemetrySource, _attr


class CoolDown:
    """Waits for the GPUs to cool back to the A/B's starting temperature (+ `within_c`), at most `limit_s`."""

    def __init__(
        self,
        source: TelemetrySource,
        *,
        within_c: float = COOL_WITHIN_C,
        limit_s: float = COOL_LIMIT_S,
        poll_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.source = source
        self.within_c = within_c
        self.limit_s = limit_s
        self.poll_s = poll_s
        self.clock = clock
        self.sleep = sleep
        self.start_c: dict[str, float] | None = None
        self.waited_s = 0.0  # in all waits so far

    @classmethod
    def for_telemetry(cls, source: TelemetrySource | None, **kw: Any) -> CoolDown | None:
        """A gate over `source` when it reads any GPU temperature now; None (no waiting) otherwise."""
        if source is None:
            return None
        gate = cls(source, **kw)
        return gate if gate.temps() else None

    def temps(self) -> dict[str, float]:
        """Each GPU's temperature now (device name -> °C); {} when the source reads none."""
        out = {}
        try:
            readings = list(self.source.read())
        except Exception:  # noqa: BLE001 - a failing sensor cannot gate: no wait rather than no benchmark
            return {}
        for r in readings:
            t = _attr(r, "temp_c", "temperature_c")
            if t is not None:
                index = _attr(r, "index")
                out[str(_attr(r, "device", "name") or f"gpu:{index}")] = float(t)
        return out

    def begin(self) -> dict[str, float]:
        """Take the A/B's starting temperatures (the first call only; later calls keep them)."""
        if self.start_c is None:
            self.start_c = self.temps()
        return self.start_c

    def _too_hot(self, now: dict[str, float]) -> dict[str, float]:
        start = self.start_c or {}
        return {d: t for d, t in now.items() if d in start and t > start[d] + self.within_c}

    def wait(
        self, cancelled: Callable[[], bool] | None = None, progress: Callable[[str], None] | None = None
    ) -> str | None:
        """Wait until every GPU is within `within_c` of its starting temperature (the first call takes the
        start and returns None). Returns the note for the run's record: how long it waited, or that it gave
        up."""
        if self.start_c is None:
            self.begin()
            return None
        t0 = self.clock()
        hot = self._too_hot(self.temps())
        polls = 0
        while hot and self.clock() - t0 < self.limit_s:
            if cancelled is not None and cancelled():
                break
            if progress is not None:
                progress(
                    "cooling down: "
                    + ", ".join(
                        f"{d} {t:.0f} °C (started at {self.start_c[d]:.0f} °C)" for d, t in hot.items()
                    )
                )
            self.sleep(self.poll_s)
            polls += 1
            hot = self._too_hot(self.temps())
        waited = self.clock() - t0
        self.waited_s += waited
        start = ", ".join(f"{d} {t:.0f} °C" for d, t in (self.start_c or {}).items())
        if hot:
            return (
                f"cool-down: gave up after {waited:.0f} s (limit {self.limit_s:.0f} s); still "
                + ", ".join(f"{d} {t:.0f} °C" for d, t in hot.items())
                + f", the A/B began at {start}: this run started hotter"
            )
        if not polls:
            return f"cool-down: no wait needed (GPUs within {self.within_c:g} °C of the A/B's start: {start})"
        return (
            f"cool-down: waited {waited:.0f} s for the GPUs to be within {self.within_c:g} °C "
            f"of the A/B's start ({start})"
        )
