"""`llm-tuner profile import|command|check` as a script would use them (in-process, real SQLite)."""

from __future__ import annotations

import json
import shlex

from llm_tuner.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_import_argv_saves_and_command_prints_it(capsys):
    code, out = run(capsys, "profile", "import", "--json", "--name", "fork", "--",
                    "-m", "Q.gguf", "-c", "262000", "-tbq", "4", "--mtp-draft", "3", "-ngl", "99", "-t", "8")
    data = json.loads(out)
    assert set(data) >= {"profile", "argv", "env", "unknown", "advice"}
    assert code == 1 and "model-file-missing" in {a["id"] for a in data["advice"]}  # Q.gguf is not here
    assert data["argv"] == ["--model", "Q.gguf", "--ctx-size", "262000", "--n-gpu-layers", "99", "--threads", "8",
                            "-tbq", "4", "--mtp-draft", "3"]
    assert data["unknown"] == ["-tbq", "4", "--mtp-draft", "3"]
    assert data["saved"]["version"] == 1
    code, out = run(capsys, "profile", "command", "fork")
    assert shlex.split(out)[1:] == data["argv"]


def test_import_command_string_masks_key_in_shell_line_and_check_reports(capsys, tmp_path):
    text = "LLAMA_ARG_CACHE_TYPE_V=q4_0 ./llama-server -m x.gguf --host 0.0.0.0 --api-key abc --mlock -ctk q8_0"
    code, out = run(capsys, "profile", "import", "--json", "--command", text)
    data = json.loads(out)
    assert data["env"] == {"LLAMA_ARG_CACHE_TYPE_V": "q4_0"}
    assert {a["id"] for a in data["advice"]} >= {"removed-flag", "kv-type-mismatch"}
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"profile": data["profile"]}))
    code, out = run(capsys, "profile", "command", str(f))
    assert "abc" not in out and "--api-key" in out
    code, out = run(capsys, "profile", "check", str(f), "--json")
    assert code == 1 and "removed-flag" in {a["id"] for a in json.loads(out)["advice"]}


def test_check_unknown_name_is_a_clear_error(capsys):
    assert main(["profile", "check", "nope", "--json"]) == 2
    assert "no saved profile named 'nope'" in capsys.readouterr().err


def test_check_reads_the_model_file_for_model_facts(capsys, tmp_path, demo_model):
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"model": str(demo_model), "ctx_size": 65536}))
    code, out = run(capsys, "profile", "check", str(f), "--json")
    assert code == 0 and [a["id"] for a in json.loads(out)["advice"]] == ["ctx-over-trained"]


def test_check_says_when_the_model_file_is_missing(capsys, tmp_path):
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"model": str(tmp_path / "typo.gguf")}))
    code, out = run(capsys, "profile", "check", str(f), "--json")
    assert code == 1 and [a["id"] for a in json.loads(out)["advice"]] == ["model-file-missing"]


def test_import_and_check_show_the_cliffs(capsys, tmp_path, demo_model):
    """Issue 38: `--cache-ram 65536` was "No known traps"; the prompt cache now counts against the host RAM this
    machine's plan leaves, and the other cliffs show on a real command line."""
    code, out = run(capsys, "profile", "import", "--json", "--", "-m", str(demo_model), "-c", "4096",
                    "--cache-ram", "10000000", "-np", "4", "-sm", "tensor", "-ngl", "-5")
    ids = {a["id"] for a in json.loads(out)["advice"]}
    assert {"cache-ram-crowds-host", "parallel-without-kvu", "split-tensor-no-fit", "ngl-negative"} <= ids
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"profile": json.loads(out)["profile"]}))
    code, out = run(capsys, "profile", "check", str(f))
    assert "[cache-ram-crowds-host]" in out and "server-task.h" in out and "[ngl-negative]" in out


def test_check_reads_the_binarys_fa_quants_once_it_has_started(capsys, tmp_path, demo_model):
    """Before the binary has logged its system_info line the advice says "unknown"; after, what it lacks."""
    from llm_tuner.services import device_ids
    from tests.conftest import DATA

    binary = tmp_path / "llama-server"  # the profile's own program (never run here: its log is what counts)
    binary.write_bytes(b"#!/bin/sh\n")
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"profile": {"model": str(demo_model), "cache_type_k": "q5_1", "cache_type_v": "q5_1",
                                         "binary": str(binary), "devices": ["CUDA0"]}}))  # a GPU, here or not
    code, out = run(capsys, "profile", "check", str(f), "--json")
    [a] = [a for a in json.loads(out)["advice"] if a["id"] == "kv-type-gpu-attention"]
    assert a["severity"] == "info" and "unknown until it has started" in a["message"]
    device_ids.remember_from_log(binary, (DATA / "rpc" / "rpc-rpc0-rpc1-ts1-1.log").read_text())  # a CUDA build's
    assert device_ids.cached_fa_quants(binary) == ("q4_0-q4_0", "q8_0-q8_0", "f16-f16", "bf16-bf16")
    code, out = run(capsys, "profile", "check", str(f), "--json")
    [a] = [a for a in json.loads(out)["advice"] if a["id"] == "kv-type-gpu-attention"]
    assert a["severity"] == "warning" and "FA_QUANTS = q4_0-q4_0" in a["message"]
    device_ids.remember_from_log(binary, (DATA / "rpc" / "cpu-two-workers-ngl10.log").read_text())  # no CUDA
    code, out = run(capsys, "profile", "check", str(f), "--json")
    assert "kv-type-gpu-attention" not in {a["id"] for a in json.loads(out)["advice"]}
