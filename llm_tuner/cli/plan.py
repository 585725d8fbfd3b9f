"""`llm-tuner estimate --json [--devices NAME=MiB,...] [--check] (--profile NAME|FILE | -- <llama-server
args>)`.

Prints the memory plan per device (GPUs by llama.cpp's names, then `Host`) for the arguments as
given (the host's weights read from the file mapping apart, as `mapped_mib`: the page cache may evict them, so
`fits` compares `resident_mib`; `-lm mmap+mlock`/`none` makes them resident), with llama.cpp's defaults; what
`--fit` would change is applied and said in `warnings`. A profile is planned with its effective arguments: its
flags and the LLAMA_ARG_* variables of its environment, as llama-server reads them.
`--devices` plans for the devices given instead of the detected ones (backend from the name's
prefix, capacity = the MiB given; `Host=MiB` sets host RAM). `--check` also starts the real
llama-server once (`-lv 4 -fit off`), reads what it allocates, and adds it beside the estimate.
Exit status: 0 when the plan fits, 1 when a device does not (the plan is printed either way), 2 when the
arguments or the model cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from llm_tuner.cli import speed
from llm_tuner.cli.output import CliError, emit_json
from llm_tuner.core import flags

if TYPE_CHECKING:
    from llm_tuner.core.memory import PlanDevice


def register(sub: argparse._SubParsersAction) -> None:
    """Add this module's subcommands."""
    p = sub.add_parser("estimate", help="memory per device for llama-server arguments (weights, KV, compute)",
                       description=__doc__.split("\n\n")[0] + " Exit status: 0 when the plan fits, 1 when it "
                       "does not, 2 when the arguments or the model cannot be read.")
    p.add_argument("--json", action="store_true", help="print JSON (the default output is a short table)")
    p.add_argument("--devices", help="plan for these devices instead of the detected ones: NAME=MiB,... "
                   "(e.g. CUDA0=16384,Vulkan1=24576; Host=65536 sets RAM)")
    p.add_argument("--check", action="store_true", help="also ask llama.cpp (starts llama-server once, CPU "
                   "build: host buffers only)")
    p.add_argument("--check-fit", action="store_true", help="also ask llama-fit-params what --fit would "
                   "choose (-c, -ngl, -ts, -ot) for the detected devices")
    p.add_argument("--profile", metavar="NAME|FILE", help="plan a saved profile (its newest version) or a "
                   "profile file, with the LLAMA_ARG_* variables of its environment")
    p.add_argument("server_args", nargs=argparse.REMAINDER, help="-- then llama-server arguments with -m")
    speed.add_arguments(p)
    p.set_defaults(func=_estimate)


def parse_devices(text: str) -> tuple[list[PlanDevice], PlanDevice | None]:
    """`CUDA0=16384,Vulkan1=24576,Host=65536` -> planned GPUs and (optionally) host. Each a name and a whole,
    positive number of MiB; CliError in plain words otherwise."""
    import re

    from llm_tuner.core.devices import backend_of
    from llm_tuner.core.memory import PlanDevice

    gpus: list[PlanDevice] = []
    host = None
    parts = [x.strip() for x in text.split(",") if x.strip()]
    if not parts:
        raise CliError(f"--devices {text!r}: no devices; give NAME=MiB,... (e.g. CUDA0=24576,Host=65536)")
    for part in parts:
        if "=" not in part:
            raise CliError(f"--devices: {part!r} is not NAME=MiB (e.g. CUDA0=24576)")
        name, mib = (x.strip() for x in part.split("=", 1))
        if not re.fullmatch(r"[A-Za-z][\w.:-]*", name):
            raise CliError(f"--devices: {part!r} needs a device name before '=' (CUDA0, Vulkan1, Host)")
        if not re.fullmatch(r"[0-9]{1,9}", mib) or int(mib) == 0:
            raise CliError(f"--devices: {name}={mib}: the memory is a whole number of MiB from 1 to "
                           "999999999 (e.g. CUDA0=24576)")
        value = int(mib)
        if name.lower() in ("host", "cpu", "ram"):
            host = PlanDevice("Host", "CPU", value, None, "planned RAM", True)
        else:
            gpus.append(PlanDevice(name, backend_of(name), value, None, "planned", True))
    return gpus, host


