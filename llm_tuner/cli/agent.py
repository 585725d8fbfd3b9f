"""`llm-tuner agent`: serve this machine's GPU samples over HTTP for another machine's Live panel
(headless)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("agent", help="serve this machine's GPU telemetry over HTTP (run it on an RPC worker)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default loopback; anything else requires the token it prints)")
    p.add_argument("--port", type=int, default=None, help="port (default 50100; 0: a free one)")
    p.add_argument("--token", default=None,
                   help="the token clients must send (default: $LLM_TUNER_AGENT_TOKEN, which `ps` does not "
                        "show; else generated when not loopback)")
    p.add_argument("--token-file", metavar="FILE", default=None,
                   help="read the token from the first line of FILE ('-': stdin) instead of the command line")
    p.add_argument("--json", action="store_true", help="print the start line as JSON")
    p.set_defaults(func=cmd_agent)


def cmd_agent(args) -> int:
    # Not even llm_tuner.cli's helpers: the import-linter contract "llm-tuner agent is headless" follows every
    # import of this module, and the package's other commands reach the plots.
    import json
    import sys
    import time

    from llm_tuner.services.agent import DEFAULT_PORT, AgentServer, read_token

    port = DEFAULT_PORT if args.port is None else args.port
    try:
        token = read_token(args.token, args.token_file)
    except ValueError as exc:
        print(f"llm-tuner: error: {exc}", file=sys.stderr)
        return 2
    try:
        agent = AgentServer(args.host, port, token=token)
    except OSError as exc:
        print(f"llm-tuner: error: cannot listen on {args.host}:{port}: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 2
    agent.start()
    try:
        if args.json:
            print(json.dumps({"event": "listening", "url": agent.url, "token": agent.token,
                              "notes": agent.notes}), flush=True)
        else:
            print(f"llm-tuner agent on {agent.url} (GPU samples at /v1/gpus); Ctrl-C stops it", flush=True)
            if agent.token:
                print(f"token: {agent.token}  (give it with the worker in Settings → RPC workers, or "
                      f"llm-tuner workers add HOST:PORT --agent URL --agent-token TOKEN)", flush=True)
            for note in agent.notes:
                print(f"note: {note}", file=sys.stderr)
        while True:
            time.sleep(3600)
    finally:
        agent.stop()
