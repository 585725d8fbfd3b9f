"""The speed model for a tune: each candidate's predicted score before it starts (core.speed over the memory
plan of its command line on this machine's devices, with the calibration of this build and driver from the
store), and the race's pruning (core.tune.prune) the runner asks for.

One oracle per tune; predictions are cached per command line. A candidate the model cannot predict (no model
file, a device without any rate, an objective it does not predict) gets None and is never pruned.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_tuner.core import flags
from llm_tuner.core.memory import PlanDevice
from llm_tuner.core.speed import HOST, SpeedCalibration, predict
from llm_tuner.core.speed.predict import default_keys
from llm_tuner.core.tune import Objective
from llm_tuner.core.tune.objectives import predicted_score
from llm_tuner.core.tune.prune import BENCHMARK_ERROR, SpeedGuess
from llm_tuner.services.rpc import planned_gpus
from llm_tuner.services.speed import calibration_identity, plan_traffic, threads_of
from llm_tuner.services.telemetry.host import host_info
from llm_tuner.services.tune.placement import physical_cores, server_path
from llm_tuner.store.speed import SpeedCalibrationRepo

log = logging.getLogger(__name__)


def calibration_for(engine: Any, binary: str | Path | None) -> SpeedCalibration | None:
    """The newest calibration of this binary's build and the GPU driver in use (None: not calibrated): kept
    under services.speed.calibration_identity, the one key a probe, a refit and a prediction all use."""
    path = Path(binary) if binary else server_path()
    if path is None or engine is None:
        return None
    build, driver, _ = calibration_identity(path)
    if not build:
        log.info("no build identity for the speed model: %s", path)
        return None
    stored = SpeedCalibrationRepo(engine).latest(build, driver)
    return stored.calibration if stored is not None else None


@dataclass
class SpeedOracle:
    """Predictions of command lines of one tune (same model, devices and objective)."""

    objective: Objective
    calibration: SpeedCalibration | None
    gpus: Sequence[PlanDevice] = ()
    host: PlanDevice | None = None
    cpu_flags: tuple[str, ...] = ()
    default_threads: int = 4

    def __post_init__(self) -> None:
        self._cache: dict[tuple[str, ...], SpeedGuess | None] = {}

    @classmethod
    def for_tune(cls, base_argv: Sequence[str], env: dict[str, str], objective: Objective, *,
                 engine: Any = None, binary: str | None = None, calibration: SpeedCalibration | None = None,
                 gpus: Sequence[PlanDevice] | None = None, host: PlanDevice | None = None) -> SpeedOracle:
        """This machine's devices (or planned ones) and the stored calibration of the tune's build and
        driver."""
        h = host_info()
        if gpus is None:
            path = Path(binary) if binary else server_path()
            eff = flags.effective_argv(list(base_argv), env)
            gpus = planned_gpus(path, eff, env) if path is not None else []
        if host is None:
            host = PlanDevice("Host", "CPU", h.memory_total_mib, h.memory_available_mib, h.cpu_model or "")
        cal = calibration if calibration is not None else calibration_for(engine, binary)
        return cls(objective, cal, list(gpus), host, tuple(h.cpu_flags), physical_cores() or 4)

    def guess(self, argv: Sequence[str], env: dict[str, str] | None = None) -> SpeedGuess | None:
        key = tuple(argv)
        if key not in self._cache:
            try:
                self._cache[key] = self._guess(flags.effective_argv(list(argv), env or {}))
            except Exception as exc:  # noqa: BLE001 - no prediction: the candidate is started and judged
                log.info("no speed prediction for a tune candidate: %s", exc)
                self._cache[key] = None
        return self._cache[key]

    def _guess(self, argv: list[str]) -> SpeedGuess | None:
        o = self.objective
        t = plan_traffic(argv, self.gpus, self.host, cpu_flags=self.cpu_flags)
        threads = threads_of(argv, self.default_threads)
        gen_depth = o.depth + o.prompt_tokens + o.gen_tokens // 2  # generation runs after the prompt
        pre = predict(t, self.calibration, threads=threads, depth=o.depth, prompt_tokens=o.prompt_tokens)
        gen = predict(t, self.calibration, threads=threads, depth=gen_depth, prompt_tokens=o.prompt_tokens)
        figures = {"gen_tps": gen.gen_tps, "prefill_tps": pre.prefill_tps, "ttft_ms": pre.ttft_ms}
        defaults = {*default_keys(t, self.calibration, threads=threads, depth=o.depth,
                                  prompt_tokens=o.prompt_tokens),
                    *default_keys(t, self.calibration, threads=threads, depth=gen_depth,
                                  prompt_tokens=o.prompt_tokens)}
        regime = "gpu" if any(d.name != HOST and d.read_bytes(0) > 0 for d in t.devices) else "cpu"
        cal = self.calibration
        error = cal.error if cal is not None and cal.error is not None else BENCHMARK_ERROR[regime]
        calibrated = bool(cal is not None and cal.costs) and not defaults
        if not calibrated:
            error = max(error, gen.error)
        return SpeedGuess(predicted_score(figures, o), gen.gen_tps, pre.prefill_tps, pre.ttft_ms, error,
                          calibrated, cal.source if cal is not None and cal.source else "no calibration")
