"""`llm-tuner workers list|add|remove|start|stop|devices`: llama.cpp RPC workers (ggml-rpc-server)."""

from __future__ import annotations

import argparse

from llm_tuner.cli.output import CliError, emit_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("workers", help="llama.cpp RPC workers (ggml-rpc-server): list, add, start, devices")
    wsub = p.add_subparsers(dest="workers_command", metavar="ACTION", required=True)
    q = wsub.add_parser("list", help="the workers in Settings, with reachability")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=cmd_list)
    q = wsub.add_parser("add", help="add a worker (host:port) to Settings")
    q.add_argument("endpoint", help="host:port of its ggml-rpc-server")
    q.add_argument("--agent", metavar="URL", help="the llm-tuner agent on that machine (its GPU telemetry)")
    q.add_argument("--agent-token", metavar="TOKEN",
                   help="the token the agent printed at start (default: $LLM_TUNER_AGENT_TOKEN, which `ps` does not show)")
    q.add_argument("--agent-token-file", metavar="FILE", help="read the agent's token from FILE ('-': stdin)")
    q.add_argument("--json", action="store_true", help="print JSON (the worker as Settings keep it, no token)")
    q.set_defaults(func=cmd_add)
    q = wsub.add_parser("remove", help="remove a worker from Settings")
    q.add_argument("endpoint")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=cmd_remove)
    q = wsub.add_parser("start", help="run a local ggml-rpc-server until Ctrl-C (loopback unless --host)")
    q.add_argument("--host", default="127.0.0.1", help="address to bind (anything but loopback is insecure)")
    q.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    q.add_argument("--device", default="", help="comma-separated devices to expose (CPU, CUDA0, ...; default all)")
    q.add_argument("--threads", type=int, default=None, help="threads for the CPU device")
    q.add_argument("--cache", metavar="DIR", default=None,
                   help="cache folder for received tensors (a restarted llama-server need not re-send weights)")
    q.add_argument("--add", action="store_true", help="also add it to Settings' workers")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=cmd_start)
    q = wsub.add_parser("stop", help="stop a local ggml-rpc-server of yours listening on host:port")
    q.add_argument("endpoint")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=cmd_stop)
    q = wsub.add_parser("devices", help="the workers' devices as llama-server sees them (RPC0, RPC1, ...); a "
                        "worker that does not answer is named with why (exit 1; 2 when none answers)")
    q.add_argument("endpoints", nargs="*", help="host:port ... (default: the workers in Settings)")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=cmd_devices)


def _settings():
    from llm_tuner.services.settings_store import load_settings

    return load_settings()


def _check(endpoint: str) -> str:
    from llm_tuner.core.rpc import parse_endpoint

    try:
        parse_endpoint(endpoint)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return endpoint.strip()


def cmd_list(args) -> int:
    from llm_tuner.services.rpc import reachable

    rows = [{**w.model_dump(exclude={"agent_token"}), "error": reachable(w.endpoint)} for w in _settings().rpc_workers]
    if args.json:
        emit_json(rows)
    else:
        for r in rows:
            print(f"{r['endpoint']}: {r['error'] or 'reachable'}" + (f" · agent {r['agent_url']}" if r["agent_url"] else ""))
        if not rows:
            print("no workers: llm-tuner workers add HOST:PORT (or workers start --add)")
    return 0


def cmd_add(args) -> int:
    from llm_tuner.core.settings import RpcWorker
    from llm_tuner.services.agent import read_token
    from llm_tuner.services.settings_store import save_settings

    endpoint = _check(args.endpoint)
    try:
        given = args.agent or args.agent_token or args.agent_token_file
        token = read_token(args.agent_token, args.agent_token_file) if given else None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    s = _settings()
    worker = RpcWorker(endpoint=endpoint, agent_url=args.agent, agent_token=token)
    s.rpc_workers = [w for w in s.rpc_workers if w.endpoint != endpoint] + [worker]
    save_settings(s)
    if args.json:
        emit_json({"added": worker.model_dump(exclude={"agent_token"}), "agent_token_set": token is not None})
    else:
        print(f"added {endpoint}")
    return 0


def cmd_remove(args) -> int:
    from llm_tuner.services.settings_store import save_settings

    s = _settings()
    kept = [w for w in s.rpc_workers if w.endpoint != args.endpoint.strip()]
    if len(kept) == len(s.rpc_workers):
        raise CliError(f"no worker {args.endpoint} in Settings")
    s.rpc_workers = kept
    save_settings(s)
    if args.json:
        emit_json({"removed": args.endpoint.strip()})
    else:
        print(f"removed {args.endpoint}")
    return 0


def cmd_start(args) -> int:
    import sys
    import time

    from llm_tuner.core.settings import RpcWorker
    from llm_tuner.services.rpc import WorkerError, WorkerPool, WorkerSpec
    from llm_tuner.services.settings_store import save_settings

    spec = WorkerSpec(args.host, args.port, tuple(d for d in args.device.split(",") if d), args.threads, args.cache)
    pool = WorkerPool()
    try:
        worker = pool.start(spec, _settings())
    except WorkerError as exc:
        raise CliError(str(exc)) from None
    try:
        if worker.warning:
            print(f"warning: {worker.warning}", file=sys.stderr)
        if args.add:
            s = _settings()
            if all(w.endpoint != worker.endpoint for w in s.rpc_workers):
                s.rpc_workers.append(RpcWorker(endpoint=worker.endpoint))
                save_settings(s)
        if args.json:
            emit_json({"event": "started", **worker.to_json()})
        else:
            print(f"ggml-rpc-server listening on {worker.endpoint} (pid {worker.pid}); Ctrl-C stops it", flush=True)
        while worker.alive():
            time.sleep(0.5)
        return 1  # it ended on its own
    finally:
        pool.stop_all()


def cmd_stop(args) -> int:
    from llm_tuner.services.rpc import stop_local_worker

    endpoint = _check(args.endpoint)
    pid = stop_local_worker(endpoint)
    if pid is None:
        raise CliError(f"no ggml-rpc-server of yours listens on {args.endpoint} here")
    if args.json:
        emit_json({"stopped": endpoint, "pid": pid})
    else:
        print(f"stopped ggml-rpc-server (pid {pid})")
    return 0


def cmd_devices(args) -> int:
    from llm_tuner.services.rpc import devices_json, workers_devices

    settings = _settings()
    endpoints = [_check(e) for e in args.endpoints] or [w.endpoint for w in settings.rpc_workers]
    if not endpoints:
        raise CliError("no workers given and none in Settings")
    devices, errors = workers_devices(endpoints, settings)
    if not devices and errors:
        raise CliError("; ".join(f"{ep}: {why}" for ep, why in errors.items()))
    rows = devices_json(devices)
    if args.json:
        emit_json(rows + [{"endpoint": ep, "error": why} for ep, why in errors.items()])
    else:
        for r in rows:
            print(f"{r['name']}: {r['endpoint']} · {r['memory_total_mib']} MiB ({r['memory_free_mib']} MiB free)")
        for ep, why in errors.items():
            print(f"{ep}: no devices: {why}")
    return 1 if errors else 0
