"""`llm-tuner estimate --speed` with the real binary: the demo model and a random MoE model, uncalibrated and
after `--calibrate` (the real llama-bench on two random models, kept in the history for this build), and bad
`--bandwidth` values (one clear message, exit 2)."""

from __future__ import annotations

import json

import pytest

from llm_tuner.cli import main
from llm_tuner.services import speed
from tests.support.random_gguf import write_qwen3_dense, write_qwen3_moe


@pytest.fixture
def history(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_TUNER_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Two random dense models (two sizes), written once for the module: the tests only read them."""
    folder = tmp_path_factory.mktemp("models")
    return (write_qwen3_dense(folder / "small.gguf", n_layer=2, n_embd=256),
            write_qwen3_dense(folder / "large.gguf", n_layer=6, n_embd=512, n_ff=1024))


def _speed(capsys, argv: list[str]) -> dict:
    code = main(["estimate", "--json", *argv])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    return json.loads(out)["speed"]


def test_speed_of_the_demo_model_and_of_a_moe_uncalibrated(capsys, history, demo_model, server_binary, tmp_path):
    demo = _speed(capsys, ["--speed", "--depth", "2048", "--prompt", "256", "--", "-m", str(demo_model),
                           "-c", "4096", "-t", "2"])
    assert demo["gen_tps"] > 0 and demo["prefill_tps"] > 0 and demo["ttft_ms"] > 0
    assert demo["threads"] == 2 and demo["depth"] == 2048 and demo["prompt_tokens"] == 256
    host = demo["devices"][0]
    assert host["name"] == "Host" and host["mib_per_token"] > 100  # Gemma 3's tied head is read in full
    assert host["rate_source"] == "default" and demo["expected_error"] >= 0.3
    assert demo["calibration"]["calibrated"] is False and demo["calibration"]["build"].startswith("f:")
    moe_path = write_qwen3_moe(tmp_path / "moe.gguf", n_layer=4, n_embd=256, n_ff_exp=128, n_expert=8,
                               n_expert_used=2)
    moe = _speed(capsys, ["--speed", "--", "-m", str(moe_path), "-c", "2048"])
    assert moe["gen_tps"] > 0 and moe["devices"][0]["bytes_per_token"] > 0
    # the text form says the same in words
    assert main(["estimate", "--speed", "--", "-m", str(moe_path), "-c", "2048"]) == 0
    text = capsys.readouterr().out
    assert "generation" in text and "t/s" in text and "calibrated on" in text


def test_calibrate_measures_keeps_and_reuses_a_calibration(capsys, history, server_binary, models, monkeypatch):
    # a short probe: the mechanism, not the figures (those are benchmarks/speed_model.py's)
    monkeypatch.setattr(speed, "PROBE_DEPTH", 128)
    monkeypatch.setattr(speed, "PROBE_PROMPT", 32)
    monkeypatch.setattr(speed, "PROBE_GEN", 4)
    monkeypatch.setattr(speed, "PROBE_REPS", 1)
    small, large = models
    first = _speed(capsys, ["--calibrate", "--calibrate-with", str(large), "--", "-m", str(small), "-c", "1024",
                            "-t", "2"])
    cal = first["calibration"]
    assert cal["calibrated"] and cal["id"] is not None and "small.gguf + large.gguf" in cal["source"]
    assert "probe of small.gguf + large.gguf" in first["calibrated_on"]
    from llm_tuner.services.settings_store import database_path
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.speed import SpeedCalibrationRepo

    stored = SpeedCalibrationRepo(open_engine(database_path())).all()[-1].calibration
    pairs = {k.split(":")[2].split("@")[0] for k in stored.costs if k.startswith("attn_gen:Host:")}
    assert pairs == {"f16/f16", "f16/q8_0", "q8_0/f16", "q8_0/q8_0", "q4_0/q4_0"}  # the common small cache too
    again = _speed(capsys, ["--speed", "--", "-m", str(large), "-c", "1024", "-t", "2"])
    assert again["calibration"]["id"] == cal["id"]  # kept in the history for this build and used
    assert "probe of" in again["calibrated_on"]
    by_hand = _speed(capsys, ["--bandwidth", "Host=1", "--", "-m", str(large), "-c", "1024", "-t", "2"])
    assert by_hand["gen_tps"] < again["gen_tps"]  # 1 GB/s is slower than anything measured
    host = by_hand["devices"][0]
    assert host["read_gbps"] == 1.0 and host["rate_source"] == "set by hand" and "--bandwidth Host=1" in by_hand["calibrated_on"]


@pytest.mark.parametrize("value, words", [
    ("CUDA0", "is not NAME=GB/s"), ("Host=fast", "'fast' is not a number of GB/s"),
    ("Host=-5", "must be a positive number"), ("Host=0", "must be a positive number"),
    ("Host=inf", "must be a positive number"), ("GPU7=100", "'GPU7' is not a device of this plan"), (",", "give NAME=GB/s"),
])
def test_bad_bandwidth_values_give_one_clear_message(capsys, history, server_binary, models, value, words):
    model = models[0]
    code = main(["estimate", "--bandwidth", value, "--", "-m", str(model), "-c", "512"])
    err = capsys.readouterr().err
    assert code == 2
    assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_calibrate_from_runs_fits_the_benchmarks_of_this_server(capsys, history, server_binary, models, tmp_path,
                                                                monkeypatch):
    """Two real benchmarks (two model sizes) in the history; --calibrate-from-runs fits them and predicts them back."""
    small, large = models
    common = ["--prompt-tokens", "64,256", "--gen-tokens", "16", "--reps", "2", "--json"]
    for m in (small, large):
        assert main(["bench", *common, "--", "-m", str(m), "-t", "2", "-c", "1024"]) == 0
    capsys.readouterr()
    assert main(["estimate", "--json", "--calibrate-from-runs", "--", "-m", str(large), "-c", "1024", "-t", "2"]) == 0
    cap = capsys.readouterr()
    got = json.loads(cap.out)["speed"]
    assert got["calibration"]["calibrated"] and "2 stored runs" in got["calibration"]["source"]
    assert got["devices"][0]["rate_source"] == "calibrated"  # the host's read rate comes from the runs
    assert "2 stored runs" in got["calibrated_on"]
    # nothing usable: one clear message
    monkeypatch.setenv("LLM_TUNER_DATA_DIR", str(tmp_path / "empty"))
    assert main(["estimate", "--calibrate-from-runs", "--", "-m", str(large), "-c", "1024"]) == 2
    assert "no benchmark run in the history" in capsys.readouterr().err


def test_calibrate_from_runs_alone_refines_a_stored_calibration_and_refuses_without_one(capsys, history,
                                                                                        server_binary, models):
    """One benchmark cannot determine every cost: without a stored calibration --calibrate-from-runs refuses (one
    clear message); with one (a probe's, stored for this build) it moves that one as little as the run requires."""
    from llm_tuner.core.speed import SpeedCalibration
    from llm_tuner.services.settings_store import database_path
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.speed import SpeedCalibrationRepo

    small, _ = models
    assert main(["bench", "--prompt-tokens", "64", "--gen-tokens", "16", "--reps", "2", "--json", "--",
                 "-m", str(small), "-t", "2", "-c", "1024"]) == 0
    capsys.readouterr()
    argv = ["estimate", "--json", "--calibrate-from-runs", "--", "-m", str(small), "-c", "1024", "-t", "2"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "tell apart only generation" in err and "no calibration of this build is stored" in err
    build, driver, _ = speed.calibration_identity()
    probe = SpeedCalibration({"read:Host@2": 1 / 5, "fixed:cpu@2": 0.002, "pfixed:cpu@2": 0.01,
                              "compute:Host@2": 1 / 20, "attn_gen:Host:f16/f16@2": 1 / 5,
                              "attn_prefill:Host:f16/f16@2": 1 / 5}, build=build, driver=driver,
                             source="probe of a.gguf", error=0.15, threads=(2,))
    SpeedCalibrationRepo(open_engine(database_path())).save(probe)
    assert main(argv) == 0
    cap = capsys.readouterr()
    got = json.loads(cap.out)["speed"]
    assert "refined: " in cap.err and "moved as little as the runs require" in cap.err
    assert got["calibration"]["source"] == "probe of a.gguf + 1 stored run"
    assert got["expected_error"] >= 0.15  # a run it was fitted to reproduces it: the probe's error stands
