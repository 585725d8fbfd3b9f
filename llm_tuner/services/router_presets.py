"""A router's models from its files: the `--models-dir` folder, the `--models-preset` file; their plan
together.

The rules are llama.cpp's (core.router_presets says them); this module reads the folder and the files, reads
each model's header (services.library.read_model) and hands both to core.memory.plan_router. It also writes a
presets file from saved profiles (a model without a profile gets the fit solver's placement) and reads one
back into profiles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from llm_tuner.core import flags
from llm_tuner.core.memory import (
    PlanDevice,
    RouterPlan,
    parse_server_args,
    placement_argv,
    plan_router,
    solve,
)
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.core.router_presets import (
    Presets,
    model_argvs,
    parse_ini,
    presets_from_profiles,
    profile_argv,
    profiles_from_presets,
    write_ini,
)
from llm_tuner.core.server_endpoints import RouterModel
from llm_tuner.services.binaries import BinaryError
from llm_tuner.services.library import read_model
from llm_tuner.services.rpc import WorkerError, planned_gpus
from llm_tuner.services.telemetry.host import host_info

_DRAFT_PREFIXES = (
    "mtp-",
    "dspark-",
    "dflash-",
)  # common/preset.cpp: companion files, not models of their own


def _companion(name: str) -> bool:
    return "mmproj" in name or name.startswith(_DRAFT_PREFIXES)


def scan_models_dir(folder: Path | str) -> dict[str, str]:
    """A `--models-dir` folder as llama-server reads it: name -> model file (a `.gguf` file by its name
    without `.gguf`; a sub-folder by its name, its first split part or its one model file). OSError when
    unreadable."""
    out: dict[str, str] = {}
    for entry in sorted(Path(folder).iterdir()):
        if entry.is_dir():
            files = [
                f
                for f in sorted(entry.iterdir())
                if f.is_file() and f.name.endswith(".gguf") and not _companion(f.name)
            ]
            first = [f for f in files if "-00001-of-" in f.name]
            pick = first[0] if first else (files[-1] if files else None)
            if pick is not None:
                out[entry.name] = str(pick)
        elif entry.is_file() and entry.name.endswith(".gguf") and not _companion(entry.name):
            out[entry.name.replace(".gguf", "")] = str(entry)
    return out


def read_presets(path: Path | str) -> Presets:
    """A presets file (core.router_presets.PresetError when llama-server would refuse it; OSError)."""
    return parse_ini(Path(path).read_text(encoding="utf-8"))


def write_presets(path: Path | str, presets: Presets, header: str = "") -> Path:
    p = Path(path)
    p.write_text(write_ini(presets, header), encoding="utf-8")
    return p


def router_model_argvs(
    router_argv: Sequence[str], *, models_dir: str | None = None, preset: str | None = None
) -> dict[str, list[str]]:
    """Each model a router with these arguments serves -> its instance's arguments (`models_dir`/`preset`
    stand for the router's own --models-dir/--models-preset when given)."""
    models_dir = models_dir or flags.value_of(router_argv, "models_dir")
    preset = preset or flags.value_of(router_argv, "models_preset")
    found = scan_models_dir(models_dir) if models_dir else {}
    presets = read_presets(preset) if preset else None
    return model_argvs(presets, found, router_argv)


def plan_models(
    named_argv: Mapping[str, Sequence[str]],
    gpus: Sequence[PlanDevice] = (),
    host: PlanDevice | None = None,
    *,
    cpu_flags: tuple[str, ...] = (),
    margin_mib: int | None = None,
) -> RouterPlan:
    """Read each model's header and plan them together (core.memory.plan_router)."""
    infos: dict[str, object] = {}
    for name, argv in named_argv.items():
        path = flags.value_of(list(argv), "model")
        if not path:
            infos[name] = "no model file (-m) in its arguments"
            continue
        info = read_model(path)
        infos[name] = info.error if info.error else info
    return plan_router(named_argv, infos, gpus, host, cpu_flags=cpu_flags, margin_mib=margin_mib)


