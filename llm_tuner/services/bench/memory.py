"""The memory plan of a benchmark's command (core.memory over the binary's devices and this host) and its
prediction per device, recorded with each run beside what it measured."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from llm_tuner.core import flags
from llm_tuner.core.memory import MemoryPlan, PlanDevice, parse_server_args, plan_memory
from llm_tuner.services.library import read_model
from llm_tuner.services.rpc import planned_gpus
from llm_tuner.services.telemetry.host import host_info

log = logging.getLogger(__name__)


def memory_plan(
    argv: list[str],
    binary: Path | None,
    env: dict[str, str] | None = None,
    *,
    gpus: Sequence[PlanDevice] | None = None,
    host: PlanDevice | None = None,
) -> MemoryPlan | None:
    """The core.memory plan for these llama-server arguments and environment (its LLAMA_ARG_* count, as the
    server reads them), a draft model (-md) included, on the devices the binary lists (or the PlanDevices
    given: planned hardware) and this host. None when there is no model to plan; raises when a file cannot
    be read."""
    pargs = parse_server_args(flags.effective_argv(list(argv), env or {}))
    if not pargs.model:
        return None
    model = read_model(pargs.model)
    if getattr(model, "error", None):
        raise ValueError(f"{pargs.model}: {model.error}")
    draft = read_model(pargs.draft_model) if pargs.draft_model else None  # -md: loaded beside the model
    if draft is not None and getattr(draft, "error", None):
        raise ValueError(f"{pargs.draft_model}: {draft.error}")  # a plan without the draft would be too low
    if gpus is None:
        # one card, two backends: one pool; the run's RPC workers first, as llama.cpp orders
        gpus = planned_gpus(binary, list(argv), env) if binary is not None else []
    h = host_info()
    if host is None:
        host = PlanDevice("Host", "CPU", h.memory_total_mib, h.memory_available_mib, h.cpu_model or "")
    return plan_memory(model, pargs, list(gpus), host, cpu_flags=tuple(h.cpu_flags), draft_model=draft)


def predict_memory(
    argv: list[str], binary: Path | None, env: dict[str, str] | None = None
) -> dict[str, float] | None:
    """The memory plan's prediction per device (MiB, llama.cpp device names and 'Host') for these
    llama-server arguments and environment (see memory_plan); the host's figure is mapped + allocated memory,
    what the server's peak RSS is compared with (not the prompt cache's ceiling: it grows while serving).
    None when it cannot be made. Never raises."""
    try:
        plan = memory_plan(argv, binary, env)
        return (
            None
            if plan is None
            else {d.name: round(d.total_mib - d.prompt_cache_mib, 1) for d in plan.devices}
        )
    except Exception as exc:  # noqa: BLE001 - a prediction is a bonus; the benchmark goes on without it
        log.info("no memory prediction for the benchmark: %s", exc)
        return None
