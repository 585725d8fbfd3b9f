"""`llm-tuner router plan|presets`: a router (llama-server without -m) planned as a whole, and its presets
file.

`router plan [--devices NAME=MiB,...] [--models-dir DIR | --preset FILE] [--margin MiB] [--json] -- ARGS`
plans every model the router would serve (ARGS: the router's own arguments, which every instance gets; its
--models-dir/--models-preset count when not given here): each model's memory, the sets that fit together, the
pairs that do not and the safe --models-max. Exit 1 when a model does not fit even alone.

`router presets write --profile NAME ... [--model NAME=FILE ...] [--devices ...] -o FILE` writes a
--models-preset file from saved profiles (a model without a profile gets the fit solver's placement);
`router presets read FILE [--save]` reads one back as profiles (and saves them).

`router bench (--url URL | --profile NAME | -- ARGS) [bench options] [--models A,B]` measures every model of a
router with the same spec, one after another, kept as one group (side by side in the History and `runs
compare`).
"""

from __future__ import annotations

import argparse
import sys

from llm_tuner.cli import bench as bench_cli
from llm_tuner.cli.output import CliError, emit_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("router", help="a router's models planned together; its presets file")
    rsub = p.add_subparsers(dest="router_command", metavar="SUBCOMMAND")
    plan = rsub.add_parser("plan", help="which of a router's models fit together, and the safe --models-max")
    plan.add_argument("--json", action="store_true", help="print JSON (the default output is a short table)")
    plan.add_argument(
        "--devices",
        help="plan for these devices instead of the detected ones: NAME=MiB,... "
        "(e.g. CUDA0=24576,CUDA1=24576,Host=65536)",
    )
    plan.add_argument("--models-dir", dest="models_dir", metavar="DIR", help="the router's models folder")
    plan.add_argument("--preset", metavar="FILE", help="the router's presets file (--models-preset)")
    plan.add_argument(
        "--margin",
        type=int,
        metavar="MiB",
        help="free memory to keep on each GPU (default: the "
        "largest -fitt of the instances, 1024 MiB unless set)",
    )
    plan.add_argument(
        "server_args", nargs=argparse.REMAINDER, help="-- then the router's llama-server arguments"
    )
    plan.set_defaults(func=_plan)
    pre = rsub.add_parser("presets", help="write a presets file from profiles, or read one into profiles")
    psub = pre.add_subparsers(dest="presets_command", metavar="ACTION")
    w = psub.add_parser("write", help="write a --models-preset file from saved profiles")
    w.add_argument("--profile", action="append", default=[], metavar="NAME|FILE", help="a profile (repeat)")
    w.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="a model without a profile: the fit solver places it (repeat)",
    )
    w.add_argument("--devices", help="solve for these devices instead of the detected ones: NAME=MiB,...")
    w.add_argument("-o", "--output", required=True, metavar="FILE", help="the presets file to write")
    w.set_defaults(func=_write)
    r = psub.add_parser("read", help="read a presets file as profiles")
    r.add_argument("file", metavar="FILE")
    r.add_argument("--save", action="store_true", help="save each model's profile under its section's name")
    r.set_defaults(func=_read)
    pre.set_defaults(func=lambda _a: (pre.print_help(), 2)[1])
    b = rsub.add_parser("bench", help="measure every model of a router with the same spec, side by side")
    bench_cli._add_run_options(b)
    b.add_argument("--models", metavar="A,B", help="only these of the router's models (default: every one)")
    b.set_defaults(func=_bench)
    p.set_defaults(func=lambda _a: (p.print_help(), 2)[1])


def _devices(text: str | None, server_args: list[str]):
    from llm_tuner.cli.plan import detect_devices, parse_devices

    gpus, host, cpu_flags = detect_devices(server_args)
    if text:
        planned, planned_host = parse_devices(text)
        gpus, host = planned, planned_host or host
    return gpus, host, cpu_flags


