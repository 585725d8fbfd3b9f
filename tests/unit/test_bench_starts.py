"""An A/B whose sides are one server start each is held to how much starts of one command line differ on this
machine (core.bench_starts): learned from the history's quiet runs of settings benchmarked more than once, per
speed metric, pooled by degrees of freedom, never from the runs compared; a difference within it is not called
better or worse, and the words say so. Two profiles pool their runs of one setting, which narrows the floor.
Through Compare's state and `runs compare` on a real SQLite store."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from llm_tuner.core.bench_spec import BenchRun, Repetition
from llm_tuner.core.bench_starts import MIN_DF, across_starts, start_noise
from llm_tuner.core.stats import BETTER, NOISE, compare
from llm_tuner.state.compare import CompareState
from llm_tuner.store.db import open_engine
from llm_tuner.store.runs import RunRepository


def _bench_run(run_id: int, gen: float, argv=("-ub", "512"), status="complete", attached=None,
               busy: float | None = None) -> BenchRun:
    reps = tuple(Repetition(prompt_tokens=64, seq=i, predicted_n=16, predicted_per_second=gen + 0.1 * i,
                            other_cpu_pct=busy) for i in range(3))
    return BenchRun(id=run_id, label="x", status=status, server_argv=argv, attached_url=attached, reps=reps)


def _cv(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) / mean


def test_start_noise_is_pooled_over_quiet_settings_started_twice():
    history = [_bench_run(1, 100.0), _bench_run(2, 120.0), _bench_run(3, 110.0),  # three starts: 2 df
               _bench_run(4, 50.0, ("-t", "4")), _bench_run(5, 55.0, ("-t", "4")),  # two starts: 1 df
               _bench_run(6, 50.0, ("-t", "6")),  # started once: says nothing about starts
               _bench_run(7, 10.0, ("-t", "8"), attached="http://127.0.0.1:8080"),  # not a start of ours
               _bench_run(8, 90.0, ("-t", "8"), attached="http://127.0.0.1:8080"),
               _bench_run(9, 10.0, ("-t", "2"), status="failed"), _bench_run(10, 90.0, ("-t", "2")),
               _bench_run(11, 10.0, ("-t", "3"), busy=80.0), _bench_run(12, 90.0, ("-t", "3"))]  # a busy machine
    noise = start_noise(history)
    assert set(noise.cv) == {"gen_tps@64"} and noise.settings == {"gen_tps@64": 2} and noise.df == {"gen_tps@64": 3}
    want = math.sqrt((2 * _cv([100.1, 120.1, 110.1]) ** 2 + _cv([50.1, 55.1]) ** 2) / 3)
    assert noise.cv["gen_tps@64"] == pytest.approx(want, rel=1e-6)
    assert noise.floor_pct("gen_tps@64") == pytest.approx(100 * 1.96 * want * math.sqrt(2), rel=1e-6)
    assert noise.floor_pct("gen_tps@64", 3, 3) < noise.floor_pct("gen_tps@64")  # more starts, a lower floor
    assert start_noise([r for r in history if r.id != 3]).floor_pct("gen_tps@64") is None  # 2 df: under MIN_DF
    assert MIN_DF == 3 and noise.floor_pct("prefill_tps@64") is None
    assert noise.busy == 1  # run 11: its setting was started twice, once on a busy machine
    assert start_noise([*history, *history]).df == noise.df  # a run listed twice counts once


def test_a_difference_within_start_noise_is_not_called_better():
    a, b, far = [100.0, 100.2, 100.4], [112.0, 112.2, 112.4], [160.0, 160.2, 160.4]
    noise = start_noise([_bench_run(1, 100.0), _bench_run(2, 120.0), _bench_run(3, 110.0),
                         _bench_run(4, 50.0, ("-t", "4")), _bench_run(5, 55.0, ("-t", "4"))])
    near = compare("gen_tps@64", a, b, higher_is_better=True)
    assert near.verdict == BETTER  # the repetitions alone: a clear +12 %
    (held,), lines = across_starts([near], noise)
    floor = noise.floor_pct("gen_tps@64")
    assert held.verdict == NOISE and f"within the ±{floor:.1f}% by which runs of the same settings" in held.note
    assert lines == [f"Generation @ 64 tok (t/s) +12.0% is within the ±{floor:.1f}% by which runs of the same "
                     "settings differ on this machine (learned from 2 command lines benchmarked 2+ times), so it is "
                     "not called better or worse: benchmark both again and compare the two profiles (their runs "
                     "of the same settings are pooled)."]
    (kept,), lines = across_starts([compare("gen_tps@64", a, far, higher_is_better=True)], noise)
    assert kept.verdict == BETTER and lines == []
    (unknown,), lines = across_starts([near], start_noise([]))
    assert unknown.verdict == BETTER and lines[0].startswith("How much runs of the same settings differ on this "
                                                             "machine is not known yet")
    busy = start_noise([_bench_run(1, 100.0, busy=90.0), _bench_run(2, 120.0, busy=90.0)])
    assert "2 runs of settings benchmarked more than once were measured on a busy machine" in \
        across_starts([near], busy)[1][0]
    ttft = compare("ttft_ms@64", a, b, higher_is_better=False)  # not a speed: neither held nor "not known"
    assert across_starts([ttft], start_noise([])) == ([ttft], [])
    assert across_starts([near], start_noise([]), 2, 2, rounds=True)[1][0].endswith("run 2 or more rounds.")


def _run(repo, label: str, gen: float, argv=("-ub", "512")) -> int:
    run_id = repo.create_run(BenchRun(label=label, status="running", server_argv=argv))
    for i in range(4):
        repo.add_rep(run_id, Repetition(prompt_tokens=64, seq=i, rep=i, predicted_n=16, predicted_ms=400.0,
                                        predicted_per_second=gen + 0.1 * i))
    repo.finish_run(run_id, "complete")
    return run_id


def test_compare_and_runs_compare_hold_a_gain_within_start_noise_and_pool_a_profiles_runs(tmp_path, monkeypatch):
    engine = open_engine(tmp_path / "history.sqlite")
    repo = RunRepository(engine)
    a = _run(repo, "ub512", 40.0)
    b = _run(repo, "ub256", 46.0, ("-ub", "256"))  # +15 %, tight repetitions
    state = CompareState(engine, threshold_pct=2.0)
    state.compare_runs(a, b)
    assert {c.name: c.verdict for c in state.comparisons}["gen_tps@64"] == BETTER
    assert "is not known yet" in state.message  # nothing was benchmarked twice yet
    for gen in (30.0, 36.0, 33.0):  # another setting started three times: ~9 % SD between starts
        _run(repo, "t4", gen, ("-t", "4"))
    _run(repo, "t6", 30.0, ("-t", "6"))
    _run(repo, "t6", 33.0, ("-t", "6"))
    state.compare_runs(a, b)
    verdict = {c.name: c for c in state.comparisons}["gen_tps@64"]
    assert verdict.verdict == NOISE and "by which runs of the same settings differ" in verdict.note
    assert "1 better" not in state.message and "so it is not called better or worse" in state.message
    a2, b2 = _run(repo, "ub512", 40.5), _run(repo, "ub256", 46.3, ("-ub", "256"))  # each profile again
    state.set_by_profiles(True)
    state.choose("ub512", "ub256")
    assert state.compare()
    assert f"runs {b}, {b2} (ub256, pooled" in state.message and f"runs {a}, {a2} (ub512, pooled" in state.message

    monkeypatch.setenv("LLM_TUNER_DATA_DIR", str(tmp_path))
    engine.dispose()
    (tmp_path / "history.sqlite").rename(tmp_path / "llm-tuner.sqlite")
    cli = [sys.executable, "-m", "llm_tuner", "runs", "compare"]
    done = subprocess.run([*cli, str(a), str(b), "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert {m["name"]: m["verdict"] for m in out["metrics"]}["gen_tps@64"] == NOISE
    assert "so it is not called better or worse" in out["between_starts"][0] and out["a"]["runs"] == [a]
    pooled = json.loads(subprocess.run([*cli, "ub512", "ub256", "--profiles", "--json"], capture_output=True,
                                       text=True, timeout=120).stdout)
    assert pooled["a"]["runs"] == [a2, a] and pooled["b"]["runs"] == [b2, b]
    text = subprocess.run([*cli, str(a), str(b)], capture_output=True, text=True, timeout=120).stdout
    assert "so it is not called better or worse" in text and "within noise" in text
