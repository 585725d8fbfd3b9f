"""One profile on two llama.cpp builds, and a tuned profile that a new build made slower.

`builds_ab` measures the same target on build A (the profile's or the configured llama-server) and build B
(`other`), interleaved A B A B over `rounds` (so a slow drift of the machine falls on both alike), each run a
real server start, heat-gated on GPUs (services.bench.heat); the runs are one group of kind "builds" whose
`sweep_value` is the side. `builds_verdict` pools each side (core.bench_report.pooled) and compares them per
metric (core.bench_report.compare_runs: median, Δ%, 95 % interval, verdict), beside the sides' heat
(core.heat.heat_warning). `slower_than_stored` finds the earlier measurement of a profile version made with
another build and says when the new run is slower by more than the noise: its winner may no longer be best.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from llm_tuner.core.bench_report import compare_runs, pooled
from llm_tuner.core.bench_spec import BenchRun, BenchSpec, RunGroup
from llm_tuner.core.bench_starts import HISTORY_RUNS, across_starts, start_noise
from llm_tuner.core.build import build_changes
from llm_tuner.core.heat import heat_warning
from llm_tuner.core.stats import AB_THRESHOLD_PCT, WORSE, Comparison
from llm_tuner.services.bench.errors import BenchError
from llm_tuner.services.bench.group import GroupStep, run_group
from llm_tuner.services.bench.runner import BenchRunner
from llm_tuner.services.bench.target import CancelFn, ProgressFn, ServerTarget
from llm_tuner.store.runs import RunRepository

SIDE_A, SIDE_B = "A", "B"
# the metric a build comparison and the re-tune check lead with: generation speed, else prompt speed
_LEAD = ("gen_tps@", "pp_tps@")


@dataclass(frozen=True)
class BuildsVerdict:
    """Build B against build A: each metric's comparison, the lead one in words, warnings (heat, busy)."""

    group_id: int | None
    a: BenchRun | None  # side A pooled over its rounds
    b: BenchRun | None
    comparisons: tuple[Comparison, ...]
    text: str
    warnings: tuple[str, ...] = ()

    @property
    def b_slower(self) -> bool:
        """B is slower than A by more than the noise on the lead metric (generation speed, else prompt
        speed): the settings tuned on build A may no longer be best on B (re-tune it there)."""
        lead = _lead(list(self.comparisons))
        return lead is not None and lead.verdict == WORSE

    def to_json(self) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "b_slower": self.b_slower,
            "text": self.text,
            "warnings": list(self.warnings),
            "a": {
                "binary": self.a.binary_path if self.a else None,
                "build": self.a.build.model_dump(mode="json") if self.a and self.a.build else None,
            },
            "b": {
                "binary": self.b.binary_path if self.b else None,
                "build": self.b.build.model_dump(mode="json") if self.b and self.b.build else None,
            },
            "metrics": [c.to_json() for c in self.comparisons],
        }


def builds_ab(
    runner: BenchRunner,
    target: ServerTarget,
    spec: BenchSpec,
    other: str | Path,
    *,
    rounds: int = 2,
    progress: ProgressFn | None = None,
    cancelled: CancelFn | None = None,
) -> tuple[int, list[BenchRun]]:
    """Measure `target` on its own build (A) and on the llama-server at `other` (B), interleaved over
    `rounds`. Returns the group id and the runs in the order measured (sweep_value "A" or "B"). BenchError
    when `target` is an attached server (a build comparison starts its own servers)."""
    if target.attached_url:
        raise BenchError(
            "a build comparison starts the server on each build: give a profile or arguments, not --url"
        )
    other_path = str(Path(other).expanduser())
    a_name = target.binary or "the configured llama-server"
    group = RunGroup(kind="builds", param="llama-server", values=(a_name, other_path), label=target.label)
    sides = [(SIDE_A, target.binary), (SIDE_B, other_path)]
    steps = [
        GroupStep(side, f"build {side}", replace(target, binary=binary), spec)
        for _ in range(max(1, rounds))
        for side, binary in sides
    ]
    return run_group(
        runner, group, steps, heat_gate=True, whole="A/B", progress=progress, cancelled=cancelled
    )


