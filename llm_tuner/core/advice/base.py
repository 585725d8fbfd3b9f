"""What every advice rule reads and returns: the finding (Advice) and the facts a rule judges (Facts)."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from llm_tuner.core import flags
from llm_tuner.core.cmdline import FlagCatalog, ValidationResult, profile_to_argv, validate
from llm_tuner.core.profile import LaunchProfile, ModelFacts

Severity = Literal["info", "warning", "error"]
ORDER = {"error": 0, "warning": 1, "info": 2}

FIELD_NOTES = "users' measurements (docs/field-reports.md)"


class Advice(BaseModel):
    """One finding about a profile."""

    model_config = ConfigDict(frozen=True)

    id: str
    severity: Severity
    message: str
    reason: str = ""
    source: str = ""
    fields: tuple[str, ...] = ()  # profile fields involved (the editor highlights them)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "severity": self.severity, "message": self.message, "reason": self.reason,
                "source": self.source, "fields": list(self.fields)}


def advice(id_: str, severity: Severity, message: str, reason: str, source: str, *fields: str) -> Advice:
    """One finding (a rule's return value)."""
    return Advice(id=id_, severity=severity, message=message, reason=reason, source=source,
                  fields=tuple(fields))


@dataclass(frozen=True)
class Facts:
    """What the rules judge: the profile as edited (`raw`: its env as written) and effective (`p`: LLAMA_ARG_*
    variables applied), the chosen binary's flags, the model's facts and this machine's, each None when
    unknown."""

    raw: LaunchProfile
    p: LaunchProfile
    catalog: FlagCatalog | None = None
    model: ModelFacts | None = None  # None also when the header reader failed (model_error)
    model_error: str | None = None
    n_gpus: int | None = None
    model_file_exists: bool | None = None
    physical_cores: int | None = None
    host_available_mib: int | None = None  # this machine's available RAM, when read (used without a plan)
    # the binary's CUDA flash-attention K-V pairs from its log's system_info line (FA_QUANTS): None until it
    # has started (unknown), () for a build without CUDA, ("all",) for every pair
    fa_quants: tuple[str, ...] | None = None
    plan: Any = None  # core.memory.MemoryPlan of this profile on this machine, when one could be made
    # core.memory.Pipeline of that plan (its memory figures), when it has several devices
    pipeline: Any = None

    @cached_property
    def validation(self) -> ValidationResult | None:
        return validate(self.raw, self.catalog) if self.catalog is not None else None

    @cached_property
    def n_dev(self) -> int:
        """How many devices the main model is split over: the profile's -dev/-ts, else every GPU the machine
        has (llama-server's default) when `n_gpus` is known, RPC workers' devices first; 0 when unknown."""
        p = self.p
        if p.split_mode == "none" or p.gpu_layers == 0 or list(p.devices) == ["none"]:
            return 1 if p.split_mode == "none" else 0
        devs = [d for d in p.devices if d and d != "none"]
        shares = [x for x in p.tensor_split if x > 0]
        if devs or shares:
            return max(len(devs), len(shares))
        return (self.n_gpus or 0) + (len(p.rpc) if self.n_gpus is not None or len(p.rpc) > 1 else 0)

    @property
    def layer_split_multi(self) -> bool:
        return self.n_dev > 1 and self.p.split_mode in (None, "layer")

    @property
    def n_layer(self) -> int | None:
        """The model's repeating layers (block_count, MTP blocks included), when known."""
        n = getattr(self.model, "block_count", None) if self.model is not None else None
        return n if isinstance(n, int) and n > 0 else None

    @property
    def fa_off(self) -> bool:
        return self.p.flash_attn in ("off", "disabled", "false", "0")


Rule = Callable[[Facts], Iterable[Advice]]


def is_loopback(host: str) -> bool:
    host = host.strip().strip("[]")
    if host.endswith(".sock") or host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def backend(device: str) -> str:
    """A llama.cpp device name's backend: CUDA0 -> CUDA, Vulkan2 -> Vulkan, RPC1 -> RPC."""
    return device.rstrip("0123456789") or device


def server_argv(profile: LaunchProfile) -> list[str]:
    """The arguments llama-server acts on: the profile's own, then what its LLAMA_ARG_* variables add."""
    argv, env = profile_to_argv(profile)
    return [*argv, *flags.env_to_argv(env, argv)]


def is_router(profile: LaunchProfile) -> bool:
    """Whether the profile starts llama-server's router mode on purpose: no model of its own (-m, -hf,
    --model-url) and a models folder (--models-dir) or a presets file (--models-preset) to load models from on
    demand (flags or LLAMA_ARG_* variables). Neither a model nor these is the "no-model" error, not a
    router."""
    argv = server_argv(profile)
    if any(flags.has(argv, key) for key in ("model", "hf_repo", "model_url")):
        return False
    return flags.has(argv, "models_dir") or flags.has(argv, "models_preset")
