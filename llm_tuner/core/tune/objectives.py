"""What "faster" means for a tune: the Objective and the one table of objective kinds (`OBJECTIVES`).

Each kind is one row: the words the form and the chart show (`label`), the words the report and the CLI say
(`what`), the core.bench_report metric the final verdict is read from (`metric`; None: the score itself is
compared), how a run's repetitions score (`scores`) and what it uses (`uses`: which Objective fields the form
asks for, which knobs core.tune.knobs proposes). The CLI's choices, the runner, the report and the Tune form all
read this table; nothing else interprets a kind.

Every score is "higher is better": latencies are negated, so the search never needs to know the direction.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from llm_tuner.core import flags
from llm_tuner.core.bench_spec import BenchRun, Repetition
from llm_tuner.core.stats import median, percentile

DEFAULT_CHAT_WEIGHTS = {"gen_tps": 1.0, "prefill_tps": 1.0}

# What an objective kind uses (its `uses`):
PROMPT = "prompt"  # prompt processing counts: the batch sizes and the batch threads are raced
CLIENTS = "clients"  # concurrent clients: the form asks for them, the parallel slots are raced
FLOOR = "floor"  # a generation floor (min_gen_tps): the form asks for it
WEIGHTS = "weights"  # generation : prefill weights: the form asks for them
CONTEXT = "context"  # the context size is the score: the context sizes are raced


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

    @property
    def row(self) -> ObjectiveKind:
        """This kind's row of OBJECTIVES (ValueError for a kind the table lacks)."""
        try:
            return OBJECTIVES[self.kind]
        except KeyError:
            raise ValueError(f"unknown objective {self.kind!r} (one of {', '.join(OBJECTIVE_KINDS)})") from None

    def uses(self, what: str) -> bool:
        return what in self.row.uses

    def describe(self) -> str:
        """The objective in words, with the request shape: the report's and `tunes list`'s heading."""
        what = self.row.what.format(clients=self.clients, min_gen_tps=self.min_gen_tps)
        return f"{what} (prompt {self.prompt_tokens}, gen {self.gen_tokens}" + (
            f", depth {self.depth})" if self.depth else ")")


@dataclass(frozen=True)
class ObjectiveKind:
    """One row of the table: see the module docstring."""

    kind: str
    label: str
    what: str  # may name {clients} and {min_gen_tps}
    metric: str | None  # may name {n}: the prompt tokens
    scores: Callable[[BenchRun, Objective], list[float | None]]
    uses: frozenset[str] = frozenset()
    # the score the speed model predicts ({"gen_tps", "prefill_tps", "ttft_ms"} of core.speed's Prediction):
    # None for a kind the model does not predict (several clients, energy, a context floor): nothing is pruned
    predicted: Callable[[Mapping[str, float | None], Objective], float | None] | None = None


# -- per-repetition scores, one function per kind -----------------------------------------------------

def _ok(run: BenchRun) -> list[Repetition]:
    return [r for r in run.reps if r.error is None]


def _per_round(reps: list[Repetition]) -> list[list[Repetition]]:
    rounds: dict[int, list[Repetition]] = {}
    for r in reps:
        rounds.setdefault(r.rep, []).append(r)
    return [rounds[k] for k in sorted(rounds)]


def _gen_tps(run: BenchRun, _o: Objective) -> list[float | None]:
    return [r.predicted_per_second for r in _ok(run) if (r.predicted_n or 0) > 1]


def _prefill_tps(run: BenchRun, _o: Objective) -> list[float | None]:
    return [r.prompt_per_second for r in _ok(run) if (r.prompt_n or 0) > 1]


def _ttft(run: BenchRun, _o: Objective) -> list[float | None]:
    return [-r.ttft_ms for r in _ok(run) if r.ttft_ms is not None]


def _throughput(run: BenchRun, _o: Objective) -> list[float | None]:
    """Per round of `clients` requests: the tokens generated over the round's longest latency."""
    out: list[float | None] = []
    for rnd in _per_round(_ok(run)):
        wall = max((r.latency_ms or 0.0) for r in rnd)
        out.append(1000.0 * sum(r.predicted_n or 0 for r in rnd) / wall if wall > 0 else None)
    return out


def _p99_latency(run: BenchRun, _o: Objective) -> list[float | None]:
    return [-p for rnd in _per_round(_ok(run)) if (p := percentile([r.latency_ms for r in rnd], 99)) is not None]


def _tokens_per_joule(run: BenchRun, _o: Objective) -> list[float | None]:
    return [1.0 / e for r in _ok(run) if (e := r.energy_per_token_j)]


