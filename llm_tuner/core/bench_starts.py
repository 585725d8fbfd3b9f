"""Two server starts of one command line do not run alike, and an A/B whose sides are one start each cannot
see it: its interval rests on the repetitions inside each start. On the lent H100 one command line started
five times measured 105-146 t/s while each start's own repetitions spread 3-29 % (benchmarks/sessions/
2026-12-07-gpu-server-cal/run-2); on a 2-core VM the median gap between two starts was 12.5 % (issue 33).

`start_noise` learns from the history how much one start's median varies on this machine (the command lines
benchmarked more than once: the same llama-server arguments, build and model), per metric; `across_starts`
holds an A/B's verdicts to it: a difference two starts of one command line differ by as often is not called
better or worse. Pure: the callers read the runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from llm_tuner.core.bench_report import compare_runs, metric_label, metric_samples
from llm_tuner.core.bench_spec import BenchRun
from llm_tuner.core.stats import BETTER, NOISE, WORSE, Comparison, median, pooled_cv

Z95 = 1.96
FINISHED = ("complete", "incomplete")


@dataclass(frozen=True)
class StartNoise:
    """Per metric id, the relative SD of one server start's median and how many command lines (started twice
    or more) it rests on."""

    cv: dict[str, float] = field(default_factory=dict)
    settings: dict[str, int] = field(default_factory=dict)

    def floor_pct(self, metric: str, starts_a: int = 1, starts_b: int = 1) -> float | None:
        """The smallest |Δ| (%) between sides of `starts_a` and `starts_b` starts that start-to-start
        variation alone reaches less than one time in twenty; None when not known for `metric`."""
        cv = self.cv.get(metric)
        if cv is None:
            return None
        return 100.0 * Z95 * cv * math.sqrt(1.0 / max(1, starts_a) + 1.0 / max(1, starts_b))


def setting_key(run: BenchRun) -> tuple[object, ...]:
    """What makes two runs starts of one command line: the arguments, the build, the model, the benchmark's
    prompts and lengths (a run attached to a server the app did not start has no start of its own)."""
    build = run.build.key if run.build is not None else run.binary_version
    spec = run.spec.model_dump(exclude={"llama_bench", "reps", "warmup"})
    return (tuple(run.server_argv), tuple(sorted(run.server_env.items())), build,
            run.model_hash or run.model_path, repr(sorted(spec.items())))


def start_noise(runs: Iterable[BenchRun], exclude: Sequence[int | None] = ()) -> StartNoise:
    """How much one start's median varies, per metric, over the history's command lines started 2+ times
    (finished runs the app started itself; `exclude`: the runs being compared, which must not judge
    themselves)."""
    groups: dict[tuple[object, ...], list[BenchRun]] = {}
    for run in runs:
        if run.status in FINISHED and run.attached_url is None and run.id not in exclude and run.reps:
            groups.setdefault(setting_key(run), []).append(run)
    per_metric: dict[str, list[list[float]]] = {}
    for starts in groups.values():
        if len(starts) < 2:
            continue
        medians: dict[str, list[float]] = {}
        for run in starts:
            for name, samples in metric_samples(run).items():
                m = median(samples.values)
                if m is not None:
                    medians.setdefault(name, []).append(m)
        for name, values in medians.items():
            if len(values) >= 2:
                per_metric.setdefault(name, []).append(values)
    cv = {name: c for name, g in per_metric.items() if (c := pooled_cv(g)) is not None}
    return StartNoise(cv, {name: len(per_metric[name]) for name in cv})


def across_starts(comparisons: Sequence[Comparison], noise: StartNoise, starts_a: int = 1,
                  starts_b: int = 1) -> tuple[list[Comparison], list[str]]:
    """The verdicts held to the start-to-start variation: a better or worse whose |Δ| is within `floor_pct` is
    within noise, with a note that says why; plus the lines the verdict adds (what was held back, or that the
    variation is not known yet)."""
    out, held, unknown = [], [], False
    for c in comparisons:
        if c.verdict not in (BETTER, WORSE) or c.delta_pct is None:
            out.append(c)
            continue
        floor = noise.floor_pct(c.name, starts_a, starts_b)
        if floor is None:
            unknown = True
            out.append(c)
        elif abs(c.delta_pct) <= floor:
            note = (f"|Δ| {abs(c.delta_pct):.1f}% is within the {floor:.1f}% that server starts of one "
                    "command line differ by here")
            out.append(replace(c, verdict=NOISE, note=note))
            held.append(f"{metric_label(c.name)} {c.delta_pct:+.1f}% (within ±{floor:.1f}%)")
        else:
            out.append(c)
    sides = ("one server start each" if starts_a == starts_b == 1
             else f"{starts_a} and {starts_b} server starts")
    lines = []
    if held:
        lead = next(iter(noise.settings.values()), 0)
        lines.append(f"Not called better or worse, as the sides are {sides}: {', '.join(held)}, what "
                     f"starts of one command line differ by on this machine (learned from {lead} command "
                     f"line{'s' if lead != 1 else ''} benchmarked more than once). Benchmark both again to "
                     "tell.")
    if unknown:
        lines.append(f"The sides are {sides}: how much starts of one command line differ on this machine "
                     "is not known yet, and elsewhere they have differed by up to a third. Benchmark one "
                     "profile twice and Compare learns it.")
    return out, lines


HISTORY_RUNS = 500  # the newest runs start_noise learns from (the History's light records suffice)


def compare_across_starts(a: BenchRun, b: BenchRun, history: Iterable[BenchRun], threshold_pct: float,
                          ) -> tuple[list[Comparison], list[str]]:
    """Run B against run A (core.bench_report.compare_runs), each one server start, held to the start-to-start
    variation the history shows (the two runs themselves left out): what Compare and `runs compare` say."""
    return across_starts(compare_runs(a, b, threshold_pct), start_noise(history, exclude=(a.id, b.id)))
