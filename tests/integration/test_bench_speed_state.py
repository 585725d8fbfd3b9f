"""BenchSpeed without Qt: a real benchmark (the CLI's, the real llama-server on a random model) is predicted with
the basis as it was, measured beside it with the roofline's share, and then refines the calibration kept for this
build; a second run is predicted with the refined one."""

from __future__ import annotations

from llm_tuner.cli import main
from llm_tuner.core.bench_report import busy_warning
from llm_tuner.services.settings_store import database_path
from llm_tuner.services.speed import load_basis
from llm_tuner.state.bench import BenchSpeed
from llm_tuner.state.speed import SpeedModel
from llm_tuner.store.db import open_engine
from llm_tuner.store.runs import RunRepository
from llm_tuner.store.speed import SpeedCalibrationRepo
from tests.support.random_gguf import write_qwen3_dense


def test_a_run_is_judged_against_its_prediction_and_refines_the_calibration(tmp_path, monkeypatch, server_binary,
                                                                            capsys):
    monkeypatch.setenv("LLM_TUNER_DATA_DIR", str(tmp_path / "data"))
    model = write_qwen3_dense(tmp_path / "m.gguf", n_layer=2, n_embd=256)
    common = ["--prompt-tokens", "64", "--gen-tokens", "16", "--reps", "2", "--json"]
    assert main(["bench", *common, "--", "-m", str(model), "-t", "2", "-c", "1024"]) == 0
    capsys.readouterr()
    engine = open_engine(database_path())
    run = RunRepository(engine).list_runs()[0]
    speed = SpeedModel(lambda: load_basis(engine))
    state = BenchSpeed(speed, engine)
    events: list[str] = []
    state.add_callback(lambda what, *_d: events.append(what))

    state.after_run(run)
    assert events == ["speed"] and state.run_id == run.id
    [c] = state.comparisons
    assert c["prompt_tokens"] == 64 and c["gen_tps"] > 0 and c["gen_predicted"] > 0 and c["prefill_predicted"] > 0
    assert c["text"].startswith("prompt 64: gen ") and "predicted" in c["text"] and "prefill" in c["text"]
    assert state.basis_line == "Predicted with default costs, wider error (±35%)"  # nothing calibrated before
    calibrations = SpeedCalibrationRepo(engine)
    if busy_warning(run):  # other processes were busy while it measured (a shared machine): it teaches nothing
        assert state.refit_line == ("This run does not refine the calibration: other processes were busy or a GPU "
                                    "throttled while it measured")
        assert calibrations.all() == [] and not speed.basis.calibrated
        return
    assert state.refit_line.startswith("This run refined the calibration: now fitted over 1 stored run (±")
    stored = calibrations.latest(speed.basis.build, speed.basis.driver)
    assert stored is not None and stored.calibration.source == "1 stored run"
    assert speed.basis.calibrated and speed.basis.calibration_id == stored.id

    state.show_run(run)  # from the History: the refined basis, no new refit
    assert state.refit_line == "" and state.basis_line.startswith("Predicted with calibrated on 1 stored run (")
    assert len(calibrations.all()) == 1
