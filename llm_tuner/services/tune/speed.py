"""The speed model for a tune: each candidate's predicted score before it starts (core.speed over the memory
plan of its command line on this machine's devices, with the calibration of this build and driver from the
store), and the race's pruning (core.tune.prune) the runner asks for.

One oracle per tune; predictions are cached per command line. Once the tune's baseline is measured, the
server path's cost per generated token beyond the prediction (core.tune.prune.per_token_cost) is added to
every generation prediction after it (`learn_server_cost`). A candidate the model cannot predict (no model
file, a device without any rate, an objective it does not predict) gets None and is never pruned.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from llm_tuner.core import flags
from llm_tuner.core.memory import PlanDevice
from llm_tuner.core.speed import HOST, SpeedCalibration, predict
from llm_tuner.core.speed.predict import default_keys
from llm_tuner.core.tune import Objective
from llm_tuner.core.tune.objectives import predicted_score
from llm_tuner.core.tune.prune import BENCHMARK_ERROR, SpeedGuess, per_token_cost, with_per_token_cost
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
    server_cost_s: float = 0.0  # seconds a generated token costs the server beyond the prediction

    def __post_init__(self) -> None:
        self._cache: dict[tuple[str, ...], SpeedGuess | None] = {}

    def forget_server_cost(self) -> None:
        self.server_cost_s, self._cache = 0.0, {}

    def learn_server_cost(self, argv: Sequence[str], env: dict[str, str] | None,
                          measured_gen_tps: float | None) -> float:
        """The server's per-token cost from one measured command line (the tune's baseline), kept for every
        later prediction; returns it (0: measured as fast as predicted, or no prediction)."""
        self.forget_server_cost()
        g = self.guess(argv, env)
        self.server_cost_s = per_token_cost(g.gen_tps if g is not None else None, measured_gen_tps)
        self._cache = {}
        return self.server_cost_s

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
                raw = self._guess(flags.effective_argv(list(argv), env or {}))
                self._cache[key] = self._with_server_cost(raw)
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
        # the calibration's error, not the prediction's: a split placement on llama-bench's probe alone
        # predicts with PROBE_ONLY_SPLIT_ERROR (the server ran 25-35 % slower), but the tune learns that gap
        # from its baseline (learn_server_cost) and its pruning margin is at least MIN_PRUNE anyway
        error = cal.error if cal is not None and cal.error is not None else BENCHMARK_ERROR[regime]
        calibrated = bool(cal is not None and cal.costs) and not defaults
        if not calibrated:
            error = max(error, gen.error)
        return SpeedGuess(predicted_score(figures, o), gen.gen_tps, pre.prefill_tps, pre.ttft_ms, error,
                          calibrated, cal.source if cal is not None and cal.source else "no calibration")

    def _with_server_cost(self, g: SpeedGuess | None) -> SpeedGuess | None:
        if g is None or self.server_cost_s <= 0 or g.gen_tps is None:
            return g
        gen = with_per_token_cost(g.gen_tps, self.server_cost_s)
        figures = {"gen_tps": gen, "prefill_tps": g.prefill_tps, "ttft_ms": g.ttft_ms}
        on = f"{g.on}, + {1000 * self.server_cost_s:.2f} ms a token on the server (from the baseline)"
        return replace(g, score=predicted_score(figures, self.objective), gen_tps=gen, on=on)
