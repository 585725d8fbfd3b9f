"""The knobs a tune proposes for a base command: core.tune.propose_knobs fed with the model's headers, the
binary's --help, its devices, the placement frontier where the model does not fit its GPUs (services.tune.
placement), whether the base fits (the plan) and the host's physical cores."""

from __future__ import annotations

import logging
from pathlib import Path

from llm_tuner.core import flags
from llm_tuner.core.cmdline import FlagCatalog, parse_help
from llm_tuner.core.devices import LlamaDevice
from llm_tuner.core.memory import PlanDevice
from llm_tuner.core.settings import Settings
from llm_tuner.core.tune import (
    DEFAULT_MARGIN_MIB,
    PLACEMENT_KNOB,
    Knob,
    Objective,
    Placement,
    apply_values,
    propose_knobs,
)
from llm_tuner.core.tune.knobs import KV_TYPES, allowed_values
from llm_tuner.core.tune.prune import rank_by_prediction
from llm_tuner.services import binaries
from llm_tuner.services.library import read_model
from llm_tuner.services.tune.checks import PlanFn
from llm_tuner.services.tune.placement import PlacementResolver, physical_cores, server_path
from llm_tuner.services.tune.speed import SpeedOracle

log = logging.getLogger(__name__)


def default_knobs(base_argv: list[str], env: dict[str, str] | None = None, *, binary: str | None = None,
                  objective: Objective | None = None, plan_fn: PlanFn | None = None,
                  settings: Settings | None = None, resolver: PlacementResolver | None = None,
                  gpus: list[PlanDevice] | None = None, host: PlanDevice | None = None,
                  margin_mib: int | None = None, speed: SpeedOracle | None = None) -> list[Knob]:
    """Knobs for this base (see core.tune.knobs for the rules); [] when the model cannot be read.

    `gpus`/`host`: planned devices (PlanDevice) instead of the binary's; `margin_mib`: the free memory each GPU
    keeps under a placement candidate (the tune's headroom); `speed`: the speed model, which ranks the placements
    that fit by predicted score (with a calibration; else by host reads) before the top few are taken."""
    argv = flags.effective_argv(list(base_argv), env or {})
    model_path = flags.value_of(argv, "model")
    if not model_path:
        return []
    model = read_model(model_path)
    if getattr(model, "error", None):
        return []
    loc = Path(binary) if binary else server_path()
    catalog: FlagCatalog | None = None
    devices: list[LlamaDevice | PlanDevice] = []
    if loc is not None:
        try:
            catalog = parse_help(binaries.read_help(loc))
            devices = list(binaries.list_devices(loc))
        except (binaries.BinaryError, OSError, ValueError):
            catalog = binaries.default_catalog()
    if gpus is not None:
        devices = list(gpus)
    elif resolver is not None:
        devices = list(resolver.gpus)
    devices = [d for d in devices if getattr(d, "backend", "") != "CPU"]
    placement: list[Placement] = []
    if devices:
        try:
            resolver = resolver or PlacementResolver(
                base_argv, env, binary=binary, gpus=gpus, host=host,
                margin_mib=DEFAULT_MARGIN_MIB if margin_mib is None else margin_mib)
            if resolver.needs_placement():
                kv = [t for t in KV_TYPES if t in (allowed_values(catalog, "cache_type_k") or KV_TYPES)]
                placement = resolver.frontier(kv)
                if speed is not None:
                    fitting = [p for p in placement if p.fits]
                    argvs = [apply_values(list(base_argv), [Knob(key=PLACEMENT_KNOB, flag=PLACEMENT_KNOB,
                                                                 values=(p.value,))], {PLACEMENT_KNOB: p.value},
                                          env, resolve=resolver.fragment) for p in fitting]
                    ranked = rank_by_prediction(fitting, [speed.guess(a, env or {}) for a in argvs])
                    placement = ranked + [p for p in placement if not p.fits]
        except Exception as exc:  # noqa: BLE001 - no frontier: the per-flag knobs stand
            log.info("no placement frontier: %s", exc)
    fits = plan_fn(argv, env or {})[0] if plan_fn is not None else True
    return propose_knobs(model, catalog, devices, argv, objective=objective, needs_offload=not fits,
                         cpu_threads=physical_cores(), placement=placement)
