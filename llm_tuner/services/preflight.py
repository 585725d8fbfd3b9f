"""Advice with this machine's facts, and the pre-flight check before anything starts a llama-server.

core.advice judges a profile; this module gathers what it needs from this machine (no Qt): whether the model
file exists, what the GGUF header reader makes of it (a folder, a truncated download: `ModelInfo.error`), the
GPUs and physical cores. `profile check`, `profile import`, the Profile tab, and every launch and benchmark ask
here, so they all name the same errors. A launch or benchmark of a profile with advice errors is refused
before a server starts (`PreflightRefused`), unless the user says "launch anyway" (`--force`, the Live tab's
button): a fork may accept what the tested build refuses.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llm_tuner.core.advice import Advice, advise
from llm_tuner.core.cmdline import FlagCatalog, effective_profile, import_command
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.services.failures import log_once
from llm_tuner.services.library import read_model
from llm_tuner.services.telemetry.inventory import detect_inventory


@dataclass(frozen=True)
class ModelLook:
    """What this machine says about a profile's model path: `exists` (None without a path) and the header
    reader's ModelInfo (its `error` set when the path is a folder, truncated, not a GGUF...)."""

    exists: bool | None
    info: object | None = None  # core.gguf_info.ModelInfo


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


def machine_facts() -> dict:
    """The advice's facts about this machine: GPUs (the inventory `llm-tuner devices` lists, without running a
    binary) and physical CPU cores; empty when unknown (advice without those rules is still useful)."""
    try:
        inv = detect_inventory()
        return {"n_gpus": len(inv.devices), "physical_cores": inv.host.cores_physical}
    except Exception as exc:  # noqa: BLE001 - advice without those facts still helps
        log_once("reading the machine's facts for advice", exc)
        return {}


def advice_here(profile: LaunchProfile, catalog: FlagCatalog | None = None, *, machine: dict | None = None,
                look: ModelLook | None = None) -> list[Advice]:
    """core.advice.advise with this machine's facts (the model file looked at, the GPUs and cores)."""
    look = look if look is not None else look_at_model(effective_profile(profile).model)
    return advise(profile, catalog, look.info, model_file_exists=look.exists,
                  **(machine if machine is not None else machine_facts()))


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
    looked at unless `look` is given (`ModelLook(None)`: no file I/O, e.g. on the GUI thread); no GPU inventory
    is read (no error rule needs it)."""
    if profile is None:
        profile = import_command(list(argv or []), catalog, env=env).profile
    return [a for a in advice_here(profile, catalog, machine={}, look=look) if a.severity == "error"]


def check_launch(profile: LaunchProfile | None = None, catalog: FlagCatalog | None = None, *,
                 argv: list[str] | None = None, env: dict[str, str] | None = None, force: bool = False) -> list[Advice]:
    """Raise PreflightRefused when the profile (or argv) has advice errors and not `force`; else return the
    errors (empty, or the ones the user chose to launch anyway)."""
    errors = preflight_errors(profile, catalog, argv=argv, env=env)
    if errors and not force:
        raise PreflightRefused(errors)
    return errors
