"""What a tune is (Knob, TuneSpec), what it produced (Trial, TuneResult, TuneRecord). Pure and frozen, like
core/bench_spec.py. The objective and how a run scores against it: core/tune/objectives.py.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from llm_tuner.core.bench_spec import BenchSpec
from llm_tuner.core.tune.objectives import Objective

TRIAL_STATUSES = ("pruned", "failed", "measured", "final")
TUNE_STATUSES = ("running", "complete", "cancelled", "interrupted", "failed")
NOT_MEASURED = "not measured"  # the verdict when no candidate ran (the budget went to the baseline)
BASELINE_KEPT = "baseline kept"  # the verdict when every candidate measured lost to the baseline while racing


class Knob(BaseModel):
    """One setting the tune varies.

    `flag` is a key of core/flags (`"ubatch_size"`), several keys joined by '+' that take one value each
    (`"cache_type_k+cache_type_v"`: a matched K/V pair), or a raw flag spelling (`"--alias"`, a fork's flag).
    A value None means the flag is absent (llama.cpp's default); "" a switch that is present.
    """

    model_config = ConfigDict(frozen=True)

    key: str
    flag: str
    values: tuple[str | None, ...]
    reason: str = ""
    # The values are listed fastest first by a model (the placement frontier's plan): where measurements cannot
    # tell candidates apart (near ties of an improvement race), the earliest listed wins.
    ranked: bool = False


class TuneSpec(BaseModel):
    """Everything a tune needs to run (and to be resumed: it is stored with the tune)."""

    model_config = ConfigDict(frozen=True)

    base_argv: tuple[str, ...]
    base_env: dict[str, str] = Field(default_factory=dict)
    binary: str | None = None  # a profile's own llama-server; None: the configured one
    label: str = "tune"
    profile_version_id: int | None = None
    objective: Objective = Objective()
    knobs: tuple[Knob, ...] = ()
    min_ctx: int | None = None
    headroom_mib: int = 128
    budget_s: float = 600.0
    max_ppl_increase_pct: float = 1.0
    final_reps: int = 5  # repetitions per side in the final comparison, at least (n, fixed before it starts)
    final_rounds: int = 2  # server starts per side it is spread over, interleaved A B A B (each start costs a load)
    screen_reps: int = 2
    warmup: int = 1  # unmeasured requests per run (the first request after a load is slow)
    # a candidate the speed model puts far behind its race's best prediction is not started (core.tune.prune)
    prune_by_speed: bool = True

    def final_plan(self, n: int | None = None) -> list[int]:
        """Repetitions of each final run per side: n (default final_reps) spread over final_rounds runs ([3, 2] for
        5 over 2)."""
        n = max(1, n or self.final_reps)
        r = max(1, min(self.final_rounds, n))
        return [n // r + (1 if i < n % r else 0) for i in range(r)]

    def bench_spec(self, reps: int) -> BenchSpec:
        """The benchmark every trial of this tune runs (same shape for all: comparable)."""
        o = self.objective
        return BenchSpec(prompt_tokens=(o.prompt_tokens,), gen_tokens=max(1, o.gen_tokens), reps=reps,
                         warmup=self.warmup, depth=o.depth, clients=max(1, o.clients))


class Trial(BaseModel):
    """One candidate setting: pruned by the plan, failed at launch, or measured (its run is in History).

    `samples` are the per-repetition scores (several runs of one argv pool into one trial); `score` their
    median. `flagged` says why the figures are suspect (a busy machine) and that it was re-measured."""

    model_config = ConfigDict(frozen=True)

    id: int | None = None
    tune_id: int | None = None
    values: dict[str, str | None] = Field(default_factory=dict)
    argv: tuple[str, ...] = ()
    status: str = "measured"
    reason: str = ""
    run_id: int | None = None
    score: float | None = None
    flagged: str | None = None
    knob: str | None = None  # the knob being varied when this trial ran (None: the baseline)
    samples: tuple[float, ...] = ()
    run_ids: tuple[int, ...] = ()
    seq: int = 0
    # the speed model's prediction before it started (core.tune.prune.SpeedGuess.to_json()); None: none made
    predicted: dict[str, Any] | None = None


class TuneResult(BaseModel):
    """The verdict: the winner against the baseline from a fresh interleaved comparison (`on_screening`: from
    the screening's own runs, a lead too large for a fresh comparison to change: core.tune.final.decisive).

    `comparisons` are core.stats.Comparison.to_json() dicts, one per metric (winner = B, baseline = A).
    `verdict` is the objective's: "better" only when the final comparison separates; else the baseline is kept
    (`winner_argv == baseline_argv`)."""

    model_config = ConfigDict(frozen=True)

    tune_id: int | None = None
    tune_number: int | None = None  # the tune's number among tunes (TuneRecord.number): what people read
    baseline_argv: tuple[str, ...] = ()
    winner_argv: tuple[str, ...] = ()
    changed_flags: tuple[dict[str, Any], ...] = ()  # {flag, a (baseline), b (winner)}
    comparisons: tuple[dict[str, Any], ...] = ()
    verdict: str = "within noise"
    quality: dict[str, Any] = Field(default_factory=dict)
    bandwidth: dict[str, Any] | None = None
    trials: tuple[Trial, ...] = ()
    note: str = ""  # e.g. "the search kept the baseline: no final comparison"
    objective_metric: str | None = None  # the metric id the verdict is read from (gen_tps@512, ...)
    final_run_ids: tuple[int, ...] = ()
    searched_winner_argv: tuple[str, ...] = ()  # what the search chose, before the final comparison
    final_n_note: str = ""  # why the final ran more than final_reps per side ("" when it did not)
    on_screening: bool = False  # the comparisons are the screening's runs (no fresh start: a decisive lead)
    hardware: tuple[str, ...] = ()  # the machine the baseline ran on, as Markdown lines (core.hardware)


class TuneRecord(BaseModel):
    """A stored tune (a bench group of kind "tune") as History and Resume see it."""

    model_config = ConfigDict(frozen=True)

    id: int
    number: int | None = None  # among tunes (tune 1, 2, …), as people name it: ids are shared with sweeps
    label: str = ""
    status: str = "running"
    created_at: datetime | None = None
    spec: TuneSpec | None = None
    result: TuneResult | None = None
    n_trials: int = 0
