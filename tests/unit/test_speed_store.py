"""speed_calibrations: a calibration holds for the build and the driver it was measured with."""

from __future__ import annotations

from sqlalchemy import text

from llm_tuner.core.speed import SpeedCalibration
from llm_tuner.store.db import open_engine
from llm_tuner.store.speed import SpeedCalibrationRepo


def test_the_newest_calibration_of_this_build_and_driver_is_used_and_another_builds_is_not(tmp_path):
    repo = SpeedCalibrationRepo(open_engine(tmp_path / "h.sqlite"))
    old = SpeedCalibration({"read:Host@4": 0.05}, build="f:a h:b p:1", source="probe 1", threads=(4,))
    new = SpeedCalibration({"read:Host@4": 0.04}, build="f:a h:b p:1", source="probe 2", threads=(4,))
    other = SpeedCalibration({"read:Host@4": 0.01}, build="f:c h:b p:1", source="other build", threads=(4,))
    repo.save(old)
    new_id = repo.save(new)
    repo.save(other)
    got = repo.latest("f:a h:b p:1")
    assert got is not None and got.id == new_id and got.calibration == new
    assert repo.latest("f:a h:b p:1", driver="580.159.04") is None  # a driver change: not calibrated
    assert repo.latest("f:z h:z p:9") is None


def test_a_record_this_version_cannot_read_is_skipped_for_the_older_one(tmp_path):
    engine = open_engine(tmp_path / "h.sqlite")
    repo = SpeedCalibrationRepo(engine)
    good = SpeedCalibration({"read:Host@2": 0.1}, build="b", source="good", threads=(2,))
    repo.save(good)
    bad_id = repo.save(SpeedCalibration({"read:Host@2": 0.2}, build="b", source="bad", threads=(2,)))
    with engine.begin() as conn:
        conn.execute(text("UPDATE speed_calibrations SET calibration_json = '{\"costs\": {\"x\": \"fast\"}}' "
                          "WHERE id = :i"), {"i": bad_id})
    got = repo.latest("b")
    assert got is not None and got.calibration.source == "good"


def test_a_calibration_fitted_by_an_older_speed_model_is_not_used(tmp_path):
    """Its costs meant other terms (core.speed.predict.MODEL_VERSION): the build counts as not calibrated."""
    import json

    from llm_tuner.core.speed.predict import calibration_to_json

    engine = open_engine(tmp_path / "h.sqlite")
    repo = SpeedCalibrationRepo(engine)
    cal_id = repo.save(SpeedCalibration({"read:Host@2": 0.1, "link": 0.09}, build="b", source="v1", threads=(2,)))
    assert repo.latest("b") is not None
    v1 = {k: v for k, v in calibration_to_json(repo.latest("b").calibration).items() if k != "model"}
    with engine.begin() as conn:
        conn.execute(text("UPDATE speed_calibrations SET calibration_json = :j WHERE id = :i"),
                     {"j": json.dumps(v1), "i": cal_id})
    assert repo.latest("b") is None and repo.all() == []


def test_a_refit_starts_from_the_newest_probe_so_refits_do_not_compound(tmp_path):
    """The refit after each benchmark refines over every stored run: it must start from the probe, not from the
    previous refit (else the prior's weight wears off run by run). A record stored before `server_runs` existed
    says its count in its source."""
    engine = open_engine(tmp_path / "h.sqlite")
    repo = SpeedCalibrationRepo(engine)
    probe_id = repo.save(SpeedCalibration({"read:Host@4": 0.05}, build="b", source="probe of a.gguf", threads=(4,)))
    repo.save(SpeedCalibration({"read:Host@4": 0.06}, build="b", source="probe of a.gguf + 3 stored runs",
                               threads=(4,), server_runs=3))
    old_refit = repo.save(SpeedCalibration({"read:Host@4": 0.07}, build="b", source="probe of a.gguf + 2 stored runs",
                                           threads=(4,)))
    with engine.begin() as conn:  # as stored before the field: no "server_runs" in its JSON
        conn.execute(text("UPDATE speed_calibrations SET calibration_json = json_remove(calibration_json, "
                          "'$.server_runs') WHERE id = :i"), {"i": old_refit})
    newest = repo.latest("b")
    assert newest is not None and newest.id == old_refit and newest.calibration.server_runs == 2
    base = repo.latest("b", probe_only=True)
    assert base is not None and base.id == probe_id and base.calibration.server_runs == 0
