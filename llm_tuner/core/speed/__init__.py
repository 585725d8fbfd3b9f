"""Predicted speed before launch: bytes and FLOPs per token per device (traffic), device rates (a calibration
measured on the user's own hardware, or marked defaults), and the prediction (prefill, generation, TTFT, each
device's share of the time, and the roofline). The one home of "bytes read per token".

Modules, by seam: `traffic` (what a request costs each device under a memory plan), `predict` (rates and the
prediction), `calibrate` (rates fitted from measurements: a probe's or stored runs'). Import from the package.
"""

from __future__ import annotations

from llm_tuner.core.speed.predict import (
    DeviceSpeed,
    Prediction,
    SpeedCalibration,
    calibration_from_json,
    calibration_to_json,
    predict,
)
from llm_tuner.core.speed.traffic import (
    HOST,
    OFFLOAD_MIN_BATCH,
    DeviceTraffic,
    Traffic,
    gpus_of_plan,
    traffic,
)

__all__ = [
    "HOST",
    "OFFLOAD_MIN_BATCH",
    "DeviceSpeed",
    "DeviceTraffic",
    "Prediction",
    "SpeedCalibration",
    "Traffic",
    "calibration_from_json",
    "calibration_to_json",
    "predict",
    "gpus_of_plan",
    "traffic",
]
