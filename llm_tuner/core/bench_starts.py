"""Two server starts of one command line do not run alike, and an A/B whose sides are one start each cannot
see it: its interval rests on the repetitions inside each start. On the lent H100 one command line started
five times measured 105-146 t/s while each start's own repetitions spread 3-29 % (benchmarks/sessions/
2026-12-07-gpu-server-cal/run-2); on a 2-core VM the median gap between two starts was 12.5 % (issue 33).

`start_noise` learns from the history how much one start's median speed varies on this machine: the runs of
one command line (the same llama-server arguments, build, model and benchmark) started more than once, on a
quiet machine, their spread pooled over command lines by degrees of freedom. `across_starts` holds an A/B's
speed verdicts to it: a difference that starts of one command line reach as often is not called better or
worse. Pure: the callers read the runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from llm_tuner.core.bench_report import busy_warning, compare_runs, metric_label, metric_samples, pooled
from llm_tuner.core.bench_spec import BenchRun
from llm_tuner.core.heat import heat_warning
from llm_tuner.core.stats import BETTER, NOISE, WORSE, Comparison, median

Z95 = 1.96
FINISHED = ("complete", "incomplete")
SPEEDS = ("prefill_tps@", "gen_tps@")  # the metrics held to start noise (in the history's light records)
MIN_DF = 3  # pooled degrees of freedom before a verdict is held: two starts of one command line are one
HISTORY_RUNS = 500  # the newest runs start_noise learns from (the History's light records suffice)
# The largest gap between two starts of one command line recorded (core.tune.final.LARGEST_START_GAP: the
# H200 MoE runs of benchmarks/sessions/2026-12-02-h200-placement; 31 % on the H100 of 2026-12-07).
ELSEWHERE_PCT = 33


@dataclass(frozen=True)
class StartNoise:
    """Per speed metric id: the relative SD of one server start's median, and the command lines and degrees of
    freedom (starts less one, summed) it rests on."""

    cv: dict[str, float] = field(default_factory=dict)
    settings: dict[str, int] = field(default_factory=dict)
    df: dict[str, int] = field(default_factory=dict)
    busy: int = 0  # runs of a setting started 2+ times left out: measured on a busy machine

    def floor_pct(self, metric: str, starts_a: int = 1, starts_b: int = 1) -> float | None:
        """The smallest |Δ| (%) between sides of `starts_a` and `starts_b` starts that start-to-start
        variation alone reaches less than one time in twenty; None while `metric`'s rests on fewer than
        MIN_DF degrees of freedom."""
        cv = self.cv.get(metric)
        if cv is None or self.df.get(metric, 0) < MIN_DF:
            return None
        return 100.0 * Z95 * cv * math.sqrt(1.0 / max(1, starts_a) + 1.0 / max(1, starts_b))


def setting_key(run: BenchRun) -> tuple[object, ...]:
    """What makes two runs starts of one command line: the arguments, the build, the model, the benchmark's
    prompts, lengths and whether it warmed up (the repetitions' count aside)."""
    build = run.build.key if run.build is not None else run.binary_version
    spec = run.spec.model_dump(exclude={"llama_bench", "reps", "warmup"})
    return (tuple(run.server_argv), tuple(sorted(run.server_env.items())), build,
            run.model_hash or run.model_path, repr(sorted(spec.items())), run.spec.warmup > 0)


def _is_speed(metric: str) -> bool:
    return metric.startswith(SPEEDS)


def start_noise(runs: Iterable[BenchRun]) -> StartNoise:
    """How much one start's median speed varies, per metric, over the history's command lines started 2+
    times: finished runs the app started itself on a quiet machine (no busy warning). The spread is pooled by
    degrees of freedom (a command line started five times weighs four times one started twice), the way an
    analysis of variance pools its groups: the runs being compared count among their own setting's starts."""
    groups: dict[tuple[object, ...], list[BenchRun]] = {}
    busy: dict[tuple[object, ...], int] = {}
    seen: set[int | None] = set()
    for run in runs:
        if run.id is not None and run.id in seen:  # a run listed twice (the history and a side) counts once
            continue
        seen.add(run.id)
        if run.status in FINISHED and run.attached_url is None and run.reps:
            key = setting_key(run)
            if busy_warning(run) is None:
                groups.setdefault(key, []).append(run)
            else:
                busy[key] = busy.get(key, 0) + 1
    sums: dict[str, list[float]] = {}  # metric -> [Σ (n-1) CV², Σ (n-1), command lines]
    n_busy = sum(n for key, n in busy.items() if n + len(groups.get(key, [])) >= 2)
    for starts in groups.values():
        if len(starts) < 2:
            continue
        medians: dict[str, list[float]] = {}
        for run in starts:
            for name, samples in metric_samples(run).items():
                m = median(samples.values)
                if _is_speed(name) and m is not None:
                    medians.setdefault(name, []).append(m)
        for name, values in medians.items():
            mean = sum(values) / len(values)
            if len(values) < 2 or mean <= 0:
                continue
            var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
            acc = sums.setdefault(name, [0.0, 0.0, 0.0])
            acc[0] += var / mean**2 * (len(values) - 1)
            acc[1] += len(values) - 1
            acc[2] += 1
    return StartNoise({n: math.sqrt(a[0] / a[1]) for n, a in sums.items()},
                      {n: int(a[2]) for n, a in sums.items()}, {n: int(a[1]) for n, a in sums.items()},
                      n_busy)


def across_starts(comparisons: Sequence[Comparison], noise: StartNoise, starts_a: int = 1,
                  starts_b: int = 1, *, rounds: bool = False) -> tuple[list[Comparison], list[str]]:
    """The speed verdicts held to the start-to-start variation: a better or worse whose |Δ| is within
    `floor_pct` is within noise, with a note that says why; plus the lines the verdict adds (what was held
    back, or that the variation is not known yet). `rounds`: the sides are an interleaved A/B's rounds (the
    advice is more rounds, not another benchmark)."""
    out, held, unknown = [], [], False
    for c in comparisons:
        if c.verdict not in (BETTER, WORSE) or c.delta_pct is None or not _is_speed(c.name):
            out.append(c)
            continue
        floor = noise.floor_pct(c.name, starts_a, starts_b)
        if floor is None:
            unknown = True
            out.append(c)
        elif abs(c.delta_pct) <= floor:
            note = (f"|Δ| {abs(c.delta_pct):.1f}% is within the ±{floor:.1f}% by which runs of the same "
                    "settings differ on this machine")
            out.append(replace(c, verdict=NOISE, note=note))
            held.append((c, floor))
        else:
            out.append(c)
    again = ("run more rounds to tell" if rounds else
             "benchmark both again and compare the two profiles (their runs of the same settings are pooled)")
    lines = []
    for c, floor in held:
        n = noise.settings.get(c.name, 0)
        lines.append(f"{metric_label(c.name)} {c.delta_pct:+.1f}% is within the ±{floor:.1f}% by which runs "
                     f"of the same settings differ on this machine (learned from {n} command line"
                     f"{'s' if n != 1 else ''} benchmarked 2+ times), so it is not called better or worse: "
                     f"{again}.")
    if unknown:
        many = noise.busy != 1
        busy = (f"; {noise.busy} run{'s' if many else ''} of settings benchmarked more than once "
                f"{'were' if many else 'was'} measured on a busy machine and {'are' if many else 'is'} not "
                "counted" if noise.busy else "")
        lines.append("How much runs of the same settings differ on this machine is not known yet (elsewhere "
                     f"they have differed by up to {ELSEWHERE_PCT}%{busy}): "
                     + ("run 2 or more rounds." if rounds else
                        "benchmark a profile 3 times or more on a quiet machine, and comparisons learn it."))
    return out, lines


MAX_POOLED = 5  # a profile's newest runs of one command line pooled as its side of an A/B


def same_settings(runs: Sequence[BenchRun]) -> list[BenchRun]:
    """A profile's side of an A/B: its newest finished run and the earlier finished runs of the same settings
    (setting_key), newest first, at most MAX_POOLED (`runs`: the profile's runs, newest first)."""
    done = [r for r in runs if r.status in FINISHED]
    if not done:
        return []
    key = setting_key(done[0])
    return [r for r in done if setting_key(r) == key][:MAX_POOLED]


def side_text(run: BenchRun, runs: Sequence[BenchRun]) -> str:
    """A side of an A/B in words: one run, or the runs of one setting pooled as `run`."""
    if len(runs) > 1:
        ids = ", ".join(str(i) for i in sorted(r.id or 0 for r in runs))  # oldest first, as in the chart
        return f"runs {ids} ({run.label}, pooled: one setting's starts)"
    return f"run {run.id} ({run.label})"


def side_warnings(side_a: Sequence[BenchRun], side_b: Sequence[BenchRun]) -> list[str]:
    """What may have skewed an A/B: each run measured on a busy machine, the sides in different thermal
    states."""
    found = (*map(busy_warning, [*side_a, *side_b]), heat_warning(list(side_a), list(side_b)))
    return [w for w in found if w]


def compare_across_starts(side_a: Sequence[BenchRun], side_b: Sequence[BenchRun], history: Iterable[BenchRun],
                          threshold_pct: float) -> tuple[BenchRun, BenchRun, list[Comparison], list[str]]:
    """Side B against side A, each one or more server starts of one command line pooled
    (core.bench_report.pooled; `same_settings`), held to the start-to-start variation the history and the
    sides' own starts show: what Compare and `runs compare` say. Returns the pooled sides, the
    comparisons and the lines the verdict adds."""
    a, b = pooled(list(side_a)), pooled(list(side_b))
    if a is None or b is None:
        raise ValueError("a side of the comparison has no run")
    noise = start_noise([*side_a, *side_b, *history])
    comps, lines = across_starts(compare_runs(a, b, threshold_pct), noise, len(side_a), len(side_b))
    return a, b, comps, lines