def detect_devices(server_args: list[str] | None = None) -> tuple[list[PlanDevice], PlanDevice, tuple[str, ...]]:
    """GPUs as the llama-server binary lists them (with the `--rpc` workers' devices of `server_args`), host
    RAM and CPU flags."""
    from llm_tuner.core.memory import PlanDevice
    from llm_tuner.services.binaries import SERVER, BinaryError, locate
    from llm_tuner.services.rpc import WorkerError, planned_gpus
    from llm_tuner.services.telemetry.host import host_info

    gpus: list[PlanDevice] = []
    loc = locate(SERVER)
    if loc is not None:
        try:  # one card under two backends is one pool; RPC devices first, with their workers' memory
            gpus = planned_gpus(loc.path, list(server_args or []))
        except (BinaryError, WorkerError):
            gpus = []
    h = host_info()
    host = PlanDevice("Host", "CPU", h.memory_total_mib, h.memory_available_mib, h.cpu_model or "")
    return gpus, host, tuple(h.cpu_flags)


def _estimate(args: argparse.Namespace) -> int:
    from llm_tuner.core.memory import parse_server_args, plan_memory
    from llm_tuner.services.library import read_model

    server_args = list(args.server_args)
    if server_args and server_args[0] == "--":
        server_args = server_args[1:]
    if args.profile:
        if server_args:
            raise CliError("give either --profile or llama-server arguments after --, not both")
        server_args = _profile_argv(args.profile)
    try:
        pargs = parse_server_args(server_args)
    except ValueError as exc:
        raise CliError(f"cannot read the llama-server arguments: {exc}") from None
    if not pargs.model:
        raise CliError("no model: give --profile NAME|FILE, or llama-server arguments after -- with -m MODEL.gguf")
    model = read_model(pargs.model)
    if model.error:
        raise CliError(f"{pargs.model}: {model.error}")
    draft = None
    if pargs.draft_model:
        draft = read_model(pargs.draft_model)
        if draft.error:
            raise CliError(f"{pargs.draft_model}: {draft.error}")
    if args.bandwidth:  # its form before the devices are detected (that starts llama.cpp): bad input at once
        speed.parse_bandwidth(args.bandwidth, None)
    gpus, host, flags = detect_devices(server_args)
    if args.devices:
        planned, planned_host = parse_devices(args.devices)
        gpus = planned
        if planned_host is not None:
            host = planned_host
    plan = plan_memory(model, pargs, gpus, host, cpu_flags=flags, draft_model=draft)
    out = {"devices": [d.to_json() for d in plan.devices], "warnings": list(plan.warnings),
           "n_ctx": plan.n_ctx, "n_parallel": plan.n_seq_max, "kv_unified": plan.kv_unified,
           "flash_attn": plan.flash_attn, "n_gpu_layers": plan.n_gpu_layers}
    if args.check:
        out["llama_cpp"] = _check(server_args, plan, gpus)
    if args.check_fit:
        out["llama_fit_params"] = _check_fit(pargs, plan)
    if speed.wanted(args):
        out["speed"] = speed.speed_json(args, server_args, model, plan, gpus, tuple(flags), _physical_cores())
    code = 0 if plan.fits else 1  # a plan that does not fit is not a success (scripts test the status)
    if args.json:
        emit_json(out)
        return code
    # 'mapped': weights read from the file mapping (page cache, evictable); 'fits' compares what must be
    # resident
    print(f"{'device':10} {'weights':>10} {'KV':>10} {'compute':>10} {'output':>8} {'overhead':>9} "
          f"{'total':>10} {'mapped':>8} {'capacity':>10}  fits")
    for d in plan.devices:
        print(f"{d.name:10} {d.model_mib:10.0f} {d.kv_mib:10.0f} {d.compute_mib:10.0f} {d.output_mib:8.0f} "
              f"{d.overhead_mib:9.0f} {d.total_mib:10.0f} {d.mapped_mib:8.0f} "
              f"{d.capacity_mib if d.capacity_mib is not None else '?':>10}  {d.fits}")
    for w in plan.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if not plan.fits:
        print("does NOT fit: " + ", ".join(d.name for d in plan.devices if d.fits is False), file=sys.stderr)
    for line in check_text(out.get("llama_cpp")) + fit_params_text(out.get("llama_fit_params")):
        print(line)
    if "speed" in out:
        for line in speed.speed_text(out["speed"]):
            print(line)
    return code


