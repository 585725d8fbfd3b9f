"""speed_calibrations: the speed model's device rates measured on this machine (core.speed), per build and driver.

One row per calibration (a probe, a fit over stored runs, or rates set by hand). A calibration holds for the
build and the GPU driver it was measured with: `latest` returns the newest one of the build and driver in use,
so a new build or driver finds none (the prediction then says it is uncalibrated) until it is measured again.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from sqlalchemy import Engine, Float, Integer, String, Text, delete, select
from sqlalchemy.orm import Mapped, mapped_column

from llm_tuner.core.speed import SpeedCalibration
from llm_tuner.core.speed.predict import calibration_from_json, calibration_to_json
from llm_tuner.store.base import Base
from llm_tuner.store.db import session_scope


class SpeedCalibrationRow(Base):
    __tablename__ = "speed_calibrations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    build: Mapped[str] = mapped_column(String(128), nullable=False, index=True)
    driver: Mapped[str] = mapped_column(String(128), nullable=False, default="")
    source: Mapped[str] = mapped_column(String(512), nullable=False, default="")
    created_at: Mapped[float] = mapped_column(Float, nullable=False)
    calibration_json: Mapped[str] = mapped_column(Text, nullable=False)


@dataclass(frozen=True)
class StoredCalibration:
    id: int
    created_at: float
    calibration: SpeedCalibration


class SpeedCalibrationRepo:
    """Save and find speed calibrations; returns core models, never rows."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def save(self, cal: SpeedCalibration) -> int:
        with session_scope(self.engine) as s:
            row = SpeedCalibrationRow(build=cal.build, driver=cal.driver, source=cal.source[:512],
                                      created_at=time.time(), calibration_json=json.dumps(calibration_to_json(cal)))
            s.add(row)
            s.flush()
            return int(row.id)

    def latest(self, build: str, driver: str = "", *, probe_only: bool = False) -> StoredCalibration | None:
        """The newest calibration measured with this build and driver (None: this build is not calibrated).
        `probe_only`: the newest no stored server run has refined (a probe's, or rates set by hand on one): what
        a refit over the stored runs starts from, so that refits do not compound."""
        with session_scope(self.engine) as s:
            rows = s.execute(select(SpeedCalibrationRow.id, SpeedCalibrationRow.created_at,
                                    SpeedCalibrationRow.calibration_json)
                             .where(SpeedCalibrationRow.build == build, SpeedCalibrationRow.driver == driver)
                             .order_by(SpeedCalibrationRow.id.desc())).all()
        for row_id, created, text in rows:
            try:
                cal = calibration_from_json(json.loads(text))
            except (ValueError, json.JSONDecodeError):
                continue  # a record this version cannot read: the next older one
            if probe_only and cal.server_runs:
                continue
            return StoredCalibration(int(row_id), float(created), cal)
        return None

    def all(self) -> list[StoredCalibration]:
        with session_scope(self.engine) as s:
            rows = s.execute(select(SpeedCalibrationRow.id, SpeedCalibrationRow.created_at,
                                    SpeedCalibrationRow.calibration_json)
                             .order_by(SpeedCalibrationRow.id)).all()
        out = []
        for row_id, created, text in rows:
            try:
                out.append(StoredCalibration(int(row_id), float(created), calibration_from_json(json.loads(text))))
            except (ValueError, json.JSONDecodeError):
                continue
        return out

    def delete(self, calibration_id: int) -> None:
        with session_scope(self.engine) as s:
            s.execute(delete(SpeedCalibrationRow).where(SpeedCalibrationRow.id == calibration_id))