def _lead(comparisons: list[Comparison]) -> Comparison | None:
    for prefix in _LEAD:
        hit = next((c for c in comparisons if c.name.startswith(prefix) and c.verdict), None)
        if hit is not None:
            return hit
    return next((c for c in comparisons if c.verdict), None)


def _in_words(c: Comparison, a: str, b: str) -> str:
    from llm_tuner.core.bench_report import metric_label  # noqa: PLC0415 - one label home, used only here

    if c.delta_pct is None:
        return f"{metric_label(c.name)}: not enough data"
    ci = "" if c.ci_low_pct is None else f", 95% interval [{c.ci_low_pct:+.1f}, {c.ci_high_pct:+.1f}]%"
    return f"{metric_label(c.name)}: {b} {c.delta_pct:+.1f}% against {a}{ci} -> {c.verdict_label}"


def builds_verdict(
    runs: list[BenchRun], group_id: int | None = None, threshold_pct: float = AB_THRESHOLD_PCT,
    history: Sequence[BenchRun] = (),
) -> BuildsVerdict:
    """Side B against side A, each pooled over its rounds (runs as builds_ab returns them), held to how much
    server starts of one command line differ (core.bench_starts: learned from the rounds themselves, each
    side's starts of one command line, and from `history`, the store's other runs)."""
    side_a = [r for r in runs if r.sweep_value == SIDE_A]
    side_b = [r for r in runs if r.sweep_value == SIDE_B]
    a, b = pooled(side_a), pooled(side_b)
    if a is None or b is None:
        return BuildsVerdict(group_id, a, b, (), "no verdict: one side has no run")
    comps, starts = across_starts(compare_runs(a, b, threshold_pct), start_noise([*runs, *history]),
                                  len(side_a), len(side_b), rounds=True)
    lead = _lead(comps)
    changes = build_changes(a.build, b.build)
    text = (
        "B against A: "
        + (_in_words(lead, "A", "B") if lead else "no metric measured on both")
        + (f" ({'; '.join(changes)})" if changes else " (the same build file: expect no difference)")
        + "".join(f"\n{line}" for line in starts)
    )
    warns = [
        w
        for w in (
            heat_warning(
                [r for r in runs if r.sweep_value == SIDE_A], [r for r in runs if r.sweep_value == SIDE_B]
            ),
        )
        if w
    ]
    return BuildsVerdict(group_id, a, b, tuple(comps), text, tuple(warns))


def slower_than_stored(
    repo: RunRepository, run: BenchRun, threshold_pct: float = AB_THRESHOLD_PCT
) -> str | None:
    """When `run` measured a saved profile version that was measured before with another build (or GPU driver)
    and is now slower by more than the noise (the comparison's verdict is "worse"), the message that offers a
    re-tune; None otherwise (no earlier measurement, the same build, or not slower)."""
    if run.profile_version_id is None or run.build is None or not run.reps:
        return None
    earlier = [
        r
        for r in repo.list_runs(label=run.label or None, limit=200)
        if r.profile_version_id == run.profile_version_id
        and r.id != run.id
        and r.build is not None
        and build_changes(r.build, run.build)
        and r.status in ("complete", "incomplete")
        and r.spec == run.spec
    ]
    if not earlier:
        return None
    old_build = earlier[0].build
    if old_build is None:  # every earlier run has a build (above); this tells the type checker
        return None
    earlier_runs = [r for r in earlier if r.build == old_build]
    stored = pooled(earlier_runs)
    if stored is None:
        return None
    comps, _said = across_starts(compare_runs(stored, run, threshold_pct),
                                  start_noise([run, *repo.list_overview(limit=HISTORY_RUNS)]),
                                  len(earlier_runs), 1)
    lead = _lead(comps)
    if lead is None or lead.verdict != WORSE:
        return None
    return (
        f"{run.label or 'this profile'} is slower than its stored measurement (runs "
        f"{', '.join(str(r.id) for r in earlier_runs)}, {old_build.describe()}): "
        + _in_words(lead, "then", "now")
        + f". {'; '.join(build_changes(old_build, run.build))}. The settings "
        f"tuned then may no longer be best: re-tune it (llm-tuner tune --profile {run.label!r}, "
        "or the Tune tab)."
    )
