"""A watched session's history when another connection holds SQLite's write lock longer than the busy timeout
(store.db.BUSY_TIMEOUT_S, 5 s; BUSY_S here, the same failure sooner): the requests are kept and written once the
lock is free, and the user is told meanwhile; when the lock is never freed, the user is told how many requests
were not kept. A real SQLite file, the real server."""

from __future__ import annotations

import sqlite3
import time

import httpx

from llm_tuner.services import logparse
from llm_tuner.services.attach import AttachedSession
from llm_tuner.services.supervised import RequestFinished, ServerState, StateChanged
from llm_tuner.services.watch import HistoryStatus, WatchedServer
from llm_tuner.store.db import open_engine
from llm_tuner.store.sessions import SessionRepository

BUSY_S = 1.0  # a write waits this long for the lock, then fails


def _wait(pred, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _watch(url: str, repo, events: list, **kw) -> WatchedServer:
    watched = WatchedServer(AttachedSession(url, lambda _e: None, poll_s=0.2), repo=repo, telemetry=False,
                            on_event=events.append, history_retry_s=0.3, **kw)
    watched.start()
    _wait(lambda: any(isinstance(e, StateChanged) and e.state == ServerState.READY for e in events), 30, "ready")
    return watched


def _requests(url: str, events: list, n: int) -> None:
    with httpx.Client(base_url=url, timeout=60) as http:
        for i in range(n):
            http.post("/completion", json={"prompt": f"Count to {i + 3}:", "n_predict": 4}).raise_for_status()
            _wait(lambda i=i: sum(isinstance(e, RequestFinished) for e in events) > i, 10, "request seen")


def _lock(path) -> sqlite3.Connection:
    con = sqlite3.connect(path, timeout=0, isolation_level=None)
    con.execute("BEGIN IMMEDIATE")  # the write lock, held until rollback
    return con


def test_requests_are_kept_while_the_database_is_locked_and_written_after(llama_server, tmp_path):
    db = tmp_path / "history.sqlite"
    repo = SessionRepository(open_engine(db, busy_timeout_s=BUSY_S))
    events: list = []
    watched = _watch(llama_server.url, repo, events)
    try:
        locker = _lock(db)
        try:
            _requests(llama_server.url, events, 3)
            _wait(lambda: watched.history.error is not None, 30, "the failed write is said")
            assert watched.history.unsaved >= 1
        finally:
            locker.rollback()
            locker.close()
        _wait(lambda: watched.history.ok and watched.history.unsaved == 0, 30, "the writes catch up")
    finally:
        watched.stop()
    statuses = [e for e in events if isinstance(e, HistoryStatus)]
    assert statuses[0].error and "locked" in statuses[0].error and statuses[-1].ok
    lines = [e.text for e in events if isinstance(e, logparse.LogLine)]
    assert any("not written yet" in t and "kept in memory" in t for t in lines), lines
    assert any("writes work again" in t for t in lines), lines
    assert len(repo.requests(watched.session_id)) == 3
    assert repo.get(watched.session_id).exit_reason == "detached"


def test_requests_the_database_never_takes_are_reported_lost(llama_server, tmp_path):
    db = tmp_path / "history.sqlite"
    repo = SessionRepository(open_engine(db, busy_timeout_s=BUSY_S))
    events: list = []
    watched = _watch(llama_server.url, repo, events, history_give_up_s=1.0)
    locker = _lock(db)
    try:
        _requests(llama_server.url, events, 1)
        watched.stop()
    finally:
        locker.rollback()
        locker.close()
    assert watched.history.lost == 1 and not watched.history.ok
    lines = [e.text for e in events if isinstance(e, logparse.LogLine) and e.level == "error"]
    assert any("1 request(s) of this session could not be kept" in t for t in lines), lines
    assert repo.requests(watched.session_id) == []
