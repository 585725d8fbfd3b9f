"""Issue 22: the advice knows what the header reader knows, a profile without a model is an error, a wrong paste
is refused, and launches and benchmarks refuse a profile with advice errors before a server starts (CLI
in-process, real files, real SQLite; the server binary is a real shell script that leaves a mark if it runs)."""

from __future__ import annotations

import json
import shlex

import pytest

from llm_tuner.cli import main
from llm_tuner.core.advice import advise
from llm_tuner.core.cmdline import import_command
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.services.preflight import look_at_model
from tests.support.random_gguf import write_qwen3_dense


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def _check(capsys, tmp_path, **profile):
    f = tmp_path / "p.json"
    f.write_text(json.dumps(profile))
    code, out, _ = cli(capsys, "profile", "check", f, "--json")
    return code, {a["id"]: a["message"] for a in json.loads(out)["advice"]}


# -- item 8: the advisor uses what the header reader knows --------------------------------------

def test_a_truncated_gguf_is_an_advice_error_not_no_known_traps(capsys, tmp_path):
    whole = tmp_path / "whole.gguf"
    write_qwen3_dense(whole)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(whole.read_bytes()[:600])  # a download that stopped inside the header
    code, advice = _check(capsys, tmp_path, model=str(cut))
    assert code == 1 and "model-file-unreadable" in advice
    assert advice["model-file-unreadable"].startswith(f"{cut} cannot be read as a GGUF model")
    assert "model-file-missing" not in advice
    code, advice = _check(capsys, tmp_path, model=str(whole))
    assert "model-file-unreadable" not in advice


def test_a_folder_named_like_a_model_is_a_folder_not_missing(capsys, tmp_path):
    folder = tmp_path / "x.gguf"
    folder.mkdir()
    code, advice = _check(capsys, tmp_path, model=str(folder))
    assert code == 1 and advice == {"model-file-unreadable": f"{folder} is a folder, not a model file"}


def test_the_window_and_the_cli_look_at_the_model_alike(tmp_path):
    folder = tmp_path / "x.gguf"
    folder.mkdir()
    look = look_at_model(str(folder))
    assert look.exists is True and "folder" in look.info.error
    assert look_at_model(str(tmp_path / "gone.gguf")).exists is False and look_at_model(None).exists is None


# -- item 2: no model is an error (router mode is chosen with its own flags) ------------------------

def test_a_profile_without_a_model_is_an_error_unless_it_sets_up_router_mode():
    for text in ("-c 4096 -ngl 99", "llama-server --port 8080"):
        assert "no-model" in {a.id for a in advise(import_command(text).profile) if a.severity == "error"}
    for router in ("--models-dir /models", "--models-preset presets.ini"):
        assert "no-model" not in {a.id for a in advise(import_command(router).profile)}
    assert "no-model" not in {a.id for a in advise(LaunchProfile(hf_repo="ggml-org/gemma-3-270m-GGUF"))}
    assert "no-model" not in {a.id for a in advise(LaunchProfile(env={"LLAMA_ARG_MODEL": "/m.gguf"}))}


# -- item 14: a wrong paste is refused, never saved --------------------------------------------------

@pytest.mark.parametrize("text", ["hello, this is my shopping list", "--frobnicate 3 --verbose-ish",
                                  "ls -la ~/models"])
def test_a_garbage_paste_exits_2_and_saves_nothing(capsys, text):
    code, out, err = cli(capsys, "profile", "import", "--name", "junk", "--command", text)
    assert code == 2 and ("not a llama-server command" in err or "nothing to import" in err)
    code, out, _ = cli(capsys, "profile", "list", "--json")
    assert "junk" not in {p["name"] for p in json.loads(out)["profiles"]}


def test_a_real_command_still_imports(capsys, tmp_path):
    model = tmp_path / "m.gguf"
    write_qwen3_dense(model)
    code, out, _ = cli(capsys, "profile", "import", "--json", "--command", f"llama-server -m {model} -c 2048")
    assert code == 0 and json.loads(out)["profile"]["ctx_size"] == 2048


# -- item 15 (and 2): launches and benchmarks refuse what the advice knows fails --------------------

@pytest.fixture
def marker_server(tmp_path):
    """A llama-server stand-in that records every run in a file next to it."""
    mark = tmp_path / "ran.txt"
    prog = tmp_path / "bin" / "llama-server"
    prog.parent.mkdir()
    prog.write_text(f'#!/bin/sh\necho "$@" >> {shlex.quote(str(mark))}\nexit 3\n')
    prog.chmod(0o755)
    return prog, mark


@pytest.mark.parametrize("args", [["-c", "4096"], ["-m", "MODEL", "-c", "abc"], ["-m", "MODEL", "-fa", "maybe"]])
def test_bench_refuses_a_profile_with_advice_errors_before_a_server_starts(capsys, tmp_path, marker_server, args):
    prog, mark = marker_server
    model = tmp_path / "m.gguf"
    write_qwen3_dense(model)
    args = [str(model) if a == "MODEL" else a for a in args]
    code, out, err = cli(capsys, "bench", "--binary", prog, "--reps", "1", "--", *args)
    assert code == 2 and "not started: llama-server would refuse or fail" in err and "--force" in err
    ran = mark.read_text().splitlines() if mark.exists() else []
    assert not [r for r in ran if "--help" not in r and "--version" not in r]  # no server was started
    assert "ConnectError" not in err


def test_run_refuses_no_model_with_the_reason_and_force_launches_anyway(capsys, tmp_path, marker_server):
    prog, mark = marker_server
    code, out, err = cli(capsys, "run", "--json-lines", "--no-samples", "--no-store", "--binary", prog,
                         "--", "-c", "4096")
    events = [json.loads(line) for line in out.splitlines()]
    assert code == 1 and events[-1]["event"] == "refused"
    assert [e["id"] for e in events[-1]["errors"]] == ["no-model"] and "no model" in err
    assert not any("-c 4096" in r for r in (mark.read_text().splitlines() if mark.exists() else []))
    code, out, err = cli(capsys, "run", "--json-lines", "--no-samples", "--no-store", "--binary", prog, "--force",
                         "--duration", "20", "--", "-c", "4096")
    assert any("-c 4096" in r for r in mark.read_text().splitlines())  # --force: it ran (and failed, exit 3)
    assert code == 1


def test_the_advice_plan_of_a_value_llama_server_refuses_is_none_and_not_logged(tmp_path, caplog):
    """Issue 38's plan for the advice on issue 35's bad values: no plan (the Plan and Start say the value), and
    no traceback in the log."""
    import logging

    from llm_tuner.core.devices import DeviceInventory, HostInfo
    from llm_tuner.services.preflight import plan_here

    model = write_qwen3_dense(tmp_path / "m.gguf", n_layer=2, n_embd=256)
    inventory = DeviceInventory(host=HostInfo(memory_total_mib=16384, memory_available_mib=12000))
    good = import_command(f"llama-server -m {model} -c 4096").profile
    info = look_at_model(str(model)).info
    assert plan_here(good, info, inventory)[0] is not None
    caplog.set_level(logging.WARNING)
    for tail in ("-c abc", "-ctk q9_0", "-fa maybe"):
        assert plan_here(import_command(f"llama-server -m {model} {tail}").profile, info, inventory) == (None, None)
    assert "Traceback" not in caplog.text and "planning memory" not in caplog.text
