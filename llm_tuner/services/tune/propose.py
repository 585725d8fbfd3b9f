"""The knobs a tune proposes for a base command: core.tune.propose_knobs fed with the model's headers, the
binary's --help, its devices, whether the base fits (the plan) and the host's cores."""

from __future__ import annotations

import os
from pathlib import Path

from llm_tuner.core import flags
from llm_tuner.core.cmdline import parse_help
from llm_tuner.core.tune import Knob, Objective, propose_knobs
from llm_tuner.services import binaries


def default_knobs(base_argv: list[str], env: dict[str, str] | None = None, *, binary: str | None = None,
                  objective: Objective | None = None, plan_fn=None, settings=None) -> list[Knob]:
    """Knobs for this base (see core.tune.knobs for the rules); [] when the model cannot be read."""
    from llm_tuner.services.library import read_model  # noqa: PLC0415

    argv = flags.effective_argv(list(base_argv), env or {})
    model_path = flags.value_of(argv, "model")
    if not model_path:
        return []
    model = read_model(model_path)
    if getattr(model, "error", None):
        return []
    loc = Path(binary) if binary else (getattr(binaries.locate(binaries.SERVER, settings), "path", None))
    catalog, devices = None, []
    if loc is not None:
        try:
            catalog = parse_help(binaries.read_help(loc))
            devices = binaries.list_devices(loc)
        except (binaries.BinaryError, OSError, ValueError):
            catalog = binaries.default_catalog()
    fits = plan_fn(argv, env or {})[0] if plan_fn is not None else True
    return propose_knobs(model, catalog, devices, argv, objective=objective, needs_offload=not fits,
                         cpu_threads=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())