def plan_profile(
    profile: LaunchProfile,
    gpus: Sequence[PlanDevice] = (),
    host: PlanDevice | None = None,
    cpu_flags: Sequence[str] = (),
) -> tuple[dict[str, list[str]], RouterPlan]:
    """A router profile -> each model's arguments and their plan together (reads folder, files, headers)."""
    named = router_model_argvs(profile_argv(profile))
    return named, plan_models(named, gpus, host, cpu_flags=tuple(cpu_flags))


def solved_argv(
    model_path: str, base_argv: Sequence[str], gpus: Sequence[PlanDevice] = (), host: PlanDevice | None = None
) -> list[str]:
    """A model without a profile: the fit solver's placement (the most GPU layers that fit beside its margin)
    over `base_argv`, with its -m. Without GPUs, or when nothing fits, its arguments as given."""
    argv = [*flags.without(list(base_argv), "model"), *flags.argv_for("model", model_path)]
    info = read_model(model_path)
    if info.error or not gpus:
        return argv
    answer = solve(info, parse_server_args(argv), list(gpus), host, goal="layers")
    return placement_argv(answer.args) if answer.args is not None else argv


def presets_for(
    profiles: Mapping[str, LaunchProfile],
    models: Mapping[str, str] | None = None,
    gpus: Sequence[PlanDevice] = (),
    host: PlanDevice | None = None,
) -> Presets:
    """Presets from saved profiles (section name -> profile) and models without one (name -> file)."""
    solved = {name: solved_argv(path, [], gpus, host) for name, path in (models or {}).items()}
    return presets_from_profiles(profiles, solved)


def presets_for_router(
    named_argv: Mapping[str, Sequence[str]],
    saved: Mapping[str, LaunchProfile],
    gpus: Sequence[PlanDevice] = (),
    host: PlanDevice | None = None,
) -> Presets:
    """A router's models (name -> its instance's arguments) -> Presets: a model with a saved profile of its
    name takes that profile's arguments; one without, the fit solver's placement over its own arguments."""
    solved = {
        name: solved_argv(flags.value_of(list(argv), "model") or "", argv, gpus, host)
        for name, argv in named_argv.items()
        if name not in saved
    }
    return presets_from_profiles({name: p for name, p in saved.items() if name in named_argv}, solved)


def profiles_in(path: Path | str) -> dict[str, LaunchProfile]:
    """A presets file's models as profiles (one per section, over `[*]`)."""
    return profiles_from_presets(read_presets(path))


def router_devices(
    binary: str | Path | None, argv: Sequence[str] = ()
) -> tuple[list[PlanDevice], PlanDevice, tuple[str, ...]]:
    """The devices a running router's models share, by capacity (GPUs as its binary lists them, host RAM):
    free memory is not used, since the instances already loaded have taken theirs from it."""
    gpus: list[PlanDevice] = []
    if binary is not None:
        try:
            gpus = [
                replace(g, free_mib=None, free_includes_runtime=False)
                for g in planned_gpus(Path(binary), list(argv))
            ]
        except (BinaryError, WorkerError, OSError):
            gpus = []
    h = host_info()
    return gpus, PlanDevice("Host", "CPU", h.memory_total_mib, None, h.cpu_model or ""), tuple(h.cpu_flags)


def live_plan(models: Sequence[RouterModel], binary: str | Path | None) -> RouterPlan | None:
    """A running router's models planned together from the arguments it lists for each (`GET /models`), on its
    devices by capacity; None when it lists no arguments."""
    named = {
        m.id: list(m.args[1:] if m.args and not m.args[0].startswith("-") else m.args)
        for m in models
        if m.args
    }
    if not named:
        return None
    gpus, host, cpu_flags = router_devices(binary, next(iter(named.values())))
    return plan_models(named, gpus, host, cpu_flags=cpu_flags)
