"""The benchmark runner against the real llama-server and the demo model (short specs)."""

import os
import signal

import pytest

from llm_tuner.core.bench_report import run_summary
from llm_tuner.core.bench_spec import BenchSpec
from llm_tuner.services.bench import BenchRunner, demo_target
from llm_tuner.store.db import open_engine
from llm_tuner.store.runs import RunRepository

pytestmark = pytest.mark.server


@pytest.fixture
def repo(tmp_path):
    return RunRepository(open_engine(tmp_path / "h.sqlite"))


def test_cold_run_has_exact_lengths_server_timings_and_llama_bench(repo, demo_model):
    from tests.unit.test_bench_units import ScriptedGpu

    seen = []
    run = BenchRunner(repo, telemetry=ScriptedGpu()).run(demo_target(demo_model), BenchSpec(prompt_tokens=(64, 160), gen_tokens=8, reps=2,
                                                                   warmup=1, llama_bench=True),
                                progress=lambda f, t: seen.append((f, t)))
    assert run.status == "complete", run.error
    assert [(r.prompt_tokens, r.prompt_n, r.cache_n, r.predicted_n) for r in run.reps] == [
        (64, 64, 0, 8), (64, 64, 0, 8), (160, 160, 0, 8), (160, 160, 0, 8)]
    for r in run.reps:
        # The server's own figure, not a client clock: prompt_per_second == 1000 * prompt_n / prompt_ms.
        assert r.prompt_per_second == pytest.approx(1000 * r.prompt_n / r.prompt_ms)
        assert 0 < r.ttft_ms < r.latency_ms
    assert repo.get_run(run.id).reps == run.reps
    assert any("left" in t for _, t in seen) and seen[-1][0] == 1.0
    assert {lb.test for lb in run.llama_bench} == {"pp64", "pp160", "tg8"}
    assert "--ctx-size 4096" in run.llama_bench_skipped
    gaps = run_summary(run)["llama_bench_gap"]
    assert gaps and "llama-bench" in gaps[0]["text"] and "gap" in gaps[0]["text"]
    assert run.model_size and run.model_hash and run.binary_backends
    # Telemetry peaks per repetition (scripted GPU source: no GPU here) and measured memory per device.
    assert all([p.device for p in r.peaks] == ["Host", "nvidia:0"] for r in run.reps)
    assert run.memory_measured_mib["nvidia:0"] >= max(r.peaks[1].vram_used_mib for r in run.reps)
    metrics = run_summary(run)["metrics"]
    assert "peak_vram_mib:nvidia:0" in metrics
    # The memory plan's prediction beside the measured peak: the server's RSS holds the ~240 MiB model.
    assert run.memory_predicted_mib["Host"] > 200 and 200 < metrics["peak_ram_mib:Host"]["median"] < 2000
    assert run_summary(run)["metrics"]["energy_per_token_j"]["median"] > 0


def test_warm_cache_depth_and_concurrent_clients(repo, demo_model):
    runner = BenchRunner(repo)
    warm = runner.run(demo_target(demo_model), BenchSpec(prompt_tokens=(96,), gen_tokens=8, reps=2, warmup=0,
                                                         warm_cache=True))
    assert warm.status == "complete"
    assert all(r.cache_n >= 90 and r.prompt_n <= 6 for r in warm.reps)

    target = demo_target(demo_model)
    target.argv = [a if a != "1" else "2" for a in target.argv]  # -np 2
    load = runner.run(target, BenchSpec(prompt_tokens=(64,), gen_tokens=8, reps=2, warmup=0, clients=2))
    assert load.status == "complete" and len(load.reps) == 4
    assert sorted((r.rep, r.client) for r in load.reps) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    p = run_summary(load)["latency_percentiles"]["64"]
    assert p["ttft_ms_p50"] <= p["ttft_ms_p95"] <= p["ttft_ms_p99"]


def test_cancel_and_server_crash_keep_finished_repetitions(repo, demo_model):
    runner = BenchRunner(repo)
    spec = BenchSpec(prompt_tokens=(64,), gen_tokens=8, reps=4, warmup=0)
    state = {"cancel": False}

    def on_progress(_f, text):
        if "repetition 3/4" in text:
            state["cancel"] = True

    run = runner.run(demo_target(demo_model), spec, progress=on_progress, cancelled=lambda: state["cancel"])
    assert run.status == "cancelled" and len(run.reps) == 2

    def kill_on_third(_f, text):
        if "repetition 3/4" in text and runner.current_process is not None:
            os.killpg(runner.current_process.pid, signal.SIGKILL)
            runner.current_process.wait(5)

    run = runner.run(demo_target(demo_model), spec, progress=kill_on_third)
    assert run.status == "incomplete" and "exited" in run.error, run.error
    assert [r.error is None for r in run.reps] == [True, True, False]  # the request the crash cut is kept as failed
    assert repo.get_run(run.id).status == "incomplete"


def test_speculative_drafting_is_measured_beside_a_no_draft_run(repo, demo_model):
    from llm_tuner.core.bench_report import speculative_speedup

    runner = BenchRunner(repo)
    spec = BenchSpec(prompt_tokens=(256,), gen_tokens=64, reps=2, warmup=0)
    base = runner.run(demo_target(demo_model), spec)
    target = demo_target(demo_model)
    # the demo model as its own draft: it always drafts (an n-gram type drafts only when the text repeats)
    target.argv += ["--spec-type", "draft-simple", "--spec-draft-model", str(demo_model)]
    drafted = runner.run(target, spec)
    assert base.status == drafted.status == "complete"
    assert all(r.draft_n is None for r in base.reps)
    assert sum(r.draft_n or 0 for r in drafted.reps) > 0  # the server's own draft_n / draft_n_accepted
    assert all(r.draft_steps for r in drafted.reps if r.draft_n)  # from /metrics spec_decode_num_drafts_total
    sp = run_summary(drafted)["speculative"]
    assert 0 <= sp["acceptance"] <= 1 and sp["mean_accepted_len"] >= 1
    assert sp["draft_depth_k"] == 3 and sp["bound_tokens_per_step"] >= 1  # llama.cpp's default draft depth
    speedup = speculative_speedup(drafted, base)
    assert speedup["metric"] == "gen_tps@256" and speedup["measured_speedup"] > 0
