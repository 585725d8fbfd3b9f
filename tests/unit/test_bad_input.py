"""Issue 15, bad input and faults: profile files, untrusted programs, empty keys, NUL bytes, pasted text.

The CLI runs in-process (`llm_tuner.cli.main`), with real files, the real settings file (an isolated data
folder, tests/conftest.py) and, where a program must not run, a real shell script that leaves a mark when it
does.
"""

from __future__ import annotations

import json
import os
import random
import shlex
from pathlib import Path

import pytest

from llm_tuner.cli import main
from llm_tuner.core import flags
from llm_tuner.core.advice import advise
from llm_tuner.core.cmdline import (
    PASTE_LIMIT_CHARS,
    import_command,
    posix_split,
    profile_to_argv,
    render_shell,
)
from llm_tuner.core.profile import LaunchProfile, nul_fields
from llm_tuner.services import binaries
from llm_tuner.services.settings_store import load_settings


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.fixture
def marker_program(tmp_path):
    """An executable that records every run (its arguments) in a file next to it, and fails."""
    mark = tmp_path / "ran.txt"
    prog = tmp_path / "bin" / "llama-server"
    prog.parent.mkdir()
    prog.write_text(f'#!/bin/sh\necho "$@" >> {shlex.quote(str(mark))}\nexit 3\n')
    prog.chmod(0o755)
    return prog, mark


def _profile_file(tmp_path, **data) -> Path:
    f = tmp_path / "shared.json"
    f.write_text(json.dumps(data))
    return f


# -- 1: one strict loader for profile files ------------------------------------------------------

@pytest.mark.server
def test_run_accepts_what_profile_import_prints_and_launches_its_model(capsys, tmp_path):
    code, out, _ = cli(capsys, "profile", "import", "--json", "--", "-m", tmp_path / "gone.gguf", "-c", "1024")
    f = tmp_path / "imported.json"
    f.write_text(out)  # the whole output of `profile import --json`, as a user saves it
    code, out, _ = cli(capsys, "run", "--json-lines", "--no-samples", "--no-store", "--duration", "60",
                       "--profile", f)
    plan = json.loads(out.splitlines()[0])
    assert plan["event"] == "plan" and f"--model {tmp_path / 'gone.gguf'}" in plan["command"]
    assert code == 1  # the server could not open the model: not a silent success


@pytest.mark.parametrize("data,key", [({"foo": 1}, "foo"), ({"model": "m.gguf", "ctx_sise": 4096}, "ctx_sise"),
                                      ({"ctx_size": "lots"}, "ctx_size")])
def test_run_refuses_unknown_keys_and_wrong_types_before_launching(capsys, tmp_path, data, key):
    f = _profile_file(tmp_path, **data)
    code, out, err = cli(capsys, "run", "--json-lines", "--no-samples", "--no-store", "--duration", "60",
                         "--profile", f)
    assert code == 2 and out == ""  # no plan event: nothing was launched
    assert repr(key) in err and str(f) in err and "Traceback" not in err


# -- 2: a program that came with a profile runs only once confirmed -------------------------------

def test_unconfirmed_program_is_never_run(capsys, tmp_path, marker_program):
    prog, mark = marker_program
    f = _profile_file(tmp_path, binary=str(prog), model=str(tmp_path / "m.gguf"))
    code, out, err = cli(capsys, "profile", "check", f, "--json")
    assert "not been confirmed" in err and "--trust-binary" in err
    code, out, err = cli(capsys, "profile", "command", f)
    assert shlex.split(out)[0] == str(prog) and "not been confirmed" in err
    code, out, err = cli(capsys, "run", "--json-lines", "--no-samples", "--no-store", "--profile", f)
    assert code == 2 and out == "" and "not been confirmed" in err
    code, out, err = cli(capsys, "bench", "--json", "--profile", f)
    assert code != 0 and "not been confirmed" in err
    with pytest.raises(binaries.UntrustedBinary):  # the benchmark runner refuses it too (the GUI's path)
        from llm_tuner.services.bench.runner import BenchRunner

        BenchRunner(repo=None, settings=load_settings())._binary(str(prog))
    assert not mark.exists()


def test_trusted_program_is_what_check_and_run_execute_until_the_file_changes(capsys, tmp_path, marker_program):
    prog, mark = marker_program
    f = _profile_file(tmp_path, binary=str(prog), model=str(tmp_path / "m.gguf"))
    code, _out, err = cli(capsys, "profile", "check", f, "--trust-binary")
    assert code == 2 and "--help failed" in err  # it ran (it is no llama-server, and says so)
    assert mark.read_text().split() == [flags.spelling("help")]
    assert [t.path for t in load_settings().trusted_binaries] == [str(prog.resolve())]
    mark.unlink()
    code, out, _err = cli(capsys, "run", "--json-lines", "--no-samples", "--no-store", "--duration", "60", "--force",
                          "--profile", f)  # confirmed: no --trust-binary needed any more (--force: m.gguf is absent)
    assert json.loads(out.splitlines()[0])["command"].startswith(str(prog))
    assert f"--model {tmp_path / 'm.gguf'}" in mark.read_text() and code == 1
    # the same path holding another file is not the program the user confirmed
    prog.write_text(prog.read_text() + "# changed\n")
    os.utime(prog, ns=(1, 1))
    assert not binaries.is_trusted(prog, load_settings())


