"""An A/B whose sides are one server start each is held to how much starts of one command line differ on this
machine (core.bench_starts): learned from the history's command lines benchmarked more than once, per metric,
never from the two runs compared; a difference within it is not called better or worse, and the words say so.
Through Compare's state and `runs compare` on a real SQLite store."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from llm_tuner.core.bench_spec import BenchRun, Repetition
from llm_tuner.core.bench_starts import across_starts, start_noise
from llm_tuner.core.stats import BETTER, NOISE, compare
from llm_tuner.state.compare import CompareState
from llm_tuner.store.db import open_engine
from llm_tuner.store.runs import RunRepository


def _bench_run(run_id: int, gen: float, argv=("-ub", "512"), status="complete", attached=None) -> BenchRun:
    reps = tuple(Repetition(prompt_tokens=64, seq=i, predicted_n=16, predicted_per_second=gen + 0.1 * i)
                 for i in range(3))
    return BenchRun(id=run_id, label="x", status=status, server_argv=argv, attached_url=attached, reps=reps)


def test_start_noise_is_learned_from_command_lines_started_twice_and_never_from_the_compared_runs():
    history = [_bench_run(1, 100.0), _bench_run(2, 120.0),  # one command line, two starts: 20 % apart
               _bench_run(3, 50.0, ("-t", "4")),  # started once: says nothing about starts
               _bench_run(4, 10.0, ("-t", "8"), attached="http://127.0.0.1:8080"),  # not a start of ours
               _bench_run(5, 90.0, ("-t", "8"), attached="http://127.0.0.1:8080"),
               _bench_run(6, 10.0, ("-t", "2"), status="failed"), _bench_run(7, 90.0, ("-t", "2"))]
    noise = start_noise(history)
    assert set(noise.cv) == {"gen_tps@64"} and noise.settings == {"gen_tps@64": 1}
    assert noise.cv["gen_tps@64"] == pytest.approx(0.129, abs=0.002)  # SD of 100.1 and 120.1 over their mean
    assert start_noise(history, exclude=(2,)).cv == {}  # the compared runs do not judge themselves
    assert noise.floor_pct("gen_tps@64") == pytest.approx(100 * 1.96 * 0.1286 * 2 ** 0.5, abs=0.3)
    assert noise.floor_pct("gen_tps@64", 4, 4) < noise.floor_pct("gen_tps@64")  # more starts, a lower floor
    assert noise.floor_pct("prefill_tps@64") is None


def test_a_difference_within_start_noise_is_not_called_better():
    a, b, far = [100.0, 100.2, 100.4], [112.0, 112.2, 112.4], [160.0, 160.2, 160.4]
    noise = start_noise([_bench_run(1, 100.0), _bench_run(2, 120.0)])
    near = compare("gen_tps@64", a, b, higher_is_better=True)
    assert near.verdict == BETTER  # the repetitions alone: a clear +12 %
    (held,), lines = across_starts([near], noise)
    assert held.verdict == NOISE and "within the 35.6% that server starts of one command line differ by" in held.note
    assert lines == ["Not called better or worse, as the sides are one server start each: Generation @ 64 tok "
                     "(t/s) +12.0% (within ±35.6%), what starts of one command line differ by on this machine "
                     "(learned from 1 command line benchmarked more than once). Benchmark both again to tell."]
    (kept,), lines = across_starts([compare("gen_tps@64", a, far, higher_is_better=True)], noise)
    assert kept.verdict == BETTER and lines == []
    (unknown,), lines = across_starts([near], start_noise([]))
    assert unknown.verdict == BETTER and "is not known yet" in lines[0] and "Benchmark one profile twice" in lines[0]


def _run(repo, label: str, gen: float, argv=("-ub", "512")) -> int:
    run_id = repo.create_run(BenchRun(label=label, status="running", server_argv=argv))
    for i in range(4):
        repo.add_rep(run_id, Repetition(prompt_tokens=64, seq=i, rep=i, predicted_n=16, predicted_ms=400.0,
                                        predicted_per_second=gen + 0.1 * i))
    repo.finish_run(run_id, "complete")
    return run_id


def test_compare_and_runs_compare_say_when_the_gain_is_within_what_starts_differ_by(tmp_path, monkeypatch):
    engine = open_engine(tmp_path / "history.sqlite")
    repo = RunRepository(engine)
    a = _run(repo, "ub512", 40.0)
    b = _run(repo, "ub256", 46.0, ("-ub", "256"))  # +15 %, tight repetitions
    state = CompareState(engine, threshold_pct=2.0)
    state.compare_runs(a, b)
    assert {c.name: c.verdict for c in state.comparisons}["gen_tps@64"] == BETTER
    assert "is not known yet" in state.message  # nothing was benchmarked twice yet
    _run(repo, "t4", 30.0, ("-t", "4"))
    _run(repo, "t4", 36.0, ("-t", "4"))  # another command line, started twice: 18 % apart
    state.compare_runs(a, b)
    verdict = {c.name: c for c in state.comparisons}["gen_tps@64"]
    assert verdict.verdict == NOISE and "server starts of one command line differ by" in verdict.note
    assert "1 better" not in state.message and "Not called better or worse" in state.message

    monkeypatch.setenv("LLM_TUNER_DATA_DIR", str(tmp_path))
    engine.dispose()
    (tmp_path / "history.sqlite").rename(tmp_path / "llm-tuner.sqlite")
    done = subprocess.run([sys.executable, "-m", "llm_tuner", "runs", "compare", str(a), str(b), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert {m["name"]: m["verdict"] for m in out["metrics"]}["gen_tps@64"] == NOISE
    assert out["between_starts"][0].startswith("Not called better or worse")
    text = subprocess.run([sys.executable, "-m", "llm_tuner", "runs", "compare", str(a), str(b)],
                          capture_output=True, text=True, timeout=120).stdout
    assert "Not called better or worse" in text and "within noise" in text
