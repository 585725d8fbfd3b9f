"""`llm-tuner devices`, `llm-tuner binaries` and `llm-tuner database` (check or move aside the history
file)."""

from __future__ import annotations

import argparse

from llm_tuner.cli.output import DATABASE_EXIT, CliError, emit_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("devices", help="list the host and GPUs (llama.cpp names where a binary says)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--rpc", metavar="HOST:PORT,...", default="",
                   help="also list these RPC workers' devices (RPC0, RPC1, ...: endpoint and memory)")
    p.set_defaults(func=cmd_devices)
    p = sub.add_parser("binaries", help="which llama-server / llama-bench / llama-fit-params are used")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_binaries)
    p = sub.add_parser("database", help="check the history database, or move an unusable one aside")
    p.add_argument("action", choices=("check", "move-aside"),
                   help="check: quick integrity and version check; move-aside: rename an unusable file "
                        "(never deleted) so the next start creates a fresh one")
    p.add_argument("--json", action="store_true",
                   help="print JSON (path, ok, error, moved_to); exit codes as without")
    p.set_defaults(func=cmd_database)


def _probe_all():
    from llm_tuner.services.binaries import KINDS, probe
    from llm_tuner.services.settings_store import load_settings

    settings = load_settings()
    return {kind: probe(kind, settings, with_build=True) for kind in KINDS}


def cmd_devices(args) -> int:
    from llm_tuner.core.rpc import split_endpoints
    from llm_tuner.services.binaries import SERVER, BinaryError, list_devices, locate
    from llm_tuner.services.demo_model import find_demo_model
    from llm_tuner.services.rpc import devices_json
    from llm_tuner.services.settings_store import load_settings
    from llm_tuner.services.telemetry.inventory import detect_inventory, inventory_for

    try:
        rpc = split_endpoints(args.rpc)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    inv, notes = None, []
    loc = locate(SERVER, load_settings())
    if loc is None and rpc:
        raise CliError("llama-server not found: it is what reads the RPC workers' devices")
    if loc is not None:
        # PCI addresses: cached from earlier loads, else learned once with the demo model (a card, two
        # backends)
        try:
            listed = list_devices(loc.path, rpc) if rpc else None  # with the workers' RPC devices
            inv = inventory_for(loc.path, learn_with=find_demo_model(), devices=listed)
        except BinaryError as exc:
            if rpc:
                raise CliError(str(exc)) from None
            notes.append(f"llama-server --list-devices failed: {exc}")
    inv = inv or detect_inventory(None)
    data = inv.to_json()
    data["llama_devices"] = devices_json(list(inv.llama_devices))
    data["notes"] += notes
    if args.json:
        emit_json(data)
    else:
        print("\n".join(devices_text(data)))
    return 0


def devices_text(data: dict) -> list[str]:
    """`llm-tuner devices` as text, from DeviceInventory.to_json(): one line per physical GPU, with every
    llama.cpp name it has ("CUDA0 = Vulkan0, one card") and which of those are only a guess by model name and
    memory."""
    h = data["host"]
    out = [f"Host: {h['cpu_model']} · {h['cores_physical']} cores / {h['cores_logical']} threads · "
           f"{h['memory_total_mib']} MiB RAM ({h['memory_available_mib']} MiB available)"]
    for d in data["devices"]:
        names = d.get("llama_names") or [d["name"]]
        head = " = ".join(names) + (", one card" if len(names) > 1 else "")
        line = (f"{head}: {d['model']} · {d['memory_total_mib']} MiB ({d['memory_free_mib']} MiB free)"
                f" · {d['pci_bus_id'] or 'PCI address unknown'}")
        if d.get("guessed_names"):
            line += (f" · {', '.join(d['guessed_names'])}: matched by model name and memory only (a guess; "
                     "a model load tells the PCI address)")
        out.append(line)
    out.extend(f"{d['name']}: RPC worker {d['endpoint']} · {d['memory_total_mib']} MiB "
               f"({d['memory_free_mib']} MiB free)"
               for d in data.get("llama_devices", ()) if d.get("endpoint"))
    out.extend(f"note: {n}" for n in data["notes"])
    return out


def cmd_binaries(args) -> int:
    from llm_tuner.services.binaries import RPC_SERVER, locate
    from llm_tuner.services.settings_store import load_settings

    infos = _probe_all()
    data = {kind.replace("-", "_"): info.to_json() for kind, info in infos.items()}
    rpc = locate(RPC_SERVER, load_settings())  # the RPC worker: located, not run
    data["ggml_rpc_server"] = {"path": str(rpc.path) if rpc else None, "source": rpc.source if rpc else None}
    if args.json:
        emit_json(data)
    else:
        for kind, info in infos.items():
            if info.ok:
                print(f"{kind}: {info.path} ({info.source}) {info.build_text} "
                      f"[{', '.join(info.backends)}], "
                      + (f"{len(info.catalog.flags)} flags" if info.catalog
                         else "its --help could not be read"))
            else:
                print(f"{kind}: {info.error}")
        print(f"{RPC_SERVER}: {rpc.path} ({rpc.source})" if rpc else f"{RPC_SERVER}: not found (RPC workers)")
    return 0 if infos["llama-server"].ok else 1


def cmd_database(args) -> int:
    from llm_tuner.services.settings_store import database_path, load_settings
    from llm_tuner.store.db import DatabaseError, move_aside, open_engine

    path = database_path(load_settings().data_dir)
    try:
        open_engine(path, migrate=False).dispose()
    except DatabaseError as exc:
        if args.action == "check":
            if not args.json:
                raise
            emit_json({"path": str(path), "ok": False, "error": str(exc), "moved_to": None})
            return DATABASE_EXIT
        moved = move_aside(path)
        if args.json:
            emit_json({"path": str(path), "ok": False, "error": str(exc), "moved_to": str(moved)})
        else:
            print(f"moved {path} aside to {moved}; the next start creates a fresh database")
        return 0
    if args.json:
        emit_json({"path": str(path), "ok": True, "error": None, "moved_to": None})
    else:
        print(f"{path}: ok" + ("" if args.action == "check" else " (usable, not moved)"))
    return 0