def test_a_pasted_relative_program_is_kept_as_the_untrusted_binary():
    r = import_command("./build/bin/llama-server -m m.gguf")
    assert r.profile.binary == "./build/bin/llama-server" and any("confirm" in n for n in r.notes)
    assert import_command("llama-server -m m.gguf").profile.binary is None  # the configured one
    docker = import_command("docker run -p 8080:8080 ghcr.io/ggml-org/llama.cpp:server -m /m.gguf")
    assert docker.profile.binary is None


@pytest.mark.server
def test_found_programs_are_trusted_and_a_missing_one_is_an_error(tmp_path):
    settings = load_settings()
    embedded = binaries.locate(binaries.SERVER, settings)
    assert embedded is not None and binaries.is_trusted(embedded.path, settings)
    with pytest.raises(binaries.BinaryError, match="does not exist"):
        binaries.require_trusted(tmp_path / "nope", settings)


# -- 3: an empty API key is no key ----------------------------------------------------------------

def test_empty_api_key_gets_the_exposure_warning_and_is_not_shown_masked(capsys):
    r = import_command(["--host", "0.0.0.0", "--api-key", "", "-m", "m.gguf"])
    assert "exposed-without-api-key" in {a.id for a in advise(r.profile)}
    argv, env = profile_to_argv(r.profile)
    shown = render_shell(argv, env)
    assert flags.MASK not in shown and shlex.split(shown)[-1] == ""
    assert flags.mask_argv(["--api-key=", "x"]) == ["--api-key=", "x"]
    assert flags.mask_env({flags.API_KEY_ENV: ""}) == {flags.API_KEY_ENV: ""}
    code, out, _err = cli(capsys, "profile", "import", "--", "--host", "0.0.0.0", "--api-key", "")
    assert flags.MASK not in out


# -- 9: a NUL byte in a profile field ---------------------------------------------------------------

def test_nul_byte_is_refused_naming_the_field(capsys, tmp_path):
    f = _profile_file(tmp_path, model="a\0b.gguf", env={"X": "1"})
    for argv in (["run", "--json-lines", "--no-store", "--profile", f], ["profile", "command", f]):
        code, out, err = cli(capsys, *argv)
        assert code == 2 and "\0" not in out and out == ""
        assert "'model'" in err and "NUL" in err and "Traceback" not in err
    assert nul_fields(LaunchProfile(env={"A": "x\0"}, extra_args=("ok", "\0"))) == ["env.A", "extra_args[1]"]


# -- 10: pasted text: linear tokenizer, bounded ---------------------------------------------------

def test_posix_split_is_shlex_split():
    rng = random.Random(15)
    alphabet = " \t\n\\'\"ab$~#"
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        try:
            want = shlex.split(text)
        except ValueError as exc:
            want = str(exc)
        try:
            got = posix_split(text)
        except ValueError as exc:
            got = str(exc)
        assert got == want, text


def test_profile_import_refuses_a_huge_paste(capsys):
    code, _out, err = cli(capsys, "profile", "import", "--command", "llama-server -m " + "a" * PASTE_LIMIT_CHARS)
    assert code == 2 and "KiB" in err


# -- 11: profile import's exit code; issue 12 item 9: GPU rules from the CLI ---------------------

def test_profile_import_exits_1_when_its_advice_holds_an_error(capsys, tmp_path, demo_model):
    code, out, _err = cli(capsys, "profile", "import", "--json", "--", "-m", tmp_path / "typo.gguf")
    assert code == 1 and "model-file-missing" in {a["id"] for a in json.loads(out)["advice"]}
    code, _out, _err = cli(capsys, "profile", "import", "--json", "--", "-m", demo_model)
    assert code == 0


def test_profile_check_knows_the_machines_gpus(capsys, tmp_path, demo_model):
    from llm_tuner.services.telemetry.inventory import detect_inventory

    f = _profile_file(tmp_path, model=str(demo_model), gpu_layers=99)
    code, out, _err = cli(capsys, "profile", "check", f, "--json")
    ids = {a["id"] for a in json.loads(out)["advice"]}
    assert ("no-gpu-for-layers" in ids) == (len(detect_inventory().devices) == 0)


def test_a_confirmation_made_by_another_process_counts_and_is_kept(tmp_path, marker_program):
    """The app holds its Settings in memory; `--trust-binary` on the CLI meanwhile must count for it, and the
    app's own next confirmation must not drop the CLI's."""
    prog, _mark = marker_program
    other = tmp_path / "other-server"
    other.write_text(prog.read_text())
    other.chmod(0o755)
    app_settings = load_settings()  # what the running app holds
    assert not binaries.is_trusted(prog, app_settings)
    binaries.trust_binary(prog)  # the CLI, from its own loaded settings
    assert binaries.is_trusted(prog, app_settings)
    binaries.trust_binary(other, app_settings)  # the app confirms another program and saves its settings
    assert {t.path for t in load_settings().trusted_binaries} == {str(prog.resolve()), str(other.resolve())}


def test_an_unreadable_settings_file_is_kept_aside_and_a_command_warns_of_it_once(capsys):
    from llm_tuner.app import main as app_main
    from llm_tuner.services.settings_store import settings_path

    path = settings_path()
    path.write_text("{not json", encoding="utf-8")
    assert app_main(["database", "check"]) == 0
    err = capsys.readouterr().err
    assert f"warning: the settings file {path} could not be read" in err and "default settings are in use" in err
    assert path.with_suffix(".json.broken").read_text(encoding="utf-8") == "{not json"
    assert app_main(["database", "check"]) == 0 and "warning" not in capsys.readouterr().err
