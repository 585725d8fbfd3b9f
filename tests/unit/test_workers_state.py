"""WorkersState without Qt (Settings' RPC workers, issue 36): the list edited (a bad address refused in
words, a token kept apart from the row), the warning for a worker bound beyond loopback, a check of a real
closed port in plain words, and the words of a local worker started, failed or stopped."""

from __future__ import annotations

from pathlib import Path

from llm_tuner.core.settings import RpcWorker, Settings
from llm_tuner.services.rpc import LocalWorker, WorkerError, WorkerPool, WorkerSpec
from llm_tuner.state.callbacks import declared
from llm_tuner.state.workers import NOT_CHECKED, WorkerRow, WorkersState
from tests.support.held_run import Held


def test_the_list_is_edited_with_a_bad_address_refused_and_tokens_kept():
    state = WorkersState(Settings(rpc_workers=[RpcWorker(endpoint="10.0.0.2:50052", agent_token="s3cret")]))
    assert set(declared(WorkersState)) == {"rows", "message", "starting", "checking"}
    assert state.rows == (WorkerRow("10.0.0.2:50052", "", NOT_CHECKED),)
    assert not state.add("10.0.0.3")  # no port
    assert state.message[1] and "is not a worker address" in state.message[0]
    assert state.add(" 10.0.0.3:50052 ", "http://10.0.0.3:50100", "tok") and state.message == ("", False)
    assert state.add("10.0.0.3:50052", "http://elsewhere", "")  # listed: the row stays, the token goes
    assert state.endpoints() == ["10.0.0.2:50052", "10.0.0.3:50052"]
    assert state.workers() == [
        RpcWorker(endpoint="10.0.0.2:50052", agent_token="s3cret"),
        RpcWorker(endpoint="10.0.0.3:50052", agent_url="http://10.0.0.3:50100"),
    ]
    state.remove(["10.0.0.2:50052"])
    assert state.endpoints() == ["10.0.0.3:50052"]


def test_a_worker_bound_beyond_loopback_is_warned_about():
    state = WorkersState(Settings())
    state.bind_changed("0.0.0.0", 50052)
    assert state.message[1] and "Never expose the RPC server to an open network" in state.message[0]
    state.bind_changed("  ", 0)  # empty: loopback
    assert state.message == ("", False)


def test_a_check_says_a_closed_port_in_plain_words():
    state = WorkersState(Settings(rpc_workers=[RpcWorker(endpoint="127.0.0.1:1")]))
    state.check()
    assert not state.checking and state.rows[0].status.startswith("connection refused")
    assert WorkersState(Settings()).check() is None  # no worker: nothing asked


def test_a_local_worker_started_failed_or_stopped_is_said():
    run = Held()
    pool = WorkerPool()
    state = WorkersState(Settings(), pool, run=run)
    state.start("", 0, "CPU, ", "")
    assert (
        state.starting
        and state.jobs.doing == "Starting an RPC worker"
        and state.message == ("starting ggml-rpc-server …", False)
    )
    run.fail(0, WorkerError("ggml-rpc-server not found"))
    assert not state.starting and state.message == (
        "could not start the worker: ggml-rpc-server not found",
        True,
    )
    worker = LocalWorker(
        WorkerSpec("127.0.0.1", 50999), Path("/nonexistent/ggml-rpc-server")
    )  # never started
    state.start("127.0.0.1", 50999, "", "")
    run.done(1, worker)
    assert state.rows == (WorkerRow("127.0.0.1:50999", "", "started here (pid None)"),)
    assert state.message[0].startswith("ggml-rpc-server listens on 127.0.0.1:50999")
    state.stop(["127.0.0.1:50999"])  # not in the pool: said where to stop it
    assert state.rows[0].status == "not started by this app (stop it where it runs)"
    WorkersState(Settings(), None, run=run).start("", 0, "", "")  # no pool here: nothing asked
    assert len(run.asked) == 2


def test_the_settings_form_makes_settings_with_empty_paths_found_automatically():
    """state.settings_form: a path left empty is None (found automatically), a folder is listed once, and an
    unknown key of the settings is kept."""
    from dataclasses import replace

    from llm_tuner.state.settings_form import edited_settings, form_of, with_folder

    original = Settings(
        model_folders=["/models"],
        llama_server_path="/opt/llama/llama-server",
        rpc_workers=[RpcWorker(endpoint="10.0.0.2:50052")],
        future_option="kept",
    )
    form = form_of(original)
    assert form.llama_server_path == "/opt/llama/llama-server" and form.data_dir == ""
    assert edited_settings(original, form) == original  # the form as filled changes nothing
    assert with_folder(form.model_folders, "/models") == ("/models",) and with_folder(("/a",), "") == ("/a",)
    edited = replace(
        form,
        model_folders=with_folder(form.model_folders, "/more"),
        llama_server_path="  ",
        data_dir=" /data ",
        ab_threshold_pct=3.5,
        rpc_workers=(),
    )
    new = edited_settings(original, edited)
    assert new.model_folders == ["/models", "/more"] and new.llama_server_path is None
    assert new.data_dir == "/data" and new.ab_threshold_pct == 3.5 and new.rpc_workers == []
    assert new.model_dump()["future_option"] == "kept"  # a key this version does not know: kept
