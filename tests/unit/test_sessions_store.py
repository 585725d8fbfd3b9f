"""Session history in a real SQLite file."""

from __future__ import annotations

from llm_tuner.core.session import RequestRecord
from llm_tuner.store.db import open_engine
from llm_tuner.store.sessions import SessionRepository


def _rec(i: int, **kw) -> RequestRecord:
    return RequestRecord(time_unix=100.0 + i, slot=0, task=i, cache_n=0, prompt_n=10 + i, prompt_ms=5.0,
                         prompt_per_second=2000.0, predicted_n=20, predicted_ms=200.0, predicted_per_second=95.0,
                         ttft_ms=5.0, latency_ms=205.0, **kw)


def test_a_session_with_requests_survives_reopening_the_database(tmp_path):
    path = tmp_path / "db.sqlite"
    repo = SessionRepository(open_engine(path))
    sid = repo.begin(["llama-server", "-m", "x.gguf"], started_unix=50.0, profile_version_id=None)
    repo.add_request(sid, _rec(1))
    repo.add_request(sid, _rec(2, draft_n=10, draft_n_accepted=7))
    # no end(): as if the app was killed
    repo2 = SessionRepository(open_engine(path))
    (info,) = repo2.history()
    assert info.n_requests == 2 and info.ended_unix is None and info.argv == ("llama-server", "-m", "x.gguf")
    reqs = repo2.requests(sid)
    assert [r.task for r in reqs] == [1, 2] and reqs[1].draft_acceptance == 0.7
    repo2.end(sid, ended_unix=60.0, exit_code=-9, exit_reason="killed by SIGKILL", telemetry_summary={"host": {}})
    info = repo2.get(sid)
    assert (info.exit_code, info.exit_reason, info.telemetry_summary) == (-9, "killed by SIGKILL", {"host": {}})


def test_history_is_newest_first_and_attach_sessions_are_marked(tmp_path):
    repo = SessionRepository(open_engine(tmp_path / "db.sqlite"))
    a = repo.begin([], started_unix=1.0, mode="attach", url="http://h:1")
    b = repo.begin(["s"], started_unix=2.0, profile_version_id=7)
    hist = repo.history()
    assert [s.id for s in hist] == [b, a]
    assert hist[1].mode == "attach" and hist[0].profile_version_id == 7
    repo.delete(a)
    assert [s.id for s in repo.history()] == [b]
