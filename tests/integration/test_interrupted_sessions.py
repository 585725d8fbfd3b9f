"""A `run` killed by SIGKILL or SIGHUP leaves its session open; the next start closes it as interrupted,
but never the session of an instance that is still running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from llm_tuner.services.settings_store import database_path
from llm_tuner.store.db import open_engine, session_scope
from llm_tuner.store.sessions import INTERRUPTED, ServerSessionRow, SessionRepository


def _hangup_ends_it() -> None:  # pragma: no cover - runs in the child
    """SIGHUP's default action in the child, as under a terminal: a runner started with nohup hands SIGHUP ignored
    to its children, and then the hang-up this test sends would be ignored too."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _attach(url: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "llm_tuner", "run", "--json-lines", "--attach", url, "--no-samples"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_hangup_ends_it)


def _wait_ready(proc: subprocess.Popen) -> None:
    for line in proc.stdout:  # the logged state, not a sleep
        if json.loads(line).get("state") == "ready":
            return
    raise AssertionError(proc.stderr.read())


def _session_ids(repo: SessionRepository, pids: set[int], timeout_s: float = 30.0) -> dict[int, int]:
    """{pid: its session's id} once every pid has its session row (polled, not a fixed sleep)."""
    deadline = time.monotonic() + timeout_s
    while True:
        with session_scope(repo.engine) as s:
            by_pid = {row.owner_pid: row.id for row in s.query(ServerSessionRow) if row.owner_pid in pids}
        if set(by_pid) == pids:
            return by_pid
        assert time.monotonic() < deadline, f"no session row for {pids - set(by_pid)}"
        time.sleep(0.05)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP])
def test_killed_run_is_closed_as_interrupted_at_next_start_but_not_a_running_one(llama_server, sig):
    # One after the other: two CLIs started at once (each opening and migrating the history) once left one of them
    # without its session row within 30 s (to look into: two app instances starting together).
    killed, running = _attach(llama_server.url), None
    try:
        _wait_ready(killed)
        running = _attach(llama_server.url)
        _wait_ready(running)
        repo = SessionRepository(open_engine(database_path()))
        by_pid = _session_ids(repo, {killed.pid, running.pid})  # the history thread may write them after "ready"
        killed.send_signal(sig)
        killed.wait(30)
        assert repo.get(by_pid[killed.pid]).ended_unix is None  # what the kill leaves
        # the next start (the CLI's run does what the window does at start)
        subprocess.run([sys.executable, "-m", "llm_tuner", "run", "--attach", llama_server.url, "--duration", "0.5",
                        "--no-samples"], capture_output=True, timeout=60)
        closed = repo.get(by_pid[killed.pid])
        assert closed.ended_unix is not None and closed.exit_reason == INTERRUPTED
        assert repo.get(by_pid[running.pid]).ended_unix is None  # a second running instance is never marked
    finally:
        for p in (killed, running):
            if p is None:
                continue
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
                p.wait(30)
            p.stdout.close()
            p.stderr.close()


def test_a_reused_pid_does_not_keep_a_session_open(tmp_path):
    repo = SessionRepository(open_engine(tmp_path / "db.sqlite"))
    sid = repo.begin(["x"], started_unix=1.0, mode="attach")
    mine = repo.begin(["y"], started_unix=2.0, mode="attach")
    with session_scope(repo.engine) as s:
        s.get(ServerSessionRow, sid).owner_started_unix = 12345.0  # same pid as ours, another process's start
    assert repo.close_interrupted() == 1
    assert repo.get(sid).exit_reason == INTERRUPTED
    assert repo.get(mine).ended_unix is None and os.getpid()