def _plan(args: argparse.Namespace) -> int:
    from llm_tuner.core.router_presets import PresetError
    from llm_tuner.services.router_presets import plan_models, router_model_argvs

    server_args = list(args.server_args)
    if server_args and server_args[0] == "--":
        server_args = server_args[1:]
    try:
        named = router_model_argvs(server_args, models_dir=args.models_dir, preset=args.preset)
    except (OSError, PresetError) as exc:
        raise CliError(f"cannot read the router's models: {exc}") from None
    if not named:
        raise CliError(
            "no models: give --models-dir DIR or --preset FILE (or the router's own "
            "--models-dir/--models-preset after --)"
        )
    gpus, host, cpu_flags = _devices(args.devices, server_args)
    rp = plan_models(named, gpus, host, cpu_flags=cpu_flags, margin_mib=args.margin)
    code = 1 if rp.alone_not_fitting or rp.models_max is None else 0
    if args.json:
        emit_json(rp.to_json())
        return code
    for line in rp.text_lines():
        print(line, file=sys.stderr if line.startswith("warning: ") else sys.stdout)
    return code


def _write(args: argparse.Namespace) -> int:
    from llm_tuner.cli.profile_file import load_profile
    from llm_tuner.services.router_presets import presets_for, write_presets

    profiles = {}
    for ref in args.profile:
        loaded = load_profile(ref)
        profiles[loaded.label] = loaded.profile
    models = {}
    for spec in args.model:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise CliError(f"--model {spec!r}: give NAME=FILE")
        models[name] = path
    if not profiles and not models:
        raise CliError("nothing to write: give --profile NAME (repeat) and/or --model NAME=FILE")
    gpus, host, _flags = _devices(args.devices, []) if models else ([], None, ())
    presets = presets_for(profiles, models, gpus, host)
    path = write_presets(args.output, presets, "written by llm-tuner router presets write")
    emit_json({"file": str(path), "global": presets.global_options, "models": presets.models})
    return 0


def _read(args: argparse.Namespace) -> int:
    from llm_tuner.core.cmdline import profile_to_argv
    from llm_tuner.core.router_presets import PresetError
    from llm_tuner.services.router_presets import profiles_in

    try:
        profiles = profiles_in(args.file)
    except (OSError, PresetError) as exc:
        raise CliError(f"cannot read {args.file}: {exc}") from None
    saved = {}
    if args.save:
        from llm_tuner.services.settings_store import database_path
        from llm_tuner.store.db import open_engine
        from llm_tuner.store.profiles import ProfileRepository

        repo = ProfileRepository(open_engine(database_path()))
        saved = {
            name: repo.save(name, p, note=f"from the presets file {args.file}").version
            for name, p in profiles.items()
        }
    emit_json(
        {
            "profiles": {
                name: {"argv": profile_to_argv(p)[0], "saved_version": saved.get(name)}
                for name, p in profiles.items()
            }
        }
    )
    return 0


def _bench(args: argparse.Namespace) -> int:
    from llm_tuner.core.bench_report import run_summary
    from llm_tuner.services.bench import BenchError
    from llm_tuner.services.router_bench import bench_router_models

    target, spec = bench_cli._with_binary(bench_cli.resolve_target(args), args), bench_cli._spec(args)
    bench_cli._preflight(target, args)
    models = [m.strip() for m in args.models.split(",") if m.strip()] if args.models else None
    try:
        group_id, runs = bench_router_models(
            bench_cli._runner(args), target, spec, models, progress=bench_cli._progress()
        )
    except BenchError as exc:
        raise CliError(str(exc)) from None
    code = 0 if runs and all(r.status == "complete" for r in runs) else 1
    if args.json:
        emit_json(
            {
                "group_id": group_id,
                "models": [r.spec.model for r in runs],
                "runs": [bench_cli.run_json(r) for r in runs],
            }
        )
        return code
    rows = [(r.spec.model or "?", r.status, run_summary(r)["metrics"]) for r in runs]
    keys = sorted(
        {k for _n, _s, m in rows for k in m if k.startswith(("gen_tps@", "prefill_tps@", "ttft_ms@"))}
    )
    width = max([5, *(len(n) for n, _s, _m in rows)])
    print(f"{'model':{width}} {'status':9} " + " ".join(f"{k:>16}" for k in keys))
    for name, status, m in rows:
        print(
            f"{name:{width}} {status:9} "
            + " ".join(
                f"{m[k]['median']:16.1f}" if k in m and m[k].get("median") is not None else f"{'—':>16}"
                for k in keys
            )
        )
    print(f"group {group_id}: medians per model (t/s; TTFT in ms)")
    return code
