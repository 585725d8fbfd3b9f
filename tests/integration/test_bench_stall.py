"""A hung server (SIGSTOP on the real llama-server mid-request) ends the benchmark within the stall bound, with
the reason in the run's record, instead of waiting for the HTTP read timeout (10 minutes)."""

from __future__ import annotations

import os
import signal
import threading
import time

import psutil
import pytest

from llm_tuner.core.bench_spec import BenchSpec
from llm_tuner.services.bench import BenchRunner, demo_target
from llm_tuner.store.db import open_engine
from llm_tuner.store.runs import RunRepository

pytestmark = [pytest.mark.server, pytest.mark.skipif(os.name == "nt", reason="SIGSTOP")]


def test_a_stopped_server_ends_the_run_with_the_reason(tiny_model, tmp_path):
    repo = RunRepository(open_engine(tmp_path / "db.sqlite"))
    runner = BenchRunner(repo, predict_memory=False, stall_s=3.0)
    stopped: list[int] = []

    def stop_it(pid: int) -> None:
        os.kill(pid, signal.SIGSTOP)
        stopped.append(pid)

    timers: list[threading.Timer] = []

    def progress(_frac, text: str) -> None:
        if "repetition 1/" in text and not timers:  # the first measured request is on its way
            timers.append(threading.Timer(1.0, stop_it, (runner.current_process.pid,)))
            timers[0].start()

    t0 = time.monotonic()
    run = runner.run(demo_target(tiny_model, threads=1),
                     BenchSpec(prompt_tokens=(32,), gen_tokens=3000, reps=2, warmup=0), progress=progress).run
    elapsed = time.monotonic() - t0
    for t in timers:
        t.join(5)
    assert stopped, "the server was never stopped"
    assert run.status in ("failed", "incomplete")
    assert "made no progress for 3 s" in run.error and "stopped (SIGSTOP" in run.error, run.error
    assert repo.get_run(run.id).error == run.error  # stored with that reason
    assert elapsed < 400, elapsed  # a stopped server would wait for the 600 s read timeout
    assert not psutil.pid_exists(stopped[0]) or psutil.Process(stopped[0]).status() == psutil.STATUS_ZOMBIE


def test_a_stopped_server_is_a_stall_within_seconds_at_the_default_bound(tiny_model, tmp_path):
    """Issue 35 item 5: with the default bound (120 s) a SIGSTOPped server was said nothing about for two minutes;
    a stopped process (and a /health silent with no CPU time) is a stall within seconds."""
    repo = RunRepository(open_engine(tmp_path / "db.sqlite"))
    runner = BenchRunner(repo, predict_memory=False)  # the default stall bound
    timers: list[threading.Timer] = []

    def progress(_frac, text: str) -> None:
        if "repetition 1/" in text and not timers:
            timers.append(threading.Timer(1.0, os.kill, (runner.current_process.pid, signal.SIGSTOP)))
            timers[0].start()

    t0 = time.monotonic()
    run = runner.run(demo_target(tiny_model, threads=1),
                     BenchSpec(prompt_tokens=(32,), gen_tokens=3000, reps=2, warmup=0), progress=progress).run
    took = time.monotonic() - t0
    assert timers, "the first repetition never started"
    assert run.status in ("failed", "incomplete") and "stopped (SIGSTOP or a debugger)" in run.error, run.error
    assert took < 60, took