def _physical_cores() -> int | None:
    """llama.cpp's default thread count: the physical cores."""
    from llm_tuner.services.telemetry.host import host_info

    return host_info().cores_physical


def check_text(check: dict | None) -> list[str]:
    """`--check`'s answer as people read it: llama.cpp's MiB per device and kind beside the plan's
    difference."""
    if check is None:
        return []
    if "error" in check:
        return [f"llama.cpp check: {check['error']}"]
    lines = [f"llama.cpp (a real load, {check.get('seconds', 0):g} s): MiB per device, plan minus llama.cpp in ()"]
    for d in check.get("devices", []):
        diff = d.get("diff_mib") or {}
        parts = [f"{k.removesuffix('_mib')} {d[k]:.0f}" + (f" ({diff[k]:+.0f})" if k in diff else "")
                 for k in ("model_mib", "kv_mib", "compute_mib", "output_mib") if k in d]
        lines.append(f"  {d['name']:10} " + ", ".join(parts))
    return lines


def fit_params_text(fit: dict | None) -> list[str]:
    """`--check-fit`'s answer as people read it: llama-fit-params' arguments beside what our emulation
    chose."""
    if fit is None:
        return []
    if "error" in fit:
        return [f"llama-fit-params: {fit['error']}"]
    ours = fit.get("ours") or {}
    return [f"llama-fit-params chooses: {' '.join(fit.get('args') or []) or '(nothing to change)'}",
            f"  this plan: n_ctx {ours.get('ctx')}" + (f"; {'; '.join(ours['changes'])}" if ours.get("changes") else "")]


def _profile_argv(ref: str) -> list[str]:
    """The effective llama-server arguments of a saved profile or a profile file (flags and LLAMA_ARG_*)."""
    from llm_tuner.cli.profile_file import load_profile
    from llm_tuner.core.cmdline import profile_to_argv
    from llm_tuner.core.flags import effective_argv

    argv, env = profile_to_argv(load_profile(ref).profile)
    return effective_argv(argv, env)


def _check_fit(pargs, plan) -> dict:
    """llama-fit-params' answer for the same arguments, beside what our fit emulation changed."""
    from llm_tuner.core.memory import placement_argv
    from llm_tuner.core.memory_log import parse_fitted_args
    from llm_tuner.services.binaries import FIT_PARAMS, BinaryError, locate, run_fit_params

    loc = locate(FIT_PARAMS)
    if loc is None:
        return {"error": "llama-fit-params not found"}
    try:
        run = run_fit_params(Path(loc.path), placement_argv(pargs, for_fit_params=True))
    except BinaryError as exc:
        return {"error": str(exc)}
    fitted = parse_fitted_args(run.stdout)
    if fitted is None:
        tail = (run.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"llama-fit-params could not fit: {tail[:300]}", "ours": list(plan.fit_changes)}
    return {"args": fitted.argv(), "ctx": fitted.ctx, "ngl": fitted.ngl, "tensor_split": list(fitted.tensor_split),
            "overrides": list(fitted.overrides), "ours": {"ctx": plan.n_ctx, "changes": list(plan.fit_changes)}}


def _check(server_args: list[str], plan, devices: list[PlanDevice]) -> dict:
    """Run the real server once and return its buffers per device, beside the differences."""
    from llm_tuner.core.memory_check import check_json
    from llm_tuner.core.memory_log import parse_memory_log
    from llm_tuner.services.binaries import SERVER, locate, measure_server_memory

    loc = locate(SERVER)
    if loc is None:
        return {"error": "llama-server not found"}
    argv = list(server_args)
    if not flags.has(argv, "fit"):
        argv += flags.argv_for("fit", "off")
    run = measure_server_memory(Path(loc.path), argv)
    if not run.loaded:
        tail = run.log.strip().splitlines()[-1:] or ["(no output)"]
        return {"error": f"llama-server did not load: {tail[0][:300]}"}
    return {"devices": check_json(parse_memory_log(run.log), plan, devices), "seconds": round(run.seconds, 2)}
