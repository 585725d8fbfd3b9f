"""A watched session's history writer batches requests: one SQLite transaction per batch, not per request
(issue 26: each transaction cost the server's cores ~0.4 ms). A real SQLite file; commits counted by the engine."""

from __future__ import annotations

import threading
import time

from sqlalchemy import event

from llm_tuner.core.session import RequestRecord
from llm_tuner.services.watch import _HistoryWriter
from llm_tuner.store.db import open_engine
from llm_tuner.store.sessions import SessionRepository


def _rec(i: int) -> RequestRecord:
    return RequestRecord(time_unix=100.0 + i, slot=i % 4, task=i, cache_n=0, prompt_n=5, prompt_ms=12.0,
                         prompt_per_second=400.0, predicted_n=4, predicted_ms=60.0, predicted_per_second=50.0,
                         ttft_ms=14.0, latency_ms=80.0)


def _repo_counting_commits(tmp_path):
    engine = open_engine(tmp_path / "db.sqlite")
    commits = []

    def on_commit(_conn) -> None:  # the writer's transactions (the test's own reads commit too)
        if threading.current_thread().name == "llm-tuner:history":
            commits.append(time.monotonic())

    event.listen(engine, "commit", on_commit)
    repo = SessionRepository(engine)
    sid = repo.begin(["llama-server"], started_unix=1.0)
    commits.clear()
    return repo, sid, commits


def test_a_busy_servers_requests_go_in_a_few_transactions_in_order(tmp_path):
    repo, sid, commits = _repo_counting_commits(tmp_path)
    writer = _HistoryWriter(lambda _s: None, lambda recs: repo.add_requests(sid, recs), batch_s=0.25)
    t0 = time.monotonic()
    for i in range(200):  # 200 requests over ~1 s (a busy server), another op in the middle
        writer.put_request(_rec(i))
        if i == 100:
            writer.put(lambda: repo.set_url(sid, "http://127.0.0.1:9"))
        time.sleep(0.005)
    elapsed = time.monotonic() - t0
    assert writer.close(5.0)
    assert [r.task for r in repo.requests(sid)] == list(range(200))
    assert repo.get(sid).url == "http://127.0.0.1:9"
    # one transaction per 0.25 s batch (plus the URL's and the one at close), not 200
    assert len(commits) <= elapsed / 0.25 + 4, (len(commits), elapsed)
    assert writer.status.ok


def test_closing_writes_what_is_queued_at_once(tmp_path):
    repo, sid, commits = _repo_counting_commits(tmp_path)
    writer = _HistoryWriter(lambda _s: None, lambda recs: repo.add_requests(sid, recs), batch_s=60.0)
    writer.put_request(_rec(0))
    time.sleep(0.2)  # written at once (the first of a batch), then the writer gathers for 60 s
    for i in range(1, 50):
        writer.put_request(_rec(i))
    t0 = time.monotonic()
    assert writer.close(5.0)
    assert time.monotonic() - t0 < 2.0  # the close ends the gathering pause
    assert len(repo.requests(sid)) == 50 and len(commits) == 2


def test_add_requests_keeps_all_or_none(tmp_path):
    repo, sid, _commits = _repo_counting_commits(tmp_path)
    repo.add_requests(sid, [_rec(1), _rec(2)])
    repo.add_requests(sid, [])
    try:
        repo.add_requests(sid + 99, [_rec(3)])  # no such session: the foreign key refuses the batch
    except Exception:  # noqa: BLE001 - the refusal is the point
        pass
    assert [r.task for r in repo.requests(sid)] == [1, 2] and repo.requests(sid + 99) == []
