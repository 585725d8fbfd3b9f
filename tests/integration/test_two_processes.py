"""Issue 25, group 8: two processes on one history.

- a run deleted by another process (`llm-tuner runs delete`) while it is measured ends as a failed run that says
  so, never an exception; a tune then records that trial as failed with the reason and goes on;
- `tune --resume N` while tune N runs in another live process is refused in one line;
- runs and tunes count an owner alive only by pid + process start time (store.base.owner_alive, as sessions):
  a pid reused by an unrelated process is no owner;
- a resumed tune's servers get the API key again, from $LLAMA_API_KEY (the history never keeps it), and a resume
  without it is refused saying so.
Real processes (the CLI, `sleep`), a real SQLite file, the real llama-server for the tune (the tiny random model).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from llm_tuner.core import flags
from llm_tuner.core.bench_spec import BenchRun, BenchSpec
from llm_tuner.core.tune import Knob, Objective, TuneSpec
from llm_tuner.services.bench import BenchRunner, ServerTarget
from llm_tuner.services.settings_store import database_path
from llm_tuner.store.base import process_started_unix
from llm_tuner.store.db import open_engine, session_scope
from llm_tuner.store.runs import BenchGroupRow, BenchRunRow, RunRepository
from llm_tuner.store.tunes import TuneBusy, TuneNeedsSecret, TuneRepository
from tests.support.fake_llama import GOOD_TIMINGS, FakeLlama, send

CLI = [sys.executable, "-m", "llm_tuner"]


def _delete_by_another_process(run_id: int) -> None:
    out = subprocess.run([*CLI, "runs", "delete", str(run_id)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_a_run_deleted_by_another_process_while_measured_ends_failed_and_says_so():
    engine = open_engine(database_path())
    repo = RunRepository(engine)
    state = {"deleted": False}

    def completion(h, body):
        if (body or {}).get("stream") and not state["deleted"]:
            state["deleted"] = True
            _delete_by_another_process(repo.list_runs()[0].id)  # the run being measured, from another process
        import json

        events = [{"content": "x", "tokens": [5], "stop": False},
                  {"content": "", "stop": True, "timings": GOOD_TIMINGS}]
        send(h, 200, "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode(), "text/event-stream")

    with FakeLlama(routes={"/completion": completion}) as fake:
        run = BenchRunner(repo, predict_memory=False).run(
            ServerTarget(attached_url=fake.url, label="x"), BenchSpec(prompt_tokens=(16,), gen_tokens=2, reps=3,
                                                                      warmup=0)).run
    engine.dispose()
    assert state["deleted"]
    assert run.status == "failed" and "was deleted while it was being measured" in run.error
    assert run.id is not None and RunRepository(open_engine(database_path())).get_run(run.id) is None


@pytest.mark.server
def test_a_tune_whose_run_is_deleted_records_the_trial_failed_and_goes_on(tiny_model):
    from llm_tuner.services.tune import TuneRunner

    engine = open_engine(database_path())
    repo = TuneRepository(engine)
    runs = RunRepository(engine)
    deleted = []

    def progress(_frac, text):
        if not deleted and "repetition 1/" in text:
            rid = runs.list_runs()[0].id
            _delete_by_another_process(rid)
            deleted.append(rid)

    argv = (*flags.argv_for("model", str(tiny_model)), *flags.argv_for("ctx_size", "512"),
            *flags.argv_for("threads", "2"))
    spec = TuneSpec(base_argv=argv, label="t", objective=Objective(kind="gen_tps", prompt_tokens=16, gen_tokens=4),
                    knobs=(Knob(key="ub", flag="ubatch_size", values=("64",)),), budget_s=120, screen_reps=1,
                    final_reps=1, warmup=0)
    result = TuneRunner(repo, bench_runner=BenchRunner(runs, predict_memory=False),
                        plan_fn=lambda a, e: (True, "")).run(spec, progress=progress)
    trials = repo.list_trials(result.tune_id)
    assert deleted and trials[0].status == "failed" and "was deleted" in trials[0].reason
    assert repo.get(result.tune_id).status in ("failed", "complete")
    engine.dispose()


@pytest.fixture
def live_other_process():
    proc = subprocess.Popen(["sleep", "120"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


def _tune(engine, argv=("-m", "m.gguf")) -> int:
    spec = TuneSpec(base_argv=tuple(argv), label="t", objective=Objective(kind="gen_tps", prompt_tokens=16),
                    knobs=(Knob(key="ub", flag="ubatch_size", values=("64",)),), budget_s=60)
    return TuneRepository(engine).create(spec)


def _own(engine, row_type, row_id, pid, started):
    with session_scope(engine) as s:
        row = s.get(row_type, row_id)
        row.owner_pid, row.owner_started_unix = pid, started


def test_resume_is_refused_while_the_tune_runs_in_another_live_process(live_other_process):
    engine = open_engine(database_path())
    tid = _tune(engine)
    pid = live_other_process.pid
    _own(engine, BenchGroupRow, tid, pid, process_started_unix(pid))
    with pytest.raises(TuneBusy):
        TuneRepository(engine).resume(tid)
    out = subprocess.run([*CLI, "tune", "--resume", str(tid), "--json-lines"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"tune {tid} is running in another process (pid {pid})" in out.stderr
    assert TuneRepository(engine).get(tid).status == "running"  # still the other process's
    engine.dispose()


def test_a_reused_pid_is_no_live_owner_of_a_run_or_a_tune(live_other_process):
    engine = open_engine(database_path())
    tid = _tune(engine)
    runs = RunRepository(engine)
    rid = runs.create_run(BenchRun(label="r"))
    pid = live_other_process.pid  # alive, but not the process that started them: another start time
    _own(engine, BenchGroupRow, tid, pid, process_started_unix(pid) - 3600)
    _own(engine, BenchRunRow, rid, pid, process_started_unix(pid) - 3600)
    assert TuneRepository(engine).mark_interrupted() == 1 and TuneRepository(engine).get(tid).status == "interrupted"
    assert runs.mark_interrupted() == 1 and runs.get_run(rid).status == "incomplete"
    # the same pid under its real start time is a live owner: left alone
    tid2, rid2 = _tune(engine), runs.create_run(BenchRun(label="r2"))
    _own(engine, BenchGroupRow, tid2, pid, process_started_unix(pid))
    _own(engine, BenchRunRow, rid2, pid, process_started_unix(pid))
    assert TuneRepository(engine).mark_interrupted() == 0 and runs.mark_interrupted() == 0
    engine.dispose()


def test_a_resumed_tune_gets_its_api_key_from_the_environment_never_from_the_history(tmp_path):
    engine = open_engine(database_path())
    tid = _tune(engine, ("-m", "m.gguf", *flags.argv_for("api_key", "sekrit-key")))
    repo = TuneRepository(engine)
    repo.finish(tid, "cancelled")
    assert b"sekrit-key" not in open(database_path(), "rb").read()
    with pytest.raises(TuneNeedsSecret, match=flags.API_KEY_ENV):
        repo.resume(tid, environ={})
    assert repo.get(tid).status == "cancelled"  # refused: nothing taken over
    rec = repo.resume(tid, environ={flags.API_KEY_ENV: "sekrit-key"})
    assert rec.status == "running" and flags.api_keys(rec.spec.base_env) == ["sekrit-key"]
    env = {k: v for k, v in os.environ.items() if k != flags.API_KEY_ENV}
    repo.finish(tid, "cancelled")
    out = subprocess.run([*CLI, "tune", "--resume", str(tid), "--json-lines"], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 2 and "Traceback" not in out.stderr and flags.API_KEY_ENV in out.stderr
    engine.dispose()
