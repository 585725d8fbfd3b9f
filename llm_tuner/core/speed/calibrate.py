"""A calibration fitted from measurements: a probe's (a few llama-bench runs) or stored runs of this machine.

Each measurement is one linear equation in the costs of core.speed.predict.terms (1 / gen t/s and 1 / prefill
t/s are sums of units × costs); the host's costs are unknowns per thread count. They are fitted by
non-negative least squares on relative error (each equation divided by its measured time, so a slow
configuration weighs as much as a fast one). A cost the measurements cannot separate (no measurement varies
it) stays out of the calibration and takes its default, marked as such, in a prediction. Measurements that
cannot determine every cost (one benchmark run), and stored server runs whenever a probe's calibration is
there, refine it instead (`refine`: the smallest relative change that explains them). Pure: no numpy (core's
contract); the systems are small.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from llm_tuner.core.speed.predict import (
    GB,
    SpeedCalibration,
    default_cost,
    is_host_key,
    predict,
    resolve_cost,
    split_key,
    terms,
)
from llm_tuner.core.speed.traffic import Traffic


@dataclass(frozen=True)
class Measurement:
    """One measured configuration: its traffic (from its plan), host threads, depth, prompt and the speeds."""

    traffic: Traffic
    threads: int
    depth: int
    prompt_tokens: int
    gen_tps: float | None
    prefill_tps: float | None
    label: str = ""


def rows(m: Measurement) -> tuple[dict[str, float], dict[str, float]]:
    """The measurement's generation and prefill equations with the host's keys at its thread count."""
    gen, pre = terms(m.traffic, depth=m.depth, prompt_tokens=m.prompt_tokens)

    def at(d: dict[str, float]) -> dict[str, float]:
        return {(f"{k}@{m.threads}" if is_host_key(k) else k): v for k, v in d.items()}

    return at(gen), at(pre)


EXHAUSTIVE_UP_TO = 14  # unknowns for which every subset is tried (2^14 small solves; a probe has about 12)


def nnls(eqs: Sequence[dict[str, float]], ys: Sequence[float], *, max_free: int = 16) -> dict[str, float]:
    """Non-negative least squares of Σ_k eq[k] × x_k ≈ y on relative error. Active set by enumeration from the
    full set downwards (systems here have a handful of unknowns). An unknown the best fit leaves out is 0."""
    keys = sorted({k for e in eqs for k in e})
    w = [{k: v / y for k, v in e.items()} for e, y in zip(eqs, ys, strict=True)]
    best: tuple[float, dict[str, float]] | None = None
    for n_free in range(min(len(keys), max_free), 0, -1):
        found = False
        for free in itertools.combinations(keys, n_free):
            sol = _lstsq(w, free)
            if sol is None or any(v < 0 for v in sol.values()):
                continue
            err = sum((sum(e.get(k, 0.0) * sol[k] for k in free) - 1.0) ** 2 for e in w)
            if best is None or err < best[0] - 1e-12:
                best = (err, sol)
            found = True
        if found and n_free == len(keys):
            break  # the unconstrained solution is feasible: it is the optimum
        if found and len(keys) > EXHAUSTIVE_UP_TO:
            break  # many unknowns: the best feasible set of the largest size (smaller sets rarely fit better)
    if best is None:
        return {}
    return {k: best[1].get(k, 0.0) for k in keys}  # a dropped unknown costs nothing in the best fit


def _lstsq(rows_: list[dict[str, float]], free: Sequence[str]) -> dict[str, float] | None:
    """Normal equations of the rows (target 1 each) in the `free` unknowns; None when singular."""
    n = len(free)
    a = [[sum(r.get(free[i], 0.0) * r.get(free[j], 0.0) for r in rows_) for j in range(n)] for i in range(n)]
    b = [sum(r.get(free[i], 0.0) for r in rows_) for i in range(n)]
    x = _solve(a, b)
    return None if x is None else dict(zip(free, x, strict=True))


def _solve(a: list[list[float]], b: list[float]) -> list[float] | None:
    """x with a·x = b (a square, changed in place) by Gauss-Jordan with partial pivoting; None when
    singular."""
    n = len(b)
    scale = max((abs(a[i][i]) for i in range(n)), default=1.0) or 1.0
    for col in range(n):
        piv = max(range(col, n), key=lambda i: abs(a[i][col]))
        if abs(a[piv][col]) < 1e-10 * scale:
            return None
        a[col], a[piv] = a[piv], a[col]
        b[col], b[piv] = b[piv], b[col]
        for i in range(n):
            if i != col and a[i][col]:
                f = a[i][col] / a[col][col]
                for j in range(col, n):
                    a[i][j] -= f * a[col][j]
                b[i] -= f * b[col]
    return [b[i] / a[i][i] for i in range(n)]


def fit(measurements: Sequence[Measurement], *, build: str = "", driver: str = "", source: str = "",
        peaks: dict[str, float] | None = None) -> SpeedCalibration:
    """A calibration from measurements (see the module's docstring). Generation and prefill are fitted apart
    (they share no cost). Each device's peak read rate is the best a measurement reached, or `peaks`
    (NVML's)."""
    gen = [m for m in measurements if m.gen_tps]
    pre = [m for m in measurements if m.prefill_tps]
    g = nnls([rows(m)[0] for m in gen], [1.0 / (m.gen_tps or 1.0) for m in gen]) if gen else {}
    p = nnls([rows(m)[1] for m in pre], [1.0 / (m.prefill_tps or 1.0) for m in pre]) if pre else {}
    costs = {k: max(0.0, v) for k, v in {**g, **p}.items()}  # 0: measured, and it explains nothing
    best = _peaks(gen, costs, peaks)
    threads = tuple(sorted({m.threads for m in measurements}))
    return SpeedCalibration(costs, best, build, driver, source, None, threads)


def _peaks(gen: Sequence[Measurement], costs: dict[str, float],
           peaks: dict[str, float] | None) -> dict[str, float]:
    """Each device's peak read rate: the best a generation measurement reached under these costs (the time
    its read did not leave to the other costs), or `peaks` (NVML's) where higher."""
    best: dict[str, float] = {}
    for m in gen:
        eq = rows(m)[0]
        total = 1.0 / (m.gen_tps or 1.0)
        for k, gb in eq.items():
            if not k.startswith("read:") or k not in costs:
                continue
            own = total - sum(v * costs.get(kk, 0.0) for kk, v in eq.items() if kk != k)
            if own > 0:
                dev = k.split(":")[1].split("@")[0]
                best[dev] = max(best.get(dev, 0.0), gb / own)
    for dev, v in (peaks or {}).items():
        best[dev] = max(best.get(dev, 0.0), v)
    return best


RIDGE = 1e-6  # of the normal matrix's largest diagonal: keeps the directions no measurement sees at the prior
# What a cost's relative change from the calibration it starts from weighs against the runs' relative misfit:
# moving a cost by 100 % costs as much as missing one run by 10 % (a server start's noise). Without it, a few
# single-start runs that barely tell two costs apart traded them against each other: replaying the lent GPU
# sessions (benchmarks/sessions/2026-12-0{6,7}-gpu-speed), four runs of the dense model refined into the
# probe predicted the MoE model's runs 2,054-2,370 % off (median; the host's read cost pushed to FLOOR, the
# GPU's fixed cost up 7x); with it 16-50 %. Over 32 cases (2 sessions x 8 subsets of their runs x 2 models
# predicted) the median generation error is the same (within 1 point) or better in 31; the worst median falls
# from 2,370 % to 54 % (one model's grid predicting the other, 2026-12-06; 37.5 % there without). The price:
# exactly reproducing the runs is no longer the aim (a synthetic run is met within a few per cent, not 1e-4).
# benchmarks/refit_subsets.py, recorded in benchmarks/results/speed_model/refit-subsets.md.
PRIOR_WEIGHT = 0.01


def refine(prior: SpeedCalibration, measurements: Sequence[Measurement], *, source: str = "",
           peaks: dict[str, tuple[float, str]] | None = None) -> tuple[SpeedCalibration, list[str]]:
    """The prior calibration moved as little as the measurements require: stored server runs refined into a
    probe's calibration (one benchmark run, or many). Each cost the measurements involve is its prior (the
    calibration's, else the default) times (1 + d); the d are the least-squares fit on relative error with
    each d weighed by PRIOR_WEIGHT, so a run's surplus time goes to its costs in proportion to their share of
    it (mostly the read rate when reading weights takes most of a token) and runs that barely tell two costs
    apart do not trade them. A cost whose prior is a default (or a probe's 0) is fitted only when the
    measurements determine it alone, otherwise it stays; a cost set by hand stays. Returns the calibration and
    the refined keys (none: the prior unchanged)."""
    gen = [m for m in measurements if m.gen_tps]
    pre = [m for m in measurements if m.prefill_tps]
    costs = dict(prior.costs)
    refined: list[str] = []
    for ms, i in ((gen, 0), (pre, 1)):
        eqs = [rows(m)[i] for m in ms]
        ys = [1.0 / ((m.gen_tps if i == 0 else m.prefill_tps) or 1.0) for m in ms]
        if not eqs:
            continue
        base: dict[str, float] = {}
        held: dict[str, float] = {}
        r0 = rank(eqs, ys)[0]
        for k in sorted({k for e in eqs for k in e}):
            key, t = split_key(k)
            v, how = resolve_cost(key, prior, t, peaks)
            if v is None or v < 0:
                break  # a cost with neither a calibration nor a default: nothing to refine from
            if v == 0 and (d := default_cost(key, t, peaks)) and _alone(k, eqs, ys, r0):
                v = d  # measured as 0 by the probe, but these runs tell it alone: refined from its default
            if v == 0 or k in prior.by_hand or (how == "default" and not _alone(k, eqs, ys, r0)):
                # a cost the probe measured as explaining nothing (0) has no scale to move by: it stays 0
                # and the others take the runs' time (before, it stopped the whole system's refinement)
                held[k] = v
            else:
                base[k] = v
        else:
            got = _smallest_change(eqs, ys, base, held, PRIOR_WEIGHT)
            costs.update(got)
            refined += sorted(got)
    threads = tuple(sorted({*prior.threads, *(m.threads for m in measurements)}))
    by_hand = tuple(k for k in prior.by_hand if k not in refined)
    best = dict(prior.peaks_gbps)
    for dev, v in (_peaks(gen, costs, None) if refined else {}).items():
        best[dev] = max(best.get(dev, 0.0), v)
    cal = replace(prior, costs=costs, peaks_gbps=best, source=source or prior.source, threads=threads,
                  by_hand=by_hand)
    return cal, refined


def _alone(key: str, eqs: Sequence[dict[str, float]], ys: Sequence[float], r: int) -> bool:
    """Whether the equations (of rank `r`) determine `key` by themselves (its unit row lies in their span)."""
    return rank([*eqs, {key: 1.0}], [*ys, 1.0])[0] == r


FLOOR = 0.05  # a refined cost keeps at least this share of its prior: no cost of a device is free


def _smallest_change(eqs: Sequence[dict[str, float]], ys: Sequence[float], base: dict[str, float],
                     held: dict[str, float], prior_weight: float = 0.0) -> dict[str, float]:
    """The costs `base` × (1 + d), d the least-squares fit of the equations on relative error with
    `prior_weight` × |d|² added (a ridge towards the prior; smallest-norm where the equations leave d free)
    and the `held` costs fixed. A cost the fit would take below FLOOR × its prior is held there and the
    others fitted again (an active set, as non-negative least squares does), so a run much faster than the
    prior moves the costs that can still give."""
    fixed = dict(held)
    out: dict[str, float] = {}
    while True:
        free = sorted(k for k in base if k not in fixed)
        if not free:
            return out
        w = [[e.get(k, 0.0) * base[k] / y for k in free] for e, y in zip(eqs, ys, strict=True)]
        r = [1.0 - sum(e.get(k, 0.0) * v for k, v in fixed.items()) / y - sum(row)
             for e, y, row in zip(eqs, ys, w, strict=True)]
        n = len(free)
        a = [[sum(row[i] * row[j] for row in w) for j in range(n)] for i in range(n)]
        lam = max(RIDGE * max((a[i][i] for i in range(n)), default=1.0), prior_weight)
        for i in range(n):
            a[i][i] += lam
        d = _solve(a, [sum(row[i] * ri for row, ri in zip(w, r, strict=True)) for i in range(n)])
        if d is None:
            return out
        low = [k for k, di in zip(free, d, strict=True) if 1.0 + di < FLOOR]
        if not low:
            out.update({k: base[k] * (1.0 + di) for k, di in zip(free, d, strict=True)})
            return out
        for k in low:
            fixed[k] = out[k] = base[k] * FLOOR


def rank(eqs: Sequence[dict[str, float]], ys: Sequence[float]) -> tuple[int, int]:
    """(rank, unknowns) of a system on relative error: how many of its costs the equations can tell apart. A
    fit of fewer equations than unknowns (or of equations that repeat one another) is not unique: least
    squares then puts the whole time on whichever costs it likes (one benchmark run "explained" by attention
    alone)."""
    keys = sorted({k for e in eqs for k in e})
    done: list[list[float]] = []
    for k in keys:  # Gram-Schmidt over the columns
        v = [e.get(k, 0.0) / y for e, y in zip(eqs, ys, strict=True)]
        n0 = math.sqrt(sum(x * x for x in v))
        for b in done:
            d = sum(x * bb for x, bb in zip(v, b, strict=True))
            v = [x - d * bb for x, bb in zip(v, b, strict=True)]
        n = math.sqrt(sum(x * x for x in v))
        if n0 > 0 and n > 1e-6 * n0:
            done.append([x / n for x in v])
    return len(done), len(keys)


def determined(measurements: Sequence[Measurement]) -> tuple[bool, str]:
    """Whether the measurements determine every cost they involve (generation and prefill apart), and if not,
    which system lacks how many independent measurements, in words."""
    gen = [m for m in measurements if m.gen_tps]
    pre = [m for m in measurements if m.prefill_tps]
    short = []
    for what, ms, i in (("generation", gen, 0), ("prefill", pre, 1)):
        ys = [1.0 / ((m.gen_tps if i == 0 else m.prefill_tps) or 1.0) for m in ms]
        r, n = rank([rows(m)[i] for m in ms], ys) if ms else (0, 0)
        if r < n:
            short.append(f"{what} {r} of {n} costs")
    return (not short), "; ".join(short)


def relative_errors(cal: SpeedCalibration,
                    measurements: Sequence[Measurement]) -> list[tuple[str, float, float]]:
    """(label, generation error, prefill error) of the calibration's predictions against measurements
    ((predicted - measured) / measured; NaN where not measured or not predicted)."""
    out = []
    for m in measurements:
        pr = predict(m.traffic, cal, threads=m.threads, depth=m.depth, prompt_tokens=m.prompt_tokens)
        ge = (pr.gen_tps - m.gen_tps) / m.gen_tps if pr.gen_tps and m.gen_tps else math.nan
        pe = ((pr.prefill_tps - m.prefill_tps) / m.prefill_tps if pr.prefill_tps and m.prefill_tps
              else math.nan)
        out.append((m.label, ge, pe))
    return out


def with_error(cal: SpeedCalibration, measurements: Sequence[Measurement]) -> SpeedCalibration:
    """The calibration with its expected error: the median |generation error| on `measurements` (at least
    5 %)."""
    errs = sorted(abs(e) for _, e, _ in relative_errors(cal, measurements) if not math.isnan(e))
    if not errs:
        return cal
    med = errs[len(errs) // 2]
    return replace(cal, error=max(0.05, med))


__all__ = ["GB", "Measurement", "determined", "fit", "nnls", "rank", "refine", "relative_errors", "rows",
           "with_error"]
