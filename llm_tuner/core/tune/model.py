"""What a tune is (Knob, Objective, TuneSpec), what it produced (Trial, TuneResult, TuneRecord) and how a run
scores against the objective (`score`, `rep_scores`). Pure and frozen, like core/bench_spec.py.

Every score is "higher is better": latencies are negated, so the search never needs to know the direction.
"""

from __future__ import annotations

import math
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from llm_tuner.core import flags
from llm_tuner.core.bench_spec import BenchRun, BenchSpec, Repetition
from llm_tuner.core.stats import median, percentile

OBJECTIVE_KINDS = ("gen_tps", "prefill_tps", "ttft", "throughput", "p99_latency", "tokens_per_joule", "chat",
                   "max_context")
TRIAL_STATUSES = ("pruned", "failed", "measured", "final")
TUNE_STATUSES = ("running", "complete", "cancelled", "interrupted", "failed")
DEFAULT_CHAT_WEIGHTS = {"gen_tps": 1.0, "prefill_tps": 1.0}
NOT_MEASURED = "not measured"  # the verdict when no candidate ran (the budget went to the baseline)


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


class Objective(BaseModel):
    """What "faster" means for this tune, and the request shape it is measured with.

    `chat` is the weighted geometric mean of generation and prefill t/s (`weights`, default 1:1); a geometric
    mean makes a 5% gain count the same on either side although prefill is ~10× faster. `max_context` scores a
    candidate by its context size while generation stays ≥ `min_gen_tps` (else 0)."""

    model_config = ConfigDict(frozen=True)

    kind: str = "gen_tps"
    prompt_tokens: int = 512
    gen_tokens: int = 64
    depth: int = 0
    clients: int = 1
    min_gen_tps: float | None = None
    weights: dict[str, float] | None = None

    def describe(self) -> str:
        what = {"gen_tps": "generation t/s", "prefill_tps": "prefill t/s", "ttft": "time to first token",
                "throughput": f"throughput with {self.clients} clients",
                "p99_latency": f"p99 latency with {self.clients} clients", "tokens_per_joule": "tokens per joule",
                "chat": "chat mix (generation × prefill)",
                "max_context": f"largest context with generation ≥ {self.min_gen_tps} t/s"}.get(self.kind, self.kind)
        return f"{what} (prompt {self.prompt_tokens}, gen {self.gen_tokens}" + (
            f", depth {self.depth})" if self.depth else ")")


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


class TuneResult(BaseModel):
    """The verdict: the winner against the baseline from a fresh interleaved comparison.

    `comparisons` are core.stats.Comparison.to_json() dicts, one per metric (winner = B, baseline = A).
    `verdict` is the objective's: "better" only when the final comparison separates; else the baseline is kept
    (`winner_argv == baseline_argv`)."""

    model_config = ConfigDict(frozen=True)

    tune_id: int | None = None
    baseline_argv: tuple[str, ...] = ()
    winner_argv: tuple[str, ...] = ()
    changed_flags: tuple[dict, ...] = ()  # {flag, a (baseline), b (winner)}
    comparisons: tuple[dict, ...] = ()
    verdict: str = "within noise"
    quality: dict = Field(default_factory=dict)
    bandwidth: dict | None = None
    trials: tuple[Trial, ...] = ()
    note: str = ""  # e.g. "the search kept the baseline: no final comparison"
    objective_metric: str | None = None  # the metric id the verdict is read from (gen_tps@512, ...)
    final_run_ids: tuple[int, ...] = ()
    searched_winner_argv: tuple[str, ...] = ()  # what the search chose, before the final comparison
    final_n_note: str = ""  # why the final ran more than final_reps per side ("" when it did not)
    hardware: tuple[str, ...] = ()  # the machine the baseline ran on, as Markdown lines (core.hardware)


class TuneRecord(BaseModel):
    """A stored tune (a bench group of kind "tune") as History and Resume see it."""

    model_config = ConfigDict(frozen=True)

    id: int
    label: str = ""
    status: str = "running"
    created_at: datetime | None = None
    spec: TuneSpec | None = None
    result: TuneResult | None = None
    n_trials: int = 0


# -- scores -------------------------------------------------------------------------------------------

def _ok(run: BenchRun) -> list[Repetition]:
    return [r for r in run.reps if r.error is None]


def _ctx_of(run: BenchRun) -> float | None:
    v = flags.value_of(list(run.server_argv), "ctx_size")
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None


def _per_round(reps: list[Repetition]) -> list[list[Repetition]]:
    rounds: dict[int, list[Repetition]] = {}
    for r in reps:
        rounds.setdefault(r.rep, []).append(r)
    return [rounds[k] for k in sorted(rounds)]


def rep_scores(run: BenchRun, objective: Objective) -> list[float]:
    """One score per measured repetition (per round of `clients` requests for throughput and p99), higher is
    better; repetitions lacking the figure are left out."""
    reps = _ok(run)
    kind = objective.kind
    out: list[float | None] = []
    if kind == "gen_tps":
        out = [r.predicted_per_second for r in reps if (r.predicted_n or 0) > 1]
    elif kind == "prefill_tps":
        out = [r.prompt_per_second for r in reps if (r.prompt_n or 0) > 1]
    elif kind == "ttft":
        out = [-r.ttft_ms for r in reps if r.ttft_ms is not None]
    elif kind == "throughput":
        for rnd in _per_round(reps):
            wall = max((r.latency_ms or 0.0) for r in rnd)
            out.append(1000.0 * sum(r.predicted_n or 0 for r in rnd) / wall if wall > 0 else None)
    elif kind == "p99_latency":
        out = [-p for rnd in _per_round(reps) if (p := percentile([r.latency_ms for r in rnd], 99)) is not None]
    elif kind == "tokens_per_joule":
        out = [1.0 / e for r in reps if (e := r.energy_per_token_j)]
    elif kind == "chat":
        w = objective.weights or DEFAULT_CHAT_WEIGHTS
        total = sum(w.values()) or 1.0
        for r in reps:
            vals = {"gen_tps": r.predicted_per_second, "prefill_tps": r.prompt_per_second}
            if any(not vals.get(k) for k in w):
                continue
            out.append(math.exp(sum(wt * math.log(vals[k]) for k, wt in w.items()) / total))
    elif kind == "max_context":
        ctx = _ctx_of(run) or 0.0
        floor = objective.min_gen_tps or 0.0
        out = [ctx if (r.predicted_per_second or 0.0) >= floor else 0.0 for r in reps if r.predicted_per_second]
    else:
        raise ValueError(f"unknown objective {kind!r} (one of {', '.join(OBJECTIVE_KINDS)})")
    return [float(x) for x in out if x is not None]


def score(run: BenchRun, objective: Objective) -> float | None:
    """The run's score for the objective (median over repetitions; higher is better); None without data."""
    return median(rep_scores(run, objective))


def objective_metric(objective: Objective) -> str | None:
    """The core.bench_report metric id the final verdict is read from (None: a derived score, see verdict)."""
    n = objective.prompt_tokens
    return {"gen_tps": f"gen_tps@{n}", "prefill_tps": f"prefill_tps@{n}", "ttft": f"ttft_ms@{n}",
            "max_context": f"gen_tps@{n}", "tokens_per_joule": "energy_per_token_j"}.get(objective.kind)
