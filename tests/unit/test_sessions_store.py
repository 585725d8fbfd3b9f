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


def test_a_requests_model_round_trips_through_the_file(tmp_path):
    """A router's requests name their model: kept by the batch insert, read back after reopening the file."""
    path = tmp_path / "db.sqlite"
    repo = SessionRepository(open_engine(path))
    sid = repo.begin(["llama-server", "--models-dir", "/srv/models"], started_unix=50.0)
    repo.add_requests(sid, [_rec(1, model="gemma-a"), _rec(2), _rec(3, model="gemma-b")])
    repo.add_request(sid, _rec(4, model="org/repo:Q4_K_M"))
    reqs = SessionRepository(open_engine(path)).requests(sid)
    assert [(r.task, r.model) for r in reqs] == [(1, "gemma-a"), (2, None), (3, "gemma-b"), (4, "org/repo:Q4_K_M")]


def test_a_database_from_before_request_models_migrates_and_keeps_its_requests(tmp_path):
    """A file at revision 0008 (no model column) opens at head: its requests read back without a model, new
    ones keep theirs."""
    from alembic import command
    from alembic.script import ScriptDirectory
    from sqlalchemy import inspect, text

    from llm_tuner.store.db import alembic_config

    path = tmp_path / "old.sqlite"
    old = open_engine(path, migrate=False)
    command.upgrade(alembic_config(old), "0008")
    assert "model" not in {c["name"] for c in inspect(old).get_columns("session_requests")}
    with old.begin() as conn:
        conn.execute(text("INSERT INTO server_sessions (id, mode, started_unix, argv_json, telemetry_json) "
                          "VALUES (1, 'launch', 50.0, '[\"llama-server\"]', '{}')"))
        conn.execute(text("INSERT INTO session_requests (session_id, time_unix, slot, task, prompt_n, predicted_n, "
                          "approximate) VALUES (1, 101.0, 0, 7, 11, 20, 0)"))
    old.dispose()

    engine = open_engine(path)
    with engine.connect() as conn:
        head = ScriptDirectory.from_config(alembic_config(engine)).get_current_head()
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == head
    repo = SessionRepository(engine)
    (kept,) = repo.requests(1)
    assert (kept.task, kept.prompt_n, kept.predicted_n, kept.model) == (7, 11, 20, None)
    repo.add_requests(1, [_rec(8, model="gemma-b")])
    assert [(r.task, r.model) for r in repo.requests(1)] == [(7, None), (8, "gemma-b")]
