"""`llm-tuner bench --vs-binary PATH`: the same profile on two llama-server builds, interleaved A B A B.

A is the profile's own program (or the configured llama-server), B the one named; each run is a real server
start, heat-gated on GPUs (each run waits until the GPUs are back within --cool-within °C of where the A/B
began, at most --cool-limit seconds, and its notes say so). Prints each run, then B against A per metric
(median, Δ %, 95 % interval, verdict) and a warning when the sides ran at different temperatures or clocks;
when the profile is slower on B by more than the noise, the `tune` command that re-tunes it for B.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from llm_tuner.cli.output import CliError, emit_json


def vs_binary(runner, target, spec, args, *, cool_down, show_run, progress) -> int:
    """The A/B with cli.bench's runner, its heat gate `cool_down(runner)`, `show_run(run)` to print a run and
    the `progress` printer."""
    from llm_tuner.core.bench_report import run_to_json as run_json
    from llm_tuner.core.stats import AB_THRESHOLD_PCT
    from llm_tuner.services import binaries
    from llm_tuner.services.bench import BenchError
    from llm_tuner.services.bench.builds import builds_ab, builds_verdict

    if target.attached_url:
        raise CliError(
            "--vs-binary starts the server on each build: give a profile or llama-server arguments"
        )
    other = Path(args.vs_binary).expanduser()
    try:
        binaries.check_executable(other)
        # naming the program on the command line is the confirmation that it may run (for this command only)
        runner.settings = binaries.trust_binary(other, runner.settings, save=False)
        with runner.heat_gated(cool_down(runner)):
            group_id, runs = builds_ab(
                runner, target, spec, other, rounds=max(1, args.rounds), progress=progress
            )
    except (BenchError, binaries.BinaryError) as exc:
        raise CliError(str(exc)) from None
    threshold = getattr(runner.settings, "ab_threshold_pct", AB_THRESHOLD_PCT)
    from llm_tuner.core.bench_starts import HISTORY_RUNS

    verdict = builds_verdict(runs, group_id, threshold, runner.repo.list_overview(limit=HISTORY_RUNS))
    if args.json:
        emit_json({"group_id": group_id, "runs": [run_json(r) for r in runs], "verdict": verdict.to_json()})
    else:
        for r in runs:
            print(f"[build {r.sweep_value}]")
            show_run(r)
        for side, run in (("A", verdict.a), ("B", verdict.b)):
            if run is not None:
                print(f"{side}: {run.build.describe() if run.build else run.binary_path}")
        print(verdict.text)
        from llm_tuner.core.bench_report import metric_label

        for c in verdict.comparisons:
            if c.delta_pct is not None:
                ci = "" if c.ci_low_pct is None else f" [{c.ci_low_pct:+.1f}, {c.ci_high_pct:+.1f}]%"
                print(f"  {metric_label(c.name):40s} {c.delta_pct:+6.1f}%{ci}  {c.verdict_label}")
        for w in verdict.warnings:
            print(f"Warning: {w}")
        if verdict.b_slower:  # as Compare's "Re-tune for this build"
            print(_retune_line(target.label, getattr(args, "profile", None), other))
    return 0 if runs and all(r.status == "complete" for r in runs) else 1


def _retune_line(label: str, profile: str | None, other: Path) -> str:
    base = f"--profile {shlex.quote(profile)}" if profile else "-- <its arguments>"
    return (
        f"Re-tune? {label or 'the profile'} is slower on B by more than the noise: the settings tuned "
        f"before may no longer be best there (llm-tuner tune --binary {shlex.quote(str(other))} {base}, "
        'or Compare\'s "Re-tune for this build").'
    )
