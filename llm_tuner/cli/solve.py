"""`llm-tuner solve {layers,context,split}`: the Plan tab's fit buttons, headless.

    llm-tuner solve layers|context|split [--devices NAME=MiB,...] [--json] [--save-as NAME]
                    (--profile NAME|FILE | -- <llama-server args with -m>)

layers: the most GPU layers (for a MoE model, all layers with the fewest expert blocks on the CPU) at the
context given; context: the largest context with the placement given; split: a -ts that balances the GPUs'
free memory. Each device keeps the margin of `-fitt` (llama.cpp's 1024 MiB when not given), as the buttons do.
The answer and its reason are the Plan tab's own (state.plan.PlanState.solve, the same code), and so is the
change it makes to the profile: `--save-as NAME` saves the changed profile as a new version of NAME.
`--devices` plans for the devices given instead of the detected ones (as `estimate --devices`).

Exit status: 0 an answer was found; 1 nothing fits (the reason says which device is the limit); 2 bad input.
"""

from __future__ import annotations

import argparse
import sys

from llm_tuner.cli.output import CliError, emit_json

GOALS = {"layers": "the most GPU layers (MoE: all layers, the fewest expert blocks on the CPU) at the context "
                   "given",
         "context": "the largest context with the placement given",
         "split": "a tensor split (-ts) that balances the GPUs' free memory"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("solve", help="what fits: the most GPU layers, the largest context or a balanced "
                       "split (the Plan tab's buttons)", description=__doc__.split("\n\n")[2],
                       epilog=__doc__.split("\n\n")[-1])
    gsub = p.add_subparsers(dest="goal", metavar="GOAL", required=True)
    for goal, what in GOALS.items():
        q = gsub.add_parser(goal, help=what, description=what, epilog=__doc__.split("\n\n")[-1])
        add_devices_argument(q)
        q.add_argument("--profile", metavar="NAME|FILE", help="solve for a saved profile (its newest "
                       "version) or a profile file")
        q.add_argument("--save-as", metavar="NAME", help="save the profile with the answer applied as a new "
                       "version of NAME (a new name, or the profile's own to update it)")
        q.add_argument("--json", action="store_true", help="print JSON")
        q.add_argument("server_args", nargs=argparse.REMAINDER, help="-- then llama-server arguments with -m")
        q.set_defaults(func=cmd_solve)


def add_devices_argument(parser: argparse.ArgumentParser) -> None:
    """`--devices NAME=MiB,...`, read as `estimate --devices` reads it (cli.plan.parse_devices)."""
    parser.add_argument("--devices", help="plan for these devices instead of the detected ones: NAME=MiB,... "
                        "(e.g. CUDA0=16384,CUDA1=24576; Host=65536 sets RAM)")


def inventory_here():
    """This machine's devices as the window reads them: llama.cpp's names from the configured llama-server's
    --list-devices (PCI addresses as cached), else the vendors' libraries and the host alone."""
    from llm_tuner.services.binaries import SERVER, BinaryError, locate
    from llm_tuner.services.settings_store import load_settings
    from llm_tuner.services.telemetry.inventory import detect_inventory, inventory_for

    loc = locate(SERVER, load_settings())
    if loc is not None:
        try:
            return inventory_for(loc.path)
        except BinaryError as exc:
            print(f"note: llama-server --list-devices failed ({exc}); planning without its devices", file=sys.stderr)
    return detect_inventory(None)


def _profile(args):
    """The profile to solve for: --profile, or the llama-server arguments after -- (read as `profile
    import`)."""
    from llm_tuner.cli.profile_file import load_profile, refuse_unusable
    from llm_tuner.core.cmdline import import_command
    from llm_tuner.services.binaries import default_catalog

    argv = list(args.server_args or [])
    if argv and argv[0] == "--":
        argv = argv[1:]
    if args.profile:
        if argv:
            raise CliError("give either --profile or llama-server arguments after --, not both")
        return load_profile(args.profile).profile
    if not argv:
        raise CliError("nothing to solve for: give --profile NAME|FILE, or llama-server arguments after -- "
                       "with -m MODEL.gguf")
    result = import_command(argv, default_catalog())
    if result.problem:
        raise CliError(result.problem)
    return refuse_unusable(result.profile, "the arguments")


def _state(args, profile):
    """A PlanState (the Plan tab's) on this machine's devices, or on --devices instead."""
    from llm_tuner.core.devices import DeviceInventory, HostInfo, backend_of
    from llm_tuner.services.settings_store import load_settings
    from llm_tuner.state.plan import PlanState

    planned: list = []
    if args.devices:
        from llm_tuner.cli.plan import parse_devices
        from llm_tuner.services.telemetry.host import host_info

        planned, host = parse_devices(args.devices)
        real = host_info()
        mib = host.capacity_mib if host is not None else real.memory_total_mib
        free = host.capacity_mib if host is not None else real.memory_available_mib
        inv = DeviceInventory(host=HostInfo(cpu_model=real.cpu_model, memory_total_mib=mib, memory_available_mib=free,
                                            cpu_flags=tuple(real.cpu_flags)))
    else:
        inv = inventory_here()
    settings = load_settings()
    state = PlanState(inventory=lambda: inv, settings=lambda: settings)
    for d in planned:
        state.add_planned_device(d.name, backend_of(d.name), d.capacity_mib)
    state.use_profile(profile)
    if state.args_error:  # a value llama-server refuses (-c abc): said as such, not as "no model"
        raise CliError(state.args_error)
    if state.model is None:
        why = state.note or state.no_model_reason or "the profile names no model (-m)"
        raise CliError(f"no model to plan: {why}")
    return state


def cmd_solve(args) -> int:
    from llm_tuner.core.cmdline import profile_to_argv, render_shell
    from llm_tuner.core.flags import mask_argv, mask_env
    from llm_tuner.core.units import printable

    profile = _profile(args)
    state = _state(args, profile)
    if state.rpc_error:
        print(printable(f"warning: RPC workers: {state.rpc_error}"), file=sys.stderr)
    if state.draft_error:
        print(printable(f"warning: the draft model (-md) could not be read, so it is left out of the plan: "
                        f"{state.draft_error}"), file=sys.stderr)
    changed: list = []
    state.add_callback(lambda what, *details: changed.append(details[0]) if what == "profile" else None)
    reason = state.solve(args.goal)
    solved = changed[-1] if changed else None
    plan = state.recompute() if solved is not None else None
    saved = None
    if solved is not None and args.save_as:
        saved = _save(args.save_as, solved, args.goal)
    out_argv, env = profile_to_argv(solved if solved is not None else profile)
    if args.json:
        data = {"goal": args.goal, "found": solved is not None, "reason": reason,
                "changes": _changes(profile, solved), "argv": mask_argv(out_argv), "env": mask_env(env),
                "plan": plan.to_json() if plan is not None else None,
                "fits": plan.fits if plan is not None else None}
        if saved is not None:
            data["saved"] = {"name": saved.name, "version": saved.version, "version_id": saved.version_id}
        emit_json(data)
    else:
        print(printable(reason))
        if solved is not None:
            print(render_shell(out_argv, env, binary=solved.binary))
        if saved is not None:
            print(printable(f"saved as {saved.name!r} version {saved.version}"), file=sys.stderr)
    return 0 if solved is not None and plan is not None and plan.fits is not False else 1


def _changes(before, after) -> dict:
    """The profile's fields the answer changed: {field: value after}."""
    if after is None:
        return {}
    a, b = before.to_dict(), after.to_dict()
    return {k: b.get(k) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def _save(name: str, profile, goal: str):
    from llm_tuner.services.settings_store import database_path
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.profiles import ProfileNameError, ProfileRepository

    try:
        return ProfileRepository(open_engine(database_path())).save(name, profile, note=f"solve {goal}")
    except ProfileNameError as exc:
        raise CliError(f"--save-as: {exc}") from None
