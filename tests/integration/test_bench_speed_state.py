"""BenchSpeed without Qt: a real benchmark (the CLI's, the real llama-server on a random model) is predicted with
the basis as it was, measured beside it with the roofline's share, and then refines the calibration kept for this
build only when the stored runs tell its costs apart: one run does not, and says so; after a probe, one run
refines the probe's calibration as little as it must."""

from __future__ import annotations

from llm_tuner.cli import main
from llm_tuner.core.bench_report import busy_warning
from llm_tuner.core.speed import SpeedCalibration
from llm_tuner.core.speed.calibrate import rows
from llm_tuner.core.speed.predict import resolve_cost
from llm_tuner.services import binaries
from llm_tuner.services.settings_store import database_path
from llm_tuner.services.speed import load_basis, stored_run_measurements
from llm_tuner.state.bench import BenchSpeed
from llm_tuner.state.speed import SpeedModel
from llm_tuner.store.db import open_engine
from llm_tuner.store.runs import RunRepository
from llm_tuner.store.speed import SpeedCalibrationRepo
from tests.support.random_gguf import write_qwen3_dense


def test_a_run_is_judged_against_its_prediction_and_does_not_calibrate_alone(tmp_path, monkeypatch, server_binary,
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
    # One configuration gives one equation for each of generation's and prefill's costs: not a calibration
    # (a fit would put the whole time on whichever cost it liked), and the run says so.
    assert state.refit_line.startswith("The calibration was not refined yet: 1 stored run tells apart only "), \
        state.refit_line
    assert "`llm-tuner estimate --speed --calibrate`" in state.refit_line
    assert calibrations.all() == [] and not speed.basis.calibrated

    state.show_run(run)  # from the History: no refit, the same basis
    assert state.refit_line == "" and state.basis_line == "Predicted with default costs, wider error (±35%)"

    # After a probe (here: its calibration stored as the probe would, every cost of this run at its default),
    # the same run refines it: the costs move as little as the run requires, and the run is then reproduced.
    basis = load_basis(engine)
    ms, _ = stored_run_measurements(engine, binaries.locate(binaries.SERVER).path, [], (), basis.threads)
    keys = {k for m in ms for eq in rows(m) for k in eq}
    probe = SpeedCalibration({k: resolve_cost(k.partition("@")[0], SpeedCalibration(), 2, None)[0] or 0.0
                              for k in keys}, build=basis.build, driver=basis.driver, source="probe of m.gguf",
                             error=0.12, threads=(2,))
    calibrations.save(probe)
    speed.load()
    state.after_run(run)
    assert state.refit_line.startswith("This run refined the calibration: "), state.refit_line
    assert "as little as 1 stored run require" in state.refit_line and "±12%" in state.refit_line
    cal = speed.basis.calibration
    assert speed.basis.calibrated and cal.source == "probe of m.gguf + 1 stored run"
    assert cal.costs != probe.costs and set(cal.costs) == keys
    for m in ms:  # one generation and one prefill measurement: each reproduced
        speed_, eq = (m.gen_tps, rows(m)[0]) if m.gen_tps else (m.prefill_tps, rows(m)[1])
        assert abs(1 / sum(v * cal.costs[k] for k, v in eq.items()) - speed_) / speed_ < 0.01
