"""`llm-tuner run`: start (or attach to) a llama-server and print one JSON object per event.

    llm-tuner run --json-lines [--duration SECONDS]
                  (--profile NAME|FILE | --attach URL [--log FILE] | -- <llama-server args>)

Events:
    {"event": "plan"}       the command and what the app adds
    {"event": "state"}
    {"event": "listening", "url"}
    {"event": "memory"}
    {"event": "request", <the server's timings keys>, "ttft_ms", "latency_ms"}
    {"event": "sample", "source": "gpu"|"host"|"server", ...}
    {"event": "exited", "code", "reason"}
    {"event": "history", "ok", "unsaved", "lost", "error", "text"}
                            when writing the history fails, and when it catches up
    {"event": "refused", "errors"}
                            see below

SIGINT (Ctrl-C) stops the server cleanly (SIGINT, then SIGTERM, then SIGKILL) and exits.
A profile (or arguments) with advice errors (no model, a value llama-server refuses, a missing model file,
...) is refused before anything starts: {"event": "refused", "errors"}, exit 1; --force launches it anyway.
With --attach, nothing answering for --connect-timeout seconds (5), or a server that stops answering (state
"gone") for --gone-after seconds (10), ends the run with exit 1 and the reason.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path

from llm_tuner.cli.output import CliError, RawDescription, emit_json
from llm_tuner.cli.profile_file import add_trust_argument, load_profile, profile_binary
from llm_tuner.core import flags


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="start or attach to llama-server and stream events as JSON lines",
                       description=__doc__, formatter_class=RawDescription)
    p.add_argument("--json-lines", action="store_true", help="print one JSON object per event (the only format)")
    p.add_argument("--duration", type=float, default=None, metavar="SECONDS",
                   help="stop after this many seconds (default: until Ctrl-C or the server exits)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--profile", metavar="NAME|FILE", help="a saved profile's name or a profile JSON file")
    src.add_argument("--attach", metavar="URL", help="watch a server someone else started (not stopped on exit)")
    p.add_argument("--log", metavar="FILE", help="with --attach: the server's log file, for precise request records")
    p.add_argument("--connect-timeout", type=float, default=5.0, metavar="SECONDS",
                   help="with --attach: end with exit 1 when nothing has answered this long (5 s)")
    p.add_argument("--gone-after", type=float, default=10.0, metavar="SECONDS",
                   help="with --attach: end with exit 1 when the server has stopped answering this long (10 s)")
    p.add_argument("--api-key", default=os.environ.get(flags.API_KEY_ENV),
                   help="with --attach: the server's API key (default: $LLAMA_API_KEY, which `ps` does not show)")
    p.add_argument("--binary", help="the llama-server to run (default: the profile's own once confirmed, "
                   "else the configured or embedded one)")
    add_trust_argument(p)
    p.add_argument("--force", action="store_true",
                   help="launch even when the profile has advice errors (llama-server would refuse or fail; "
                   "a fork may accept them). Without it such a launch is refused: event \"refused\", exit 1")
    p.add_argument("--no-watch-flags", action="store_true",
                   help="do not add --metrics/--log-jsonl (fewer server figures; requests still come from the log)")
    p.add_argument("--no-samples", action="store_true", help="no telemetry samplers")
    p.add_argument("--gpu-interval", type=float, default=0.5, metavar="S", help="GPU sample interval (0.5 s)")
    p.add_argument("--host-interval", type=float, default=1.0, metavar="S", help="host sample interval (1 s)")
    p.add_argument("--server-interval", type=float, default=1.0, metavar="S", help="/metrics interval (1 s)")
    p.add_argument("--no-store", action="store_true", help="do not record the session in the database")
    p.add_argument("server_args", nargs=argparse.REMAINDER, help="after --: llama-server arguments")
    p.set_defaults(func=cmd_run)


def _event_json(ev, pci: dict[str, str] | None = None) -> dict | None:
    """One event as JSON. `pci`: the devices' PCI addresses known so far (cached, and this log's "using
    device" lines), so a memory table also says what is unaccounted per physical GPU ("pools")."""
    from llm_tuner.services import logparse
    from llm_tuner.services.supervised import RequestFinished, ServerState, StateChanged
    from llm_tuner.services.watch import HistoryStatus

    if isinstance(ev, StateChanged):
        d = ev.to_json()
        if ev.state == ServerState.EXITED:
            return [d, {"event": "exited", "code": ev.code, "reason": ev.reason,
                        "failure": ev.failure.kind if ev.failure else None,
                        "message": ev.failure.message if ev.failure else None}]
        return d
    if isinstance(ev, logparse.Listening):
        return {"event": "listening", "url": ev.url}
    if isinstance(ev, RequestFinished):
        d = {"event": "request"}
        d.update(ev.record.to_json())
        return d
    if isinstance(ev, logparse.MemoryBreakdown):
        return {"event": "memory", "source": ev.source, "rows": [r.__dict__ for r in ev.rows],
                "pools": [p.to_json() for p in ev.pooled((pci or {}).get)]}
    if isinstance(ev, logparse.ServerError):
        return {"event": "log", "level": "error", "text": ev.text}
    if isinstance(ev, HistoryStatus):
        return {**ev.to_json(), "text": ev.text()}
    return None


