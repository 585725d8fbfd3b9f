"""A build A/B as services.bench.builds stores it (a "builds" group in a real SQLite history, A B A B, each run
with its build), read back and compared: Compare's build row and its state are tested on it."""

from __future__ import annotations

from llm_tuner.core.bench_spec import BenchRun, BenchSpec, Repetition, RunGroup
from llm_tuner.core.build import BuildStamp
from llm_tuner.services.bench.builds import SIDE_A, SIDE_B, builds_verdict
from llm_tuner.store.runs import RunRepository

OLD = BuildStamp(key="f:aaaaaaaaaaaa h:1 p:-", file_sha256="a" * 64, help_sha256="1" * 64)
NEW = BuildStamp(key="f:bbbbbbbbbbbb h:2 p:-", file_sha256="b" * 64, help_sha256="2" * 64)
OTHER = "/opt/llama-new/llama-server"
SPEC = BenchSpec(prompt_tokens=(64,), gen_tokens=16, reps=4, warmup=0)


def stored_ab(repo: RunRepository, gen_tps: dict[str, float]):
    """A builds group as builds_ab stores it: A B A B, each run with its build, read back from the history."""
    group_id = repo.create_group(
        RunGroup(kind="builds", param="llama-server", values=("llama-server", OTHER), label="q")
    )
    for _round in range(2):
        for side, build, binary in ((SIDE_A, OLD, "llama-server"), (SIDE_B, NEW, OTHER)):
            run_id = repo.create_run(
                BenchRun(
                    label="q",
                    build=build,
                    binary_path=binary,
                    group_id=group_id,
                    sweep_value=side,
                    spec=SPEC,
                    status="running",
                )
            )
            for i in range(SPEC.reps):
                repo.add_rep(
                    run_id,
                    Repetition(
                        prompt_tokens=64,
                        seq=i,
                        rep=i,
                        predicted_n=16,
                        predicted_per_second=gen_tps[side] * (1 + 0.002 * i),
                        prompt_per_second=500.0 + i,
                    ),
                )
            repo.finish_run(run_id, "complete")
    runs = sorted(repo.list_runs(group_id=group_id), key=lambda r: r.id)
    return builds_verdict(runs, group_id)
