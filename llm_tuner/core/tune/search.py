"""The search, pure: which argv a choice of knob values makes, and how candidates are raced.

The measuring is a callback (`Evaluate`): given a candidate's values and how many samples the search wants
of it in total, it returns every sample it has (measuring only what is missing, so an argv is never measured
twice for the same samples) or None when the candidate is out (pruned by the plan, failed at launch, rejected
on quality). The search itself has no I/O, so it is tested with a fake scorer.

- `coordinate_descent`: the baseline first; knobs in `order_knobs` order (placement and memory first: they
  decide what fits, and every later speed figure depends on them); each knob raced with the others held at the
  incumbent; once every knob was tried, the knobs decided before a later knob changed are raced once more
  when that change may interact with them (`interacts`: -ub after a K/V type change, anything after placement),
  not otherwise (-ub after -t).
- `successive_halving`: every candidate gets `reps` samples; the worse half (by median) is dropped and the
  rest topped up by `reps` more; until one is left, or until every other candidate is either clearly worse
  (its best sample under the leader's worst, 2+ samples each) or within the A/B threshold of the leader (a
  difference the search would not act on). A top-up restarts a server: it is spent only where more samples
  could change the decision. Ties, and leaders within the threshold of the incumbent, keep the incumbent.
  Where server starts differ by more than repetitions do (a GPU: `noise`, the relative SD of one start's
  figure, measured by the runner from settings started twice), a lead over the incumbent must also clear the
  noise (`confident_lead`): the incumbent stays in the race and a noisy lead is topped up, not taken; the first
  such lead, before any setting was started twice, is what measures the noise.
  A race whose leader is clearly ahead of the incumbent (an improvement race: the change is decided, only which
  one is left) settles its near ties (within NEAR_TIE_PCT of the leader) without more starts and tops up only
  its two best, once: telling near ties apart would need several starts each (starts differ by about 6 % on a
  GPU) to gain less than that, so the race costs at most its candidates plus two starts. Near ties go to the
  highest median, or, for a knob whose values a model lists fastest first (`Knob.ranked`: the placement
  frontier, by bytes read from host memory), to the earliest listed: one start cannot rank them, the plan can.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from llm_tuner.core import flags
from llm_tuner.core.cmdline import set_flag
from llm_tuner.core.memory import llama_default
from llm_tuner.core.stats import median
from llm_tuner.core.tune.frontier import strip_placement
from llm_tuner.core.tune.knob_table import G_OWN, G_PLACEMENT, G_SPEC, G_THREADS, group_of, order_of
from llm_tuner.core.tune.model import Knob
from llm_tuner.core.tune.proposers import PLACEMENT_KNOB

Values = dict[str, str | None]
Key = tuple[tuple[str, str | None], ...]  # a candidate's values as a hashable key (values_key)
Evaluate = Callable[[Values, int, str | None], Sequence[float] | None]


def _default_int(key: str) -> int:
    value = llama_default(key)
    if value is None:
        raise KeyError(f"llama.cpp's default for {key} is not recorded in core.memory")
    return int(value)


# The race order and which knobs interact come from core.tune.knob_table.KNOBS (each row's `order` and `group`):
# placement and memory first, then batching, parallelism, speculation, threads; custom knobs last. Placement
# interacts with everything (it decides where every later figure is computed) but threads and speculation for the
# frontier's placement knob, memory knobs with each other (they share what fits), a pair group (speculation,
# threads) with itself; a custom knob's effect is unknown, so it interacts with everything.
# llama.cpp's default batch sizes (common/common.h: n_batch 2048, n_ubatch 512; recorded in core.memory's args).
DEFAULT_BATCH, DEFAULT_UBATCH = _default_int("batch_size"), _default_int("ubatch_size")


def interacts(a: Knob, b: Knob) -> bool:
    """Whether a change of knob `b` may change which value of knob `a` is best (the rows' groups in KNOBS)."""
    ga, gb = group_of(a.flag), group_of(b.flag)
    if PLACEMENT_KNOB in (a.flag, b.flag) and {ga, gb} & {G_THREADS, G_SPEC}:
        return False  # what fits, and how many bytes a token reads from host memory, do not depend on these
    if ga is None or gb is None or G_PLACEMENT in (ga, gb):
        return True
    return ga == gb and ga != G_OWN


def values_key(values: Mapping[str, str | None]) -> Key:
    return tuple(sorted(values.items(), key=lambda kv: kv[0]))


def order_knobs(knobs: Sequence[Knob]) -> list[Knob]:
    """Knobs in their KNOBS rows' race order (placement/memory first), custom knobs last (stable otherwise)."""
    def rank(k: Knob) -> float:
        o = order_of(k.flag)
        return math.inf if o is None else o
    return sorted(knobs, key=rank)


def _keys(flag: str) -> list[str]:
    return flag.split("+")


def _is_key(name: str) -> bool:
    try:
        flags.flag(name)
        return True
    except KeyError:
        return False


def current_value(argv: Sequence[str], knob: Knob) -> str | None:
    """The knob's value in argv (None: absent; "" a switch present; a placement knob: None, the base's own)."""
    if knob.flag == "placement":
        return None
    parts = []
    for name in _keys(knob.flag):
        if _is_key(name):
            v = flags.value_of(argv, name)
            if v is None and flags.has(argv, name) and not flags.flag(name).takes_value:
                v = ""
        else:
            v = None
            for i, tok in enumerate(argv):
                if tok == name:
                    nxt = argv[i + 1] if i + 1 < len(argv) else None
                    v = nxt if nxt is not None and flags.looks_like_value(nxt) else ""
                elif tok.startswith(name + "="):
                    v = tok.split("=", 1)[1]
        parts.append(v)
    if len(parts) == 1 or len(set(parts)) == 1:
        return parts[0]
    return "/".join("" if p is None else p for p in parts)


def _set_one(argv: list[str], name: str, value: str | None) -> list[str]:
    if _is_key(name):
        argv = flags.without(argv, name)
        if value is None:
            return argv
        return argv + flags.argv_for(name, None if value == "" else value)
    rest = set_flag(argv, name, None)[:-1]  # every occurrence removed (set_flag appends the switch last)
    rest = [t for t in rest if not t.startswith(name + "=")]
    if value is None:
        return rest
    return rest + ([name] if value == "" else [name, value])


Resolve = Callable[[str], Sequence[str]]


def apply_values(base_argv: Sequence[str], knobs: Sequence[Knob], values: Mapping[str, str | None],
                 env: Mapping[str, str] | None = None, defaults: Mapping[str, str] | None = None,
                 resolve: Resolve | None = None) -> list[str]:
    """The base argv with each knob set to its value (a compound knob "a+b" takes "v" for both or "v1/v2").

    The result is normalized as llama.cpp reads it, so candidates that run the same are one argv: a
    micro-batch larger than the batch is the batch (llama-context.cpp: n_ubatch = min(n_batch, n_ubatch)), and
    a knob's flag at llama.cpp's default (core.memory.llama_default: -b 2048, -ub 512, -ctk/-ctv f16,
    --spec-draft-n-max 3, …) is left out (unless `env` sets it: then the flag overrides the variable).
    `defaults` add what this host's llama.cpp takes for an absent flag, learned from a server's log (threads:
    `llama threadpool init, n_threads = N`), to the same rule; -tb equal to the threads in effect is left out too
    (its documented default: "same as --threads").

    A placement knob (flag "placement", core.tune.frontier) has symbolic values ("q8_0:ffn"): `resolve` turns one
    into its command-line fragment at the margin in force, which replaces the base's placement and K/V flags."""
    argv = list(base_argv)
    for knob in knobs:
        if knob.key not in values:
            continue
        value = values[knob.key]
        if knob.flag == "placement":
            if value is not None:
                if resolve is None:
                    raise ValueError("a placement knob's value needs the tune's placement resolver")
                argv = [*strip_placement(argv), *resolve(value)]
            continue
        names = _keys(knob.flag)
        parts = [value] * len(names) if value is None or "/" not in value else value.split("/")
        for name, part in zip(names, parts, strict=False):
            argv = _set_one(argv, name, part if part != "" or value == "" else None)
    env, defaults = env or {}, defaults or {}
    # -b/-ub: clamped together below; -tb: its default follows -t (below), not a learned figure
    for key in {name for k in knobs for name in _keys(k.flag)} - {"batch_size", "ubatch_size", "threads_batch",
                                                                   "placement"}:
        if not _is_key(key) or flags.flag(key).env in env:
            continue
        value = flags.value_of(argv, key)
        if value is not None and value == (defaults.get(key) or llama_default(key)):
            argv = flags.without(argv, key)  # what llama.cpp runs without the flag
    return _normalize_threads_batch(_normalize_batches(argv, env), env, defaults)


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def _normalize_batches(argv: list[str], env: Mapping[str, str]) -> list[str]:
    """-ub clamped to the batch and written last, defaults left out: candidates that run the same are one argv."""
    ub = _int(flags.value_of(argv, "ubatch_size"))
    b = _int(flags.value_of(argv, "batch_size"))
    if b == DEFAULT_BATCH and flags.flag("batch_size").env not in env:
        argv = flags.without(argv, "batch_size")
    if ub is None:
        return argv
    b_eff = b or DEFAULT_BATCH
    ub = min(ub, b_eff)
    argv = flags.without(argv, "ubatch_size")
    if ub == min(DEFAULT_UBATCH, b_eff) and flags.flag("ubatch_size").env not in env:
        return argv  # what llama.cpp runs without the flag
    return argv + flags.argv_for("ubatch_size", str(ub))


def _normalize_threads_batch(argv: list[str], env: Mapping[str, str], defaults: Mapping[str, str]) -> list[str]:
    """-tb equal to the threads in effect (-t, its variable, or the learned default) is left out (as absent)."""
    t_env = flags.flag("threads").env
    t_eff = flags.value_of(argv, "threads") or env.get(t_env or "") or defaults.get("threads")
    tb = flags.value_of(argv, "threads_batch")
    if tb is not None and tb == t_eff:
        argv = flags.without(argv, "threads_batch")
    return argv


Noise = Callable[[], float | None]
Z_SEPARATE = 2.0  # about 95%: how many noise SDs a difference of two candidates' medians must exceed
MAX_ROUNDS = 3  # rounds of a race at least (more when halving needs them); then the median leader stands


def _median(samples: Sequence[float]) -> float:
    """The median of a candidate's samples (a race keeps samples only for candidates that gave some)."""
    m = median(list(samples))
    if m is None:
        raise ValueError("no samples to take the median of")
    return m


def separated(better: Sequence[float], worse: Sequence[float], noise: float | None) -> bool:
    """Whether `better`'s median exceeds `worse`'s by more than the noise allows: Z_SEPARATE × √2 × `noise` (the
    relative SD of one server start's figure: starts differ as well as repetitions) × the lower median. True when
    the noise is unknown (the race's other rules decide)."""
    if noise is None:
        return True
    b, w = _median(better), _median(worse)
    return b - w > Z_SEPARATE * math.sqrt(2.0) * noise * abs(w)


def confident_lead(lead: Sequence[float], incumbent: Sequence[float], noise: Noise | None) -> bool:
    """Whether a lead over the incumbent may be taken: beyond the noise between starts (see separated). With a
    noise model whose noise is not measured yet (no setting started twice), only a lead that is clearly ahead
    (clearly_ahead); else the leader and the incumbent are topped up (another start each), which measures it.
    Without a noise model, yes."""
    if noise is None:
        return True
    n = noise()
    if n is None:  # not measured yet: only a lead far beyond any start-to-start noise seen on a GPU is taken
        return clearly_ahead(lead, incumbent)
    return separated(lead, incumbent, n)


LARGE_LEAD = 0.25  # a median lead this large, with no sample overlapping, needs no noise measurement


def clearly_ahead(lead: Sequence[float], incumbent: Sequence[float], by: float = LARGE_LEAD) -> bool:
    """A median lead of `by` (LARGE_LEAD) or more, two or more samples a side, every sample of the lead above every
    one of the incumbent's (higher scores better; a negated latency never qualifies): starts on the H200 differ
    by 5.8 % (SD; benchmarks/sessions/2026-12-01-h200-tune/noise.txt), so 25 % is over four of those and measuring the
    noise first would only spend two server starts (a placement that halves host reads gains 1.5-2×)."""
    if len(lead) < 2 or len(incumbent) < 2:
        return False
    lead_mid, inc_mid = _median(lead), _median(incumbent)
    return inc_mid > 0 and lead_mid >= inc_mid * (1 + by) and min(lead) > max(incumbent)


NEAR_TIE_PCT = 10.0  # in an improvement race, candidates this close to the leader are ranked by their medians


def improving(alive: list[Values], samples: dict[Key, list[float]], inc: Key | None) -> bool:
    """Whether the race's leader (`alive` sorted best first) is clearly ahead of the incumbent (see clearly_ahead):
    the change is decided, the race only ranks improvements."""
    lead = values_key(alive[0])
    return inc is not None and lead != inc and inc in samples and clearly_ahead(samples[lead], samples[inc])


def _settled(alive: list[Values], samples: dict[Key, list[float]], inc: Key | None, want: int,
             zone_pct: float, noise: Noise | None = None, order: Mapping[Key, int] | None = None,
             ) -> Values | None:
    """The race's winner when more samples cannot change what the search does with it, else None.

    `alive` is sorted best first. Each other candidate is either clearly worse (with 2+ samples each, its best
    sample under the leader's worst, and beyond the noise: see separated) or within `zone_pct` of the leader's
    median (a difference the search would not act on: see gains_enough). Then the incumbent wins when it is
    within the zone (nothing beats it by enough), else the leader. Topping up such a race would restart servers
    only to rank candidates that run alike. With `order` (the candidates' listed order, fastest first by a model)
    the near ties of an improvement race go to the earliest listed."""
    lead = samples[values_key(alive[0])]
    floor = _median(lead) - abs(_median(lead)) * zone_pct / 100.0
    near = _median(lead) - abs(_median(lead)) * max(zone_pct, NEAR_TIE_PCT) / 100.0
    known = noise() if noise is not None else None
    ranked = improving(alive, samples, inc)
    for c in alive[1:]:
        s = samples[values_key(c)]
        worse = want >= 2 and max(s) < min(lead) and separated(lead, s, known)
        if not (worse or (zone_pct > 0 and _median(s) >= floor) or (ranked and _median(s) >= near)):
            return None
    if ranked and order is not None:
        ties = [c for c in alive if values_key(c) != inc and _median(samples[values_key(c)]) >= near]
        return min(ties, key=lambda c: order[values_key(c)])
    for c in alive:
        if values_key(c) == inc and _median(samples[inc]) >= floor:
            return c
    if inc in samples and values_key(alive[0]) != inc and not confident_lead(lead, samples[inc], noise):
        return None  # a lead within the noise (or before it is known): more samples of both
    return alive[0]


def successive_halving(candidates: Sequence[Values], evaluate: Evaluate, *, reps: int, knob: str | None = None,
                       incumbent: Values | None = None, out_of_time: Callable[[], bool] = lambda: False,
                       zone_pct: float = 0.0, noise: Noise | None = None, ranked: bool = False,
                       ) -> tuple[Values | None, dict[Key, list[float]]]:
    """Race candidates: `reps` samples each, drop the worse half by median, top the rest up, repeat; stop as soon
    as the race is settled (see _settled: the rest clearly worse or within `zone_pct` of the leader).

    `noise()` is the relative SD of one server start's figure as measured so far (None: not yet; see
    confident_lead). While the leader's lead over the incumbent is not confident the incumbent stays in the race
    (a noisy lead is topped up, not taken), for at most MAX_ROUNDS rounds. Returns the winner (None when every
    candidate is out) and the samples seen per candidate key. When time runs out the best so far wins. `ranked`:
    the candidates are listed fastest first by a model (see _settled)."""
    alive = list(candidates)
    samples: dict[Key, list[float]] = {}
    want = max(1, reps)
    inc = values_key(incumbent) if incumbent is not None else None
    topped_up = False
    order = {values_key(c): i for i, c in enumerate(candidates)} if ranked else None
    for _round in range(max(MAX_ROUNDS, math.ceil(math.log2(max(1, len(alive)))) + 1)):
        still = []
        for c in alive:
            got = evaluate(c, want, knob)
            if got:
                samples[values_key(c)] = list(got)
                still.append(c)
            if out_of_time():
                break
        alive = [c for c in still if values_key(c) in samples]
        if not alive:
            return None, samples
        alive.sort(key=lambda c: (_median(samples[values_key(c)]), values_key(c) == inc), reverse=True)
        if len(alive) == 1 or out_of_time():
            return alive[0], samples
        settled = _settled(alive, samples, inc, want, zone_pct, noise, order)
        if settled is not None:
            return settled, samples
        if improving(alive, samples, inc):
            if topped_up:  # the two best were topped up once: the median leader stands
                return alive[0], samples
            alive, topped_up = alive[:2], True
            want += max(1, reps)
            continue
        keep = alive[:math.ceil(len(alive) / 2)]
        held = [c for c in alive if values_key(c) == inc and c not in keep
                and not confident_lead(samples[values_key(alive[0])], samples[inc], noise)]
        alive = keep + held  # a lead within the noise of the incumbent is not taken on one round
        if len(alive) == 1:
            return alive[0], samples
        want += max(1, reps)
    return alive[0], samples


def gains_enough(winner: Sequence[float], incumbent: Sequence[float], min_gain_pct: float,
                 noise: Noise | None = None) -> bool:
    """Whether a race's winner beats the incumbent by more than `min_gain_pct` (medians; scores are higher-is-
    better) and by more than the noise (see separated). A smaller gain can never be called better by the final
    comparison (its verdict needs the same threshold), and a gain within the noise would put a setting without
    effect into the winner: adopting either would only spend server time on revisits and a final."""
    w, i = median(list(winner)), median(list(incumbent))
    if w is None or i is None:
        return w is not None
    if w <= i + abs(i) * min_gain_pct / 100.0:
        return False
    known = noise() if noise is not None else None
    return separated(winner, incumbent, known)  # not measured by the end of the race: the threshold decides


Screen = Callable[[list[Values], Values, str], list[Values]]


def coordinate_descent(base_argv: Sequence[str], knobs: Sequence[Knob], evaluate: Evaluate, *, reps: int,
                       out_of_time: Callable[[], bool] = lambda: False, min_gain_pct: float = 0.0,
                       noise: Noise | None = None, screen: Screen | None = None) -> tuple[Values | None, list[str]]:
    """The search: baseline, each knob raced in turn, knobs that a later change may affect raced once more.
    A race's winner replaces the incumbent only when it gains more than `min_gain_pct` (see gains_enough).
    `screen(candidates, incumbent, knob)`: the candidates of a race worth starting (the speed model's pruning:
    core.tune.prune; the incumbent always among them); the others are left out of the race.

    Returns the winning values (None when even the baseline could not run) and a log of what was decided."""
    ordered = order_knobs([k for k in knobs if k.values])
    best: Values = {k.key: current_value(base_argv, k) for k in ordered}
    log: list[str] = []
    if not evaluate(dict(best), max(1, reps), None):
        return None, ["the baseline could not be measured"]
    changed_at: dict[str, int] = {}
    decided_at: dict[str, int] = {}
    step = 0

    def race(knob: Knob) -> None:
        nonlocal best, step
        step += 1
        values = [best[knob.key], *[v for v in knob.values if v != best[knob.key]]]
        cands = [dict(best, **{knob.key: v}) for v in values]
        if screen is not None:
            kept = screen(cands, dict(best), knob.key)
            dropped = len(cands) - len(kept)
            if dropped:
                log.append(f"{knob.key}: {dropped} value{'s' if dropped != 1 else ''} pruned by the speed model")
            cands = kept
        winner, seen = successive_halving(cands, evaluate, reps=reps, knob=knob.key, incumbent=best,
                                          out_of_time=out_of_time, zone_pct=min_gain_pct, noise=noise,
                                          ranked=knob.ranked)
        decided_at[knob.key] = step
        inc_samples = seen.get(values_key(best))
        if (winner is not None and winner[knob.key] != best[knob.key] and inc_samples
                and not gains_enough(seen[values_key(winner)], inc_samples, min_gain_pct, noise)):
            log.append(f"{knob.key}: {winner[knob.key]} led by less than {min_gain_pct:g}% or within the noise: "
                       f"kept {best[knob.key]}")
            return
        if winner is not None and winner[knob.key] != best[knob.key]:
            log.append(f"{knob.key}: {best[knob.key]} -> {winner[knob.key]}")
            best = winner
            changed_at[knob.key] = step
        else:
            log.append(f"{knob.key}: kept {best[knob.key]}")

    for knob in ordered:
        if out_of_time():
            log.append("time budget reached: search stopped")
            return best, log
        race(knob)
    for knob in ordered:  # one revisit of knobs decided before a later change that may interact with them
        by_key = {k.key: k for k in ordered}
        later = [k for k, s in changed_at.items() if k != knob.key and s > decided_at.get(knob.key, 0)
                 and interacts(knob, by_key[k])]
        if not later:
            continue
        if out_of_time():
            log.append("time budget reached: search stopped")
            break
        race(knob)
    return best, log
