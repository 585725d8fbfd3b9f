"""The placement frontier on this machine: core.tune.frontier fed with the model's headers, the devices llama.cpp
lists (their free memory, as `--list-devices` reports it: what llama.cpp itself sees) or planned ones, and the
host. One resolver per tune: it turns a placement knob's symbolic values into command-line fragments at the
margin in force, and raises that margin when a placement ran out of memory at start or at the first request."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

import psutil

from llm_tuner.core import flags
from llm_tuner.core.memory import PlanDevice, parse_server_args
from llm_tuner.core.tune import (
    DEFAULT_MARGIN_MIB,
    Placement,
    Planner,
    frontier,
    needs_placement,
    next_margin,
    resolve_placement,
)
from llm_tuner.services import binaries
from llm_tuner.services.library import read_model
from llm_tuner.services.rpc import planned_gpus
from llm_tuner.services.telemetry.host import host_info

log = logging.getLogger(__name__)


def physical_cores() -> int | None:
    """The physical cores this process may use (llama.cpp's default -t is the physical cores)."""
    try:
        phys: int | None = psutil.cpu_count(logical=False)  # psutil ships no type hints (pyproject: mypy)
        logical: int = psutil.cpu_count(logical=True) or phys or 0
        allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else logical
        if not phys:
            return allowed or None
        # affinity limits logical CPUs; scale to physical ones (hyper-threads share a core)
        return max(1, min(phys, round(allowed * phys / max(1, logical or phys))))
    except Exception as exc:  # noqa: BLE001 - no thread knob then
        log.info("physical cores unknown: %s", exc)
        return None


class PlacementResolver:
    """The frontier of one base command on one set of devices, with the margin in force (MiB per GPU).
    `fresh_devices`: the devices' free memory asked now (services.rpc.planned_gpus `fresh`), as a tune that
    places for its whole run does; a preview may use a recent answer."""

    def __init__(self, base_argv: Sequence[str], env: dict[str, str] | None = None, *, binary: str | None = None,
                 gpus: list[PlanDevice] | None = None, host: PlanDevice | None = None,
                 margin_mib: int = DEFAULT_MARGIN_MIB, fill: float = 0.1, fresh_devices: bool = False) -> None:
        self.base_argv = list(base_argv)
        self.env = dict(env or {})
        eff = flags.effective_argv(self.base_argv, self.env)
        pargs = parse_server_args(eff)
        if not pargs.model:
            raise ValueError("no model (-m) to place")
        model = read_model(pargs.model)
        if getattr(model, "error", None):
            raise ValueError(f"{pargs.model}: {model.error}")
        draft = read_model(pargs.draft_model) if pargs.draft_model else None
        h = host_info()
        if gpus is None:
            path = Path(binary) if binary else server_path()
            gpus = []
            if path is not None:
                gpus = planned_gpus(path, eff, self.env, fresh=fresh_devices)
        if host is None:
            host = PlanDevice("Host", "CPU", h.memory_total_mib, h.memory_available_mib, h.cpu_model or "")
        self.planner = Planner(model, gpus, host, cpu_flags=tuple(h.cpu_flags), draft_model=draft, fill=fill)
        self.margin_mib = int(margin_mib)
        self._cache: dict[tuple[str, int], Placement] = {}

    @property
    def gpus(self) -> list[PlanDevice]:
        return self.planner.gpus

    def needs_placement(self) -> bool:
        """Whether the base computes blocks on the CPU beside GPUs (then the placement knob is proposed)."""
        return needs_placement(self.planner, flags.effective_argv(self.base_argv, self.env))

    def placement(self, value: str, margin_mib: int | None = None) -> Placement:
        margin = self.margin_mib if margin_mib is None else int(margin_mib)
        key = (value, margin)
        if key not in self._cache:
            self._cache[key] = resolve_placement(self.planner, self.base_argv, value, margin)
        return self._cache[key]

    def fragment(self, value: str) -> tuple[str, ...]:
        """The command-line fragment of `value` at the margin in force (core.tune.apply_values' resolver)."""
        return self.placement(value).argv

    def frontier(self, kv_types: Sequence[str]) -> list[Placement]:
        return frontier(self.planner, self.base_argv, kv_types, self.margin_mib)

    def learn_out_of_memory(self, failed: Placement) -> int:
        """A placement at the margin in force ran out of memory: raise the margin (core.tune.next_margin)."""
        self.margin_mib = next_margin(self.margin_mib, failed)
        return self.margin_mib


def server_path() -> Path | None:
    loc = binaries.locate(binaries.SERVER)
    return loc.path if loc else None
