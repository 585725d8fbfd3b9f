"""Issue 22 item 23: `estimate` as people and scripts read it: a plan that does not fit exits 1 (text and JSON),
--check and --check-fit print readable text (never a Python dict, never nothing)."""

from __future__ import annotations

import json

import pytest

from llm_tuner.cli import main
from llm_tuner.cli.plan import check_text
from tests.support.random_gguf import write_qwen3_dense


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "m.gguf"
    write_qwen3_dense(path)
    return path


def test_a_plan_that_does_not_fit_exits_1_and_one_that_fits_exits_0(capsys, model):
    assert main(["estimate", "--devices", "Host=1", "--", "-m", str(model), "-c", "512"]) == 1
    cap = capsys.readouterr()
    assert "does NOT fit: Host" in cap.err
    assert main(["estimate", "--json", "--devices", "Host=1", "--", "-m", str(model), "-c", "512"]) == 1
    assert json.loads(capsys.readouterr().out)["devices"][0]["fits"] is False
    assert main(["estimate", "--json", "--devices", "Host=65536", "--", "-m", str(model), "-c", "512"]) == 0


def test_check_fit_says_something_in_text_mode(capsys, model):
    main(["estimate", "--check-fit", "--devices", "Host=65536", "--", "-m", str(model), "-c", "512"])
    out = capsys.readouterr().out
    assert "llama-fit-params" in out and "{" not in out


def test_check_prints_text_not_a_python_dict():
    check = {"devices": [{"name": "Host", "model_mib": 270.6, "kv_mib": 18.0, "compute_mib": 4.3, "output_mib": 1.0,
                          "diff_mib": {"model_mib": 0.4, "kv_mib": 0.0, "compute_mib": -1.2, "output_mib": 0.0}}],
             "seconds": 1.5}
    lines = check_text(check)
    assert lines[0].startswith("llama.cpp (a real load, 1.5 s)")
    assert lines[1].split() == ["Host", "model", "271", "(+0),", "kv", "18", "(+0),", "compute", "4", "(-1),",
                                "output", "1", "(+0)"]
    assert not any("{" in line or "'" in line for line in lines)
    assert check_text({"error": "llama-server did not load: x"}) == ["llama.cpp check: llama-server did not load: x"]
