"""Advice with this machine's facts, and the pre-flight check before anything starts a llama-server.

core.advice judges a profile; this module gathers what it needs from this machine (no Qt): whether the model
file exists, what the GGUF header reader makes of it (a folder, a truncated download: `ModelInfo.error`), the
GPUs and physical cores. `profile check`, `profile import`, the Profile tab, and every launch and benchmark
ask here, so they all name the same errors. A launch or benchmark of a profile with advice errors is refused
before a server starts (`PreflightRefused`), unless the user says "launch anyway" (`--force`, the Live tab's
button): a fork may accept what the tested build refuses.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_tuner.core.advice import Advice, advise
from llm_tuner.core.cmdline import FlagCatalog, effective_profile, import_command
from llm_tuner.core.devices import DeviceInventory
from llm_tuner.core.gguf_info import ModelInfo
from llm_tuner.core.memory import (
    ArgumentError,
    args_from_profile,
    host_device,
    pipeline,
    plan_gpus,
    plan_memory,
)
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.services import device_ids
from llm_tuner.services.binaries import SERVER, locate
from llm_tuner.services.failures import log_once
from llm_tuner.services.library import read_model
from llm_tuner.services.settings_store import load_settings
from llm_tuner.services.telemetry.inventory import detect_inventory


@dataclass(frozen=True)
class ModelLook:
    """What this machine says about a profile's model path: `exists` (None without a path) and the header
    reader's ModelInfo (its `error` set when the path is a folder, truncated, not a GGUF...)."""

    exists: bool | None
    info: ModelInfo | None = None


def look_at_model(model: str | None) -> ModelLook:
    """Read the model's header when the path exists (a folder or a broken file comes back with its reason)."""
    if not model:
        return ModelLook(None)
    path = Path(model)
    if not path.exists():
        return ModelLook(False)

    try:
        return ModelLook(True, read_model(path))
    except Exception:  # noqa: BLE001 - read_model never raises by contract; advice without facts still helps
        return ModelLook(True)


def machine_facts() -> dict[str, Any]:
    """The advice's facts about this machine: GPUs (the inventory `llm-tuner devices` lists, without running a
    binary), physical CPU cores, available RAM, and the inventory itself (for the memory plan); empty when
    unknown (advice without those rules is still useful)."""
    try:
        inv = detect_inventory()
        return {"n_gpus": len(inv.devices), "physical_cores": inv.host.cores_physical,
                "host_available_mib": inv.host.memory_available_mib, "inventory": inv}
    except Exception as exc:  # noqa: BLE001 - advice without those facts still helps
        log_once("reading the machine's facts for advice", exc)
        return {}


def _server_binary(profile: LaunchProfile) -> str | None:
    """The llama-server a profile runs: its own, else the one found (settings, the embedded build)."""
    if profile.binary:
        return profile.binary
    try:
        loc = locate(SERVER, load_settings())
    except Exception as exc:  # noqa: BLE001 - the advice goes on without the build's facts
        log_once("finding llama-server for advice", exc)
        return None
    return str(loc.path) if loc is not None else None


def plan_here(profile: LaunchProfile, info: ModelInfo | None,
              inventory: DeviceInventory | None) -> tuple[object, object]:
    """The profile's memory plan on this machine and its pipeline parallelism (core.memory.plan_memory and
    pipeline), or (None, None) without a readable model header or an inventory. Never raises."""
    if info is None or info.error or inventory is None:
        return None, None
    try:
        args = args_from_profile(profile)
    # a value llama-server refuses (-c abc): the Plan and Start say it; no plan to advise on
    except ArgumentError:
        return None, None
    try:
        gpus, host = plan_gpus(inventory), host_device(inventory)
        if inventory.devices and not gpus:
            return None, None  # GPUs here but not yet listed by llama-server: a CPU-only plan would mislead
        flags = tuple(inventory.host.cpu_flags or ())
        plan = plan_memory(info, args, gpus, host, cpu_flags=flags)
        return plan, pipeline(info, plan, gpus, host, user_args=args, cpu_flags=flags)
    except Exception as exc:  # noqa: BLE001 - advice without the plan's rules still helps
        log_once("planning memory for advice", exc)
        return None, None


def advice_here(profile: LaunchProfile, catalog: FlagCatalog | None = None, *,
                machine: dict[str, Any] | None = None, look: ModelLook | None = None) -> list[Advice]:
    """core.advice.advise with this machine's facts: the model file looked at, the GPUs, cores and RAM, the
    memory plan (the prompt cache against host RAM, fit's own overrides, pipeline parallelism's memory) and
    the binary's FA_QUANTS once it has started (services.device_ids)."""
    look = look if look is not None else look_at_model(effective_profile(profile).model)
    facts = dict(machine if machine is not None else machine_facts())
    inventory = facts.pop("inventory", None)
    plan, pipe = plan_here(profile, look.info, inventory)
    quants = device_ids.cached_fa_quants(_server_binary(profile)) if machine is None or machine else None
    return advise(profile, catalog, look.info, model_file_exists=look.exists, fa_quants=quants, plan=plan,
                  pipeline=pipe, **facts)


class PreflightRefused(Exception):
    """A launch or benchmark refused before a server started: the profile has advice errors."""

    def __init__(self, errors: list[Advice]) -> None:
        self.errors = errors
        super().__init__("not started: " + refusal_text(errors))


def refusal_text(errors: list[Advice], anyway: str = "--force") -> str:
    """The refusal as the user reads it: each error, then how to go ahead anyway (`anyway`: the CLI flag or
    the window's button)."""
    lines = "; ".join(a.message for a in errors)
    many = len(errors) > 1
    return (f"llama-server would refuse or fail on {'these errors' if many else 'this error'}: {lines}. "
            f"Fix {'them' if many else 'it'}, or launch anyway ({anyway}; a fork may accept it).")


def preflight_errors(profile: LaunchProfile | None = None, catalog: FlagCatalog | None = None, *,
                     argv: list[str] | None = None, env: dict[str, str] | None = None,
                     look: ModelLook | None = None) -> list[Advice]:
    """The advice errors of a profile, or of llama-server arguments (`argv`, `env`, read as a pasted command),
    that would make the server refuse to start or fail: what every launch checks first. The model file is
    looked at unless `look` is given (`ModelLook(None)`: no file I/O, e.g. on the GUI thread); no GPU
    inventory is read (no error rule needs it)."""
    if profile is None:
        profile = import_command(list(argv or []), catalog, env=env).profile
    return [a for a in advice_here(profile, catalog, machine={}, look=look) if a.severity == "error"]


def check_launch(profile: LaunchProfile | None = None, catalog: FlagCatalog | None = None, *,
                 argv: list[str] | None = None, env: dict[str, str] | None = None,
                 force: bool = False) -> list[Advice]:
    """Raise PreflightRefused when the profile (or argv) has advice errors and not `force`; else return the
    errors (empty, or the ones the user chose to launch anyway)."""
    errors = preflight_errors(profile, catalog, argv=argv, env=env)
    if errors and not force:
        raise PreflightRefused(errors)
    return errors