def _load_profile_plan(loaded, binary: str, catalog, watch: bool):
    """(plan, profile version id) for a profile the one loader read (cli.profile_file)."""
    from llm_tuner.services.launch import plan_from_profile

    return plan_from_profile(binary, loaded.profile, catalog=catalog, watch=watch), loaded.version_id


def cmd_run(args) -> int:
    from llm_tuner.core.devices import DeviceIdLine
    from llm_tuner.services.attach import AttachedSession
    from llm_tuner.services.binaries import SERVER, probe
    from llm_tuner.services.device_ids import cached_ids
    from llm_tuner.services.launch import plan_launch
    from llm_tuner.services.server import ServerSession
    from llm_tuner.services.settings_store import load_settings
    from llm_tuner.services.telemetry.sampler import sample_to_json
    from llm_tuner.services.watch import WatchedServer
    from llm_tuner.store.db import DatabaseError

    lock = threading.Lock()

    def out(obj) -> None:
        with lock:
            for o in obj if isinstance(obj, list) else [obj]:
                emit_json(o)

    pci: dict[str, str] = {}  # device -> PCI address: one card under two backends is one memory pool

    def on_event(ev) -> None:
        if isinstance(ev, DeviceIdLine) and ev.pci_bus_id:
            pci[ev.name] = ev.pci_bus_id
        d = _event_json(ev, pci)
        if d is not None:
            out(d)

    def on_samples(samples) -> None:
        out([sample_to_json(s) for s in samples])

    version_id = None
    server_args = list(args.server_args)
    if server_args and server_args[0] == "--":
        server_args = server_args[1:]
    settings = load_settings()
    if args.attach:
        session = AttachedSession(args.attach, on_event, log_path=args.log, api_key=args.api_key,
                                  connect_timeout_s=args.connect_timeout, gone_grace_s=args.gone_after)
        out({"event": "plan", "mode": "attach", "url": args.attach, "log": args.log,
             "note": None if args.log else "no log file: request records come from /slots and /metrics (approximate)"})
    else:
        # the profile first: a bad file or an unconfirmed program stops here, before anything runs
        loaded = load_profile(args.profile) if args.profile else None
        own = profile_binary(loaded.profile, args.trust_binary) if loaded is not None and not args.binary else None
        if args.binary or own:
            from llm_tuner.core.cmdline import parse_help
            from llm_tuner.services.binaries import read_help

            binary = args.binary or own
            try:
                catalog = parse_help(read_help(Path(binary)))
            except Exception:  # noqa: BLE001 - launch anyway; only --metrics is added
                catalog = None
        else:
            info = probe(SERVER, settings, with_devices=False)
            if not info.ok:
                raise CliError(info.error or "llama-server not found")
            binary, catalog = str(info.path), info.catalog
        if args.profile:
            plan, version_id = _load_profile_plan(loaded, binary, catalog, not args.no_watch_flags)
        elif server_args:
            plan = plan_launch(binary, server_args, catalog=catalog, watch=not args.no_watch_flags)
        else:
            raise CliError("give --profile NAME|FILE, --attach URL, or llama-server arguments after --")
        pci.update(cached_ids(plan.binary))
        session = ServerSession(plan, on_event)
        out({"event": "plan", "mode": "launch", "command": plan.command_line(),
             "watch_args": list(plan.watch_args), "notes": plan.notes()})
        if not args.force:  # pre-flight: what the advice already knows fails is not started
            from llm_tuner.services.binaries import default_catalog
            from llm_tuner.services.preflight import preflight_errors, refusal_text

            errors = preflight_errors(loaded.profile if loaded is not None else None, catalog or default_catalog(),
                                      argv=server_args)
            if errors:
                out({"event": "refused", "errors": [a.to_json() for a in errors], "message": refusal_text(errors)})
                print(f"llm-tuner: not started: {refusal_text(errors)}", file=sys.stderr)
                return 1

    repo = None
    if not args.no_store:
        try:
            from llm_tuner.services.settings_store import database_path
            from llm_tuner.store.db import open_engine
            from llm_tuner.store.sessions import SessionRepository

            repo = SessionRepository(open_engine(database_path()))
            repo.close_interrupted()  # sessions a killed `run` or window left open
        except DatabaseError:
            raise  # one clear message and a non-zero exit (cli.main), before anything starts
        except Exception as exc:  # noqa: BLE001 - watching works without the history
            out({"event": "log", "level": "warn", "text": f"session not recorded: {exc}"})
    rates = {"gpu": args.gpu_interval, "host": args.host_interval, "server": args.server_interval}
    watched = WatchedServer(session, repo=repo, profile_version_id=version_id, on_event=on_event, on_samples=on_samples, rates_s=rates,
                            telemetry=not args.no_samples)
    for note in watched.notes:
        out({"event": "log", "level": "info", "text": note})

    stop = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    prev_term = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        watched.start()
        deadline = time.monotonic() + args.duration if args.duration else None
        while not stop.is_set() and not watched.wait(0.2):
            if deadline is not None and time.monotonic() >= deadline:
                break
        watched.stop()
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, prev_term)
    code = session.exit_code
    failed = session.failure is not None
    sys.stdout.flush()
    lost = watched.history.lost > 0  # requests the history could not keep (said in a "history" event)
    return 1 if failed or lost or (code not in (None, 0) and not stop.is_set()) else 0
