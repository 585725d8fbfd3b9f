"""Pruning by the speed model, pure: a candidate predicted far behind the best prediction of its race is not
started.

Each candidate of a race gets a `SpeedGuess` (core.speed's prediction of the objective's score, what it rests
on and how far to trust it). A candidate is pruned when its predicted score is behind the race's best
predicted score by more than the model's measured error, and by at least MIN_PRUNE (30 %): the model ranks
candidates that differ in bytes or FLOPs well, but the field notes' cliffs (a slow kernel, a fallback) are not
in it, and a starting server settles what it cannot tell. Never pruned: the incumbent (the race's reference),
a candidate without a prediction, and any candidate whose prediction rests on a default cost (`calibrated`
False: no calibration of this build and driver, or a device or K/V type it did not measure) - nor is a
calibrated candidate pruned against a best that rests on one. The error is the calibration's own
(core.speed.calibrate.with_error), else the benchmark's median for the regime (BENCHMARK_ERROR:
benchmarks/results/speed_model/).

The server path costs each generated token more than the llama-bench probe sees (sampling, HTTP, the
slot's bookkeeping: benchmarks/results/server_overhead/, 0.5-1.0 ms a token on 2 cores), which narrows the
measured gaps between fast candidates: a tune learns that cost from its measured baseline (`per_token_cost`)
and adds it to every generation prediction (`with_per_token_cost`) before pruning. MIN_PRUNE is the gap past
which, with that cost added, no candidate of 92 recorded tune pairs measured under 25 % behind
(benchmarks/results/tune_vs_grid/prune_gaps.txt); at 20 % five did, and two of them were within the grid's
noise of its best.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

MIN_PRUNE = 0.30
DEFAULT_ERROR = 0.20  # a guess's expected relative error where none is given
# The speed model's measured median |generation error| (benchmarks/results/speed_model/): the CPU set
# (cpu-set.md, 32 configurations, 17.3 %) and the recorded H200 placement runs (gpu-recorded.md, 22
# placements, 8.8 %).
BENCHMARK_ERROR = {"cpu": 0.173, "gpu": 0.088}


@dataclass(frozen=True)
class SpeedGuess:
    """A candidate's predicted speed as the tune keeps it (its trial's `predicted`)."""

    score: float | None  # the objective's predicted score (higher is better; a latency negated)
    gen_tps: float | None = None
    prefill_tps: float | None = None
    ttft_ms: float | None = None
    error: float = DEFAULT_ERROR  # expected relative error
    calibrated: bool = False  # False: rests on a default cost somewhere (never pruned on it)
    on: str = ""  # what the calibration is ("probe of a.gguf + b.gguf", or "no calibration")

    def to_json(self) -> dict[str, Any]:
        def r(x: float | None, n: int = 2) -> float | None:
            return None if x is None else round(x, n)
        return {"score": r(self.score, 3), "gen_tps": r(self.gen_tps), "prefill_tps": r(self.prefill_tps, 1),
                "ttft_ms": r(self.ttft_ms, 1), "error": round(self.error, 3), "calibrated": self.calibrated,
                "on": self.on}

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> SpeedGuess | None:
        if not d:
            return None
        def f(k: str) -> float | None:
            v = d.get(k)
            return None if v is None else float(v)
        return cls(f("score"), f("gen_tps"), f("prefill_tps"), f("ttft_ms"),
                   float(d.get("error") or DEFAULT_ERROR), bool(d.get("calibrated")), str(d.get("on") or ""))

    def text(self) -> str:
        """'gen 41.2 t/s · prefill 512 t/s (±17 %)' (uncalibrated: '…, default costs')."""
        parts = []
        if self.gen_tps is not None:
            parts.append(f"gen {self.gen_tps:.1f} t/s")
        if self.prefill_tps is not None:
            parts.append(f"prefill {self.prefill_tps:.0f} t/s")
        if not parts:
            return "no prediction"
        basis = "" if self.calibrated else ", default costs"
        return " · ".join(parts) + f" (±{self.error:.0%}{basis})"


def prune_margin(error: float | None) -> float:
    """How far behind the best prediction a candidate must be to be pruned: the model's error, at least 30 %
    (MIN_PRUNE)."""
    return max(MIN_PRUNE, error or 0.0)


def per_token_cost(predicted_gen_tps: float | None, measured_gen_tps: float | None) -> float:
    """Seconds a generated token costs on the server path beyond the prediction: 1/measured − 1/predicted of
    one measured command line; 0 where it ran as fast as predicted or faster, or a figure is missing. The cost
    only ever narrows gaps, so a noisy slow baseline makes the pruning more careful, never bolder."""
    if not predicted_gen_tps or not measured_gen_tps or predicted_gen_tps <= 0 or measured_gen_tps <= 0:
        return 0.0
    return max(0.0, 1.0 / measured_gen_tps - 1.0 / predicted_gen_tps)


def with_per_token_cost(gen_tps: float | None, cost_s: float) -> float | None:
    """A generation prediction with `cost_s` seconds added to every token."""
    if gen_tps is None or gen_tps <= 0 or cost_s <= 0:
        return gen_tps
    return 1.0 / (1.0 / gen_tps + cost_s)


def behind(score: float, best: float) -> float:
    """How far `score` is behind `best` (higher is better), as a share of the best's magnitude."""
    return (best - score) / abs(best) if best else 0.0


