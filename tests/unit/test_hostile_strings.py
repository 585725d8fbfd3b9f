"""Issue 25, groups 6 and 7: strings from files never act on the terminal or the shell.

6. A GGUF's `general.name` with an escape sequence (one that retitles the terminal, one that clears it) is printed
   escaped by `model info` and `models scan` (core.units.printable, the one helper of every text printer).
7. A profile whose environment variable name is not a name (`A=1 $(touch X) B`) is refused when a file is loaded
   (bench, run) and imported, with one clear line; render_shell never writes such a name unquoted, so a copied
   line run by a real shell runs nothing of it.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from llm_tuner.cli import main
from llm_tuner.core.cmdline import render_shell
from llm_tuner.core.units import printable
from tests.support.random_gguf import write_qwen3_dense

EVIL_NAME = "Nice\x1b]0;pwned\x07 model\x1b[2J\x1b[3J\x1bc\r\u202eevil"


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.fixture(scope="module")
def evil_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("evil")
    return write_qwen3_dense(d / "evil.gguf", n_layer=1, n_embd=64, n_ff=64, n_head=1, n_head_kv=1, head_dim=64,
                             name=EVIL_NAME)


def _no_controls(text: str) -> None:
    for ch in ("\x1b", "\x07", "\r", "\u202e"):
        assert ch not in text, repr(ch)


def test_model_info_prints_an_escape_in_general_name_escaped(capsys, evil_model):
    code, out, err = cli(capsys, "model", "info", evil_model)
    assert code == 0
    _no_controls(out + err)
    assert "Nice\\x1b]0;pwned\\x07 model\\x1b[2J" in out  # the user sees what the file holds


def test_models_scan_prints_an_escape_in_general_name_escaped(capsys, evil_model):
    code, out, err = cli(capsys, "models", "scan", "--no-cache", evil_model.parent)
    assert code == 0
    _no_controls(out + err)
    assert "\\x1bc\\r\\u202eevil" in out


def test_json_output_keeps_the_name_exact(capsys, evil_model):
    code, out, _ = cli(capsys, "model", "info", "--json", evil_model)
    assert code == 0 and json.loads(out)["name"] == EVIL_NAME
    _no_controls(out)  # json.dumps escapes them itself


def test_printable_leaves_ordinary_text_alone():
    assert printable("Gemma 3 270M · Q4_K_M · 日本語 é") == "Gemma 3 270M · Q4_K_M · 日本語 é"


# -- 7 ---------------------------------------------------------------------------------------------

BAD_NAME = "A=1 $(touch {mark}) B"


def test_a_copied_command_with_a_bad_variable_name_runs_nothing_in_a_real_shell(tmp_path):
    mark = tmp_path / "X"
    line = render_shell(["--version"], {BAD_NAME.format(mark=mark): "v", "GOOD_NAME": "1 $(touch y)"},
                        binary="true")
    subprocess.run(["sh", "-c", line], cwd=tmp_path, capture_output=True, timeout=30)
    assert not mark.exists() and not (tmp_path / "y").exists()
    assert "GOOD_NAME='1 $(touch y)'" in line  # good names stay assignments


@pytest.mark.parametrize("command", ["bench", "run"])
def test_a_profile_file_with_a_bad_variable_name_is_refused_in_one_line(capsys, tmp_path, command):
    mark = tmp_path / "X"
    f = tmp_path / "shared.json"
    f.write_text(json.dumps({"model": str(tmp_path / "m.gguf"), "env": {BAD_NAME.format(mark=mark): "v"}}))
    argv = ["bench", "--profile", f] if command == "bench" else ["run", "--json-lines", "--no-samples",
                                                                 "--no-store", "--profile", f]
    code, out, err = cli(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "is not an environment variable name" in err and str(f) in err
    assert not mark.exists()