def _chat(run: BenchRun, o: Objective) -> list[float | None]:
    w = o.weights or DEFAULT_CHAT_WEIGHTS
    total = sum(w.values()) or 1.0
    out: list[float | None] = []
    for r in _ok(run):
        vals = {"gen_tps": r.predicted_per_second, "prefill_tps": r.prompt_per_second}
        got = [(wt, vals.get(k)) for k, wt in w.items()]
        if any(not v for _wt, v in got):
            continue
        out.append(math.exp(sum(wt * math.log(v or 1.0) for wt, v in got) / total))
    return out


def _ctx_of(run: BenchRun) -> float | None:
    v = flags.value_of(list(run.server_argv), "ctx_size")
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None


def _max_context(run: BenchRun, o: Objective) -> list[float | None]:
    ctx = _ctx_of(run) or 0.0
    floor = o.min_gen_tps or 0.0
    return [ctx if (r.predicted_per_second or 0.0) >= floor else 0.0 for r in _ok(run) if r.predicted_per_second]


def _pred(key: str, sign: float = 1.0) -> Callable[[Mapping[str, float | None], Objective], float | None]:
    def f(p: Mapping[str, float | None], _o: Objective) -> float | None:
        v = p.get(key)
        return None if v is None else sign * v
    return f


def _pred_chat(p: Mapping[str, float | None], o: Objective) -> float | None:
    w = o.weights or DEFAULT_CHAT_WEIGHTS
    got = [(wt, p.get(k)) for k, wt in w.items()]
    if any(not v for _wt, v in got):
        return None
    return math.exp(sum(wt * math.log(v or 1.0) for wt, v in got) / (sum(w.values()) or 1.0))


OBJECTIVES: dict[str, ObjectiveKind] = {k.kind: k for k in (
    ObjectiveKind("gen_tps", "Generation speed (t/s)", "generation t/s", "gen_tps@{n}", _gen_tps,
                  predicted=_pred("gen_tps")),
    ObjectiveKind("prefill_tps", "Prefill speed (t/s)", "prefill t/s", "prefill_tps@{n}", _prefill_tps,
                  frozenset({PROMPT}), _pred("prefill_tps")),
    ObjectiveKind("ttft", "Time to first token (ms, lower is better)", "time to first token", "ttft_ms@{n}", _ttft,
                  frozenset({PROMPT}), _pred("ttft_ms", -1.0)),
    ObjectiveKind("throughput", "Throughput with N clients (t/s)", "throughput with {clients} clients", None,
                  _throughput, frozenset({PROMPT, CLIENTS})),
    ObjectiveKind("p99_latency", "p99 latency with N clients (ms, lower is better)",
                  "p99 latency with {clients} clients", None, _p99_latency, frozenset({PROMPT, CLIENTS})),
    ObjectiveKind("tokens_per_joule", "Tokens per joule", "tokens per joule", "energy_per_token_j",
                  _tokens_per_joule, frozenset({PROMPT})),
    ObjectiveKind("chat", "Chat: generation and prefill, weighted", "chat mix (generation × prefill)", None, _chat,
                  frozenset({PROMPT, WEIGHTS}), _pred_chat),
    ObjectiveKind("max_context", "Largest context with generation ≥ a floor",
                  "largest context with generation ≥ {min_gen_tps} t/s", "gen_tps@{n}", _max_context,
                  frozenset({PROMPT, FLOOR, CONTEXT})),
)}
OBJECTIVE_KINDS = tuple(OBJECTIVES)


def rep_scores(run: BenchRun, objective: Objective) -> list[float]:
    """One score per measured repetition (per round of `clients` requests for throughput and p99), higher is
    better; repetitions lacking the figure are left out."""
    return [float(x) for x in objective.row.scores(run, objective) if x is not None]


def score(run: BenchRun, objective: Objective) -> float | None:
    """The run's score for the objective (median over repetitions; higher is better); None without data."""
    return median(rep_scores(run, objective))


def predicted_score(predicted: Mapping[str, float | None], objective: Objective) -> float | None:
    """The objective's score (higher is better) from the speed model's figures; None where it predicts none."""
    f = objective.row.predicted
    return f(predicted, objective) if f is not None else None


def objective_metric(objective: Objective) -> str | None:
    """The core.bench_report metric id the final verdict is read from (None: the score itself is compared)."""
    m = objective.row.metric
    return m.format(n=objective.prompt_tokens) if m else None