K = TypeVar("K", bound=Hashable)  # a candidate's key (the tune's: its command line)


def speed_prune(guesses: Mapping[K, SpeedGuess | None], keep: K | None = None,
                what: str = "score") -> dict[K, str]:
    """{candidate: why it is pruned} for the candidates of one race (see the module docstring); `keep` (the
    incumbent) is never pruned; `what` names the score in the reason ("generation t/s")."""
    ok = {k: g for k, g in guesses.items() if g is not None and g.calibrated and g.score is not None}
    if len(ok) < 2:
        return {}
    best_key = max(ok, key=lambda k: ok[k].score or 0.0)
    best = ok[best_key]
    assert best.score is not None
    out: dict[K, str] = {}
    for k, g in ok.items():
        if k == keep or k == best_key or g.score is None:
            continue
        margin = prune_margin(max(g.error, best.error))
        gap = behind(g.score, best.score)
        if gap > margin:
            out[k] = (f"speed model: predicted {_fmt(g.score)} {what}, {gap:.0%} behind the best prediction "
                      f"of this race ({_fmt(best.score)}): beyond the model's error "
                      f"(±{max(g.error, best.error):.0%}; pruned beyond {margin:.0%}); not started")
    return out


def _fmt(score: float) -> str:
    return f"{-score:.0f} ms" if score < 0 else (f"{score:.0f}" if abs(score) >= 100 else f"{score:.1f}")


def trial_prediction(predicted: Mapping[str, Any] | None, score: float | None) -> tuple[str, str]:
    """(the predicted score in words, the measurement against it) of a trial: ('58.0 (±17 %)', '+3 %'); '–'
    where there is none; an uncalibrated prediction says so ('58.0 (default costs)')."""
    g = SpeedGuess.from_json(predicted)
    if g is None or g.score is None:
        return "–", "–"
    pred = _fmt(g.score) + (f" (±{g.error:.0%})" if g.calibrated else " (default costs)")
    if score is None or not g.score:
        return pred, "–"
    return pred, f"{100.0 * (score - g.score) / abs(g.score):+.0f} %"


def rank_by_prediction(items: list[Any], guesses: list[SpeedGuess | None]) -> list[Any]:
    """Items (the placement frontier's fitting placements, fastest first by host reads) ranked by the
    predicted score, highest first, where every one has a calibrated prediction; equal predictions (the
    experts of the first and of the last blocks read the same bytes) keep their order. Otherwise the order
    given."""
    if not items or any(g is None or not g.calibrated or g.score is None for g in guesses):
        return list(items)
    order = sorted(range(len(items)), key=lambda i: -(guesses[i].score or 0.0))  # type: ignore[union-attr]
    return [items[i] for i in order]
