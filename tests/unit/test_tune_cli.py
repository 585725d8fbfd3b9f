"""`llm-tuner tune` / `tunes` argument handling (no server: errors come before anything launches)."""

import json

from llm_tuner.cli import main


def test_tune_refuses_bad_input_before_launching(capsys):
    assert main(["tune", "--knob", "nosuchflag=1,2", "--", "-m", "x.gguf"]) == 2
    assert "not a llama-server flag" in capsys.readouterr().err
    assert main(["tune", "--knob", "ub=64"]) == 2
    assert "nothing to tune" in capsys.readouterr().err
    assert main(["tune", "--resume", "42"]) == 2
    assert "no tune 42" in capsys.readouterr().err
    assert main(["tune", "--profile", "nosuchprofile"]) == 2
    assert "no saved profile" in capsys.readouterr().err


def test_tunes_list_is_empty_json_on_a_fresh_database(capsys):
    assert main(["tunes", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
