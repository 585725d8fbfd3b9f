"""The final comparison's policy: the winner against the baseline, how many repetitions per side (n), over how
many server starts, at what cost, against which noise, and which comparison gives the verdict. Pure: the
runner (services/tune/runner.py) measures and stores; these decide.

n is fixed before the first run: at least `final_reps`, more (up to MAX_N_FACTOR × that) when the spread the
screening saw, between repetitions or between server starts, could hide the screened gain
(core.stats.reps_to_detect), and no more than the time left allows at the baseline's measured cost. The runs
are interleaved A B A B over `final_rounds` starts per side; a lead far beyond the noise between starts
(core.tune.search.clearly_ahead) is called with one start per side, and a decisive one (`decisive`: beyond the
largest difference between server starts recorded) on the screening's own runs, with no fresh start.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from llm_tuner.core.bench_report import compare_runs
from llm_tuner.core.bench_spec import BenchRun
from llm_tuner.core.stats import Comparison, compare, pooled_cv, reps_to_detect
from llm_tuner.core.tune.model import Trial, TuneSpec
from llm_tuner.core.tune.objectives import Objective, objective_metric, rep_scores
from llm_tuner.core.tune.search import clearly_ahead

MAX_N_FACTOR = 4  # n per side stays under this multiple of final_reps, whatever the spread
# A screened lead this large, with every sample above every one of the baseline's, needs no fresh comparison: the
# largest difference between two starts of one command recorded is 33 % (LARGEST_START_GAP; the H200 MoE runs,
# benchmarks/sessions/2026-12-02-h200-placement; issue 33), the SD 5.8 % (clearly_ahead). The tunes that gain
# this much (a placement reading half the host bytes: 1.5-2x) spent two starts confirming it.
DECISIVE_LEAD = 0.50
DECISIVE_KINDS = frozenset({"gen_tps", "prefill_tps", "throughput", "chat"})
LARGEST_START_GAP = 0.33
MEASURED = ("measured", "final")  # the trial statuses whose samples count


@dataclass(frozen=True)
class BaselineCost:
    """What one baseline run cost: its seconds (the server's load included) and its repetitions."""

    seconds: float
    reps: int


@dataclass(frozen=True)
class FinalDesign:
    """The final comparison as decided before its first run: n per side, the repetitions of each start per
    side (`plan`, e.g. [2, 1] for 3 over 2 starts; empty: no fresh start, the screening's runs give the verdict
    and n is the winner's screened repetitions), why n is what it is (in words) and `note` (the same, kept in
    the result only when n or the starts differ from what the spec asked)."""

    n: int
    plan: tuple[int, ...]
    why: str
    note: str


def final_cost(spec: TuneSpec, n: int, cost: BaselineCost | None) -> float:
    """Seconds the final would take with n per side: each run at the baseline's measured cost (its load and
    warm-up as measured, repetitions scaled), both sides; 0 when the cost is not known yet."""
    if cost is None:
        return 0.0
    w = spec.warmup
    return 2 * sum(cost.seconds * (r + w) / (cost.reps + w) for r in spec.final_plan(n))


def measured_in_starts(trials: Iterable[Trial]) -> list[Trial]:
    """The trials measured in two or more server starts (the baseline's starts, top-ups): the ones whose runs
    show the noise between starts."""
    return [t for t in trials if t.status in MEASURED and len(t.run_ids) >= 2]


def start_noise(per_start_scores: Iterable[Sequence[float | None]]) -> float | None:
    """The relative SD of one server start's figure: per trial measured in 2+ starts, each start's median score,
    the spread pooled over trials (core.stats.pooled_cv); None before there is any."""
    return pooled_cv([[m for m in g if m is not None] for g in per_start_scores])


def decisive(spec: TuneSpec, lead: Sequence[float], incumbent: Sequence[float]) -> bool:
    """A screened lead of DECISIVE_LEAD or more (clearly_ahead at that margin) on an objective whose score is a
    measured speed (DECISIVE_KINDS: not a context size, a latency or energy): the verdict may be read from the
    screening's runs."""
    return spec.objective.kind in DECISIVE_KINDS and clearly_ahead(lead, incumbent, by=DECISIVE_LEAD)


def design_final(spec: TuneSpec, trials: Iterable[Trial], winner: Trial | None, baseline: Trial | None, *,
                 noise: float | None, threshold_pct: float, time_left_s: float,
                 cost: BaselineCost | None, on_screening: bool = True) -> FinalDesign:
    """n per side and the starts it is spread over, from the screening's trials (see the module docstring).

    `noise`: start_noise so far; `time_left_s`: the budget left; `cost`: the baseline run's (None: unknown, so
    the budget does not cap n). An empty plan: no fresh start, the verdict is read from the screening's runs (a
    decisive lead, where `on_screening` allows it: both sides measured in this sitting)."""
    within = pooled_cv([t.samples for t in trials if t.status in MEASURED])
    cv = max((c for c in (within, noise) if c is not None), default=None)  # repetitions or starts
    gain = None
    if winner is not None and baseline is not None and winner.score and baseline.score and baseline.score > 0:
        gain = winner.score / baseline.score - 1.0
    n = reps_to_detect(cv, gain, threshold_pct, spec.final_reps, MAX_N_FACTOR * spec.final_reps)
    while n > spec.final_reps and final_cost(spec, n, cost) > time_left_s:
        n -= 1
    if n == spec.final_reps or cv is None or gain is None:
        why = f"n = {n} per side"
    else:
        why = (f"n = {n} per side, chosen before the final: the screening's spread {100 * cv:.1f}% against a "
               f"screened gain of {100 * gain:+.1f}%")
    plan = tuple(spec.final_plan(n))
    if on_screening and winner is not None and baseline is not None and decisive(spec, winner.samples,
                                                                                baseline.samples):
        gain_pct = f" ({100 * gain:+.0f}%)" if gain is not None else ""
        why = (f"no fresh start: the screened lead{gain_pct}, every repetition above every one of the baseline's, "
               f"is beyond the {100 * LARGEST_START_GAP:.0f}% by which two server starts of one command have "
               "differed")
        return FinalDesign(len(winner.samples), (), why, why)
    if len(plan) > 1 and winner is not None and baseline is not None and clearly_ahead(winner.samples,
                                                                                        baseline.samples):
        plan = (n,)  # a lead beyond any start-to-start noise: one fresh start per side calls it
        why += ("; one start per side: the screened lead is far beyond the noise between server starts "
                "(core.tune.search.clearly_ahead)")
    changed = n > spec.final_reps or len(plan) == 1 < spec.final_rounds
    return FinalDesign(n, plan, why, why if changed else "")


def final_comparisons(a: BenchRun, b: BenchRun, objective: Objective,
                      threshold_pct: float) -> tuple[list[Comparison], Comparison]:
    """Every metric's comparison of the pooled final runs (B, the winner, against A, the baseline) and the one
    the verdict is read from: the objective's metric, or its score compared when the objective has no metric
    of its own (then listed first)."""
    comps = compare_runs(a, b, threshold_pct)
    metric = objective_metric(objective)
    main = next((c for c in comps if c.name == metric), None) if metric else None
    if main is None:
        main = compare("score", rep_scores(a, objective), rep_scores(b, objective), higher_is_better=True,
                       threshold_pct=threshold_pct, unit="score")
        comps = [main, *comps]
    return comps, main
