"""Heat and clocks in benchmark comparisons: a GPU that ran hotter or at lower clocks on one side of an A/B.

An identical configuration measured 24.8-38.7 t/s over one night on a consumer GPU, speed falling as
temperature rose; waiting for the GPU to cool before each repetition brought the spread to 0.15-0.47 t/s
(kylebakerio/LLM-Tuner BENCH-FINDINGS §13). Each repetition records, per GPU, its temperature at the start and
at its peak, its median SM and memory clocks and NVML's clocks-event reasons (services.bench.meters); this
module reads them back: a side's figures (`side_heat`) and a warning when two sides differ by more than the
noise of a thermal state (`heat_warning`), for Compare, `runs compare`, `bench --vs-binary` and the tune's
final.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from llm_tuner.core.bench_spec import BenchRun
from llm_tuner.core.stats import median

HEAT_DELTA_C = (
    5.0  # sides whose GPUs' median temperature differ by more than this ran in different thermal states
)
CLOCK_DELTA_PCT = 5.0  # ... or whose median SM or memory clocks differ by more than this share
COOL_WITHIN_C = 5.0  # a heat-gated A/B waits until every GPU is within this of where the A/B began
COOL_LIMIT_S = 300.0  # ... but no longer than this (the run's notes say it gave up)


@dataclass(frozen=True)
class SideHeat:
    """The GPUs' median figures over a side's repetitions (None: not measured, e.g. no NVIDIA GPU)."""

    temp_c: float | None
    sm_clock_mhz: float | None
    mem_clock_mhz: float | None
    throttled_reps: int
    reps: int


def side_heat(runs: Iterable[BenchRun]) -> SideHeat:
    """Median over the repetitions of `runs` (one side, its rounds) of the hottest GPU's peak temperature and
    the slowest GPU's median clocks; the host's row ("Host": the server's RSS) is not a GPU."""
    temps, sms, mems = [], [], []
    throttled = n = 0
    for run in runs:
        for rep in run.reps:
            gpus = [p for p in rep.peaks if p.device != "Host"]
            n += 1
            if any(p.throttled for p in gpus):
                throttled += 1
            t = [p.temp_c for p in gpus if p.temp_c is not None]
            s = [p.sm_clock_mhz for p in gpus if p.sm_clock_mhz is not None]
            m = [p.mem_clock_mhz for p in gpus if p.mem_clock_mhz is not None]
            if t:
                temps.append(max(t))
            if s:
                sms.append(min(s))
            if m:
                mems.append(min(m))
    return SideHeat(median(temps), median(sms), median(mems), throttled, n)


def _pct(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or not a else 100.0 * (b - a) / a


def heat_warning(
    a: Iterable[BenchRun],
    b: Iterable[BenchRun],
    *,
    names: tuple[str, str] = ("A", "B"),
    delta_c: float = HEAT_DELTA_C,
    clock_pct: float = CLOCK_DELTA_PCT,
) -> str | None:
    """A warning when the two sides' GPUs ran at different temperatures or clocks (by more than `delta_c` °C
    or `clock_pct` %), or one side throttled and the other did not; None when they match or nothing was
    measured."""
    ha, hb = side_heat(a), side_heat(b)
    said = []
    if ha.temp_c is not None and hb.temp_c is not None and abs(hb.temp_c - ha.temp_c) > delta_c:
        said.append(f"GPU temperature {ha.temp_c:.0f} °C ({names[0]}) vs {hb.temp_c:.0f} °C ({names[1]})")
    for what, x, y in (
        ("SM clock", ha.sm_clock_mhz, hb.sm_clock_mhz),
        ("memory clock", ha.mem_clock_mhz, hb.mem_clock_mhz),
    ):
        d = _pct(x, y)
        if d is not None and abs(d) > clock_pct:
            said.append(f"{what} {x:.0f} MHz ({names[0]}) vs {y:.0f} MHz ({names[1]})")
    if (ha.throttled_reps > 0) != (hb.throttled_reps > 0):
        side, h = (names[0], ha) if ha.throttled_reps else (names[1], hb)
        said.append(f"the GPU throttled in {h.throttled_reps}/{h.reps} repetitions of {side} only")
    if not said:
        return None
    return (
        "the sides ran in different thermal states (" + "; ".join(said) + "): part of the difference may be "
        "heat, not the settings. Re-run heat-gated (the GPU cooled to where the A/B began before each run)."
    )
