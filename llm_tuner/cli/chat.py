"""`llm-tuner chat`: one question to a llama-server, its reply streamed, then the server's own speed figures.

    llm-tuner chat (--url URL | --profile NAME|FILE) [--max-tokens N] [--system TEXT] [--model NAME]
                   [--json] "PROMPT"

--url asks a running server (its API key from --api-key or $LLAMA_API_KEY); --profile starts the profile's
server for this one reply (as the Live tab would launch it), and stops it after. The reply streams to stdout
as it arrives; the figures (prompt and generation tokens/s, TTFT, draft acceptance) are the server's own
`timings` of that request, the Chat tab's speed row, on stderr. --json prints one JSON object when the reply
is done instead. `--model` names a router's model (llama-server in router mode answers no request that names
none). Sampling is the server's own defaults (what its command line set). The same service as the Chat tab
(services.chat).

Exit status: 0 a reply came; 1 the server refused or failed (said in one line); 2 bad input; 130 Ctrl-C (the
reply so far is kept on stdout).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading

from llm_tuner.cli.interrupt import Interrupt, positive_int
from llm_tuner.cli.output import CliError, emit_json
from llm_tuner.cli.profile_file import add_trust_argument
from llm_tuner.core import flags

CANCELLED_EXIT = 130
LOAD_TIMEOUT_S = 600.0  # the longest a --profile server may take to load its model


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("chat", help="ask a server one question: the reply streamed, then its speed figures",
                       description=__doc__.split("\n\n")[2], epilog=__doc__.split("\n\n")[-1])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--url", help="a running llama-server (http://host:port)")
    src.add_argument("--profile", metavar="NAME|FILE", help="start this profile's server for the reply, then stop it")
    p.add_argument("prompt", help="the question (one message from the user)")
    p.add_argument("--max-tokens", type=positive_int, default=None, metavar="N",
                   help="generate at most N tokens (default: the server's own limit)")
    p.add_argument("--system", metavar="TEXT", help="a system prompt before the question")
    p.add_argument("--model", metavar="NAME", help="which of a router's models answers")
    p.add_argument("--api-key", default=os.environ.get(flags.API_KEY_ENV),
                   help="with --url: the server's API key (default: $LLAMA_API_KEY, which `ps` does not show)")
    p.add_argument("--json", action="store_true", help="print one JSON object when the reply is done")
    p.add_argument("--timeout", type=float, default=LOAD_TIMEOUT_S, metavar="SECONDS",
                   help=f"with --profile: the longest the server may take to load ({LOAD_TIMEOUT_S:.0f} s)")
    add_trust_argument(p)
    p.set_defaults(func=cmd_chat)


def _check_url(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CliError(f"--url {url!r} is not a server's address: give http://host:port")
    try:
        parts.port  # noqa: B018 - a port that is no number raises here
    except ValueError:
        raise CliError(f"--url {url!r}: the port is not a number") from None
    return url.strip().rstrip("/")


def cmd_chat(args) -> int:
    if not args.prompt.strip():
        raise CliError('nothing to ask: give the question, e.g. llm-tuner chat --url http://127.0.0.1:8080 "Hello"')
    messages = ([{"role": "system", "content": args.system}] if args.system else []) + [
        {"role": "user", "content": args.prompt}]
    if args.url:
        return _ask(_check_url(args.url), args.api_key, messages, args)
    session = _launch(args)
    try:
        return _ask(session.url, session.api_key, messages, args)
    finally:
        session.stop()


def _launch(args):
    """Start the profile's server (as the Live tab does: its own program once confirmed) and wait until it is
    ready; CliError with the server's own reason when it does not get there."""
    from pathlib import Path

    from llm_tuner.cli.profile_file import load_profile, profile_binary
    from llm_tuner.core.cmdline import parse_help
    from llm_tuner.services.binaries import SERVER, BinaryError, probe, read_help
    from llm_tuner.services.launch import plan_from_profile
    from llm_tuner.services.server import ServerSession
    from llm_tuner.services.settings_store import load_settings
    from llm_tuner.services.supervised import ServerState, StateChanged

    loaded = load_profile(args.profile)
    binary = profile_binary(loaded.profile, args.trust_binary)
    if binary:
        try:
            catalog = parse_help(read_help(Path(binary)))
        except BinaryError as exc:
            raise CliError(str(exc)) from None
    else:
        info = probe(SERVER, load_settings(), with_devices=False)
        if not info.ok:
            raise CliError(info.error or "llama-server not found: set its path in Settings")
        binary, catalog = str(info.path), info.catalog
    plan = plan_from_profile(binary, loaded.profile, catalog=catalog, watch=False)
    settled = threading.Event()

    def on_event(ev) -> None:
        if isinstance(ev, StateChanged) and ev.state in (ServerState.READY, ServerState.EXITED):
            settled.set()

    session = ServerSession(plan, on_event)
    print(f"starting {loaded.label!r} on {plan.url} …", file=sys.stderr, flush=True)
    session.start()
    stop = Interrupt()
    with stop:
        while not settled.wait(0.2):
            if stop.event.is_set() or stop.elapsed() > args.timeout:
                session.stop()
                if stop.event.is_set():
                    raise KeyboardInterrupt
                raise CliError(f"{loaded.label!r} did not load within {args.timeout:.0f} s (--timeout)")
    if session.state != ServerState.READY:
        session.wait(10)
        why = session.failure.message if session.failure else "llama-server exited before it was ready"
        tail = [ln for ln in list(session.lines)[-3:] if ln.strip()]
        raise CliError(f"{loaded.label!r} did not start: {why}" + (f" (last line: {tail[-1][:300]})" if tail
                                                                    and not session.failure else ""))
    return session


def _ask(url: str, api_key: str | None, messages: list[dict], args) -> int:
    from llm_tuner.core.units import printable
    from llm_tuner.services.chat import failure_text, speed_text, stream_reply

    params = {"max_tokens": args.max_tokens} if args.max_tokens else {}
    stop = Interrupt()
    shown = [False]

    def on_text(text: str, _reasoning: str) -> None:
        if not args.json and text:
            sys.stdout.write(printable(text, keep_lines=True))  # a reply never acts on the terminal
            sys.stdout.flush()
            shown[0] = True

    with stop:
        try:
            reply = stream_reply(url, api_key, messages, cancel=stop.event, on_text=on_text, model=args.model,
                                 **params)
        except Exception as exc:  # noqa: BLE001 - the server's refusal or a failed connection, in one line
            if shown[0]:
                print()
            print(printable(f"llm-tuner: error: {failure_text(exc)}"), file=sys.stderr)
            return 1
    if args.json:
        emit_json({"url": url, "text": reply.text, "reasoning": reply.reasoning or None,
                   "finish_reason": reply.finish_reason, "cancelled": reply.cancelled, "model": reply.model,
                   "timings": reply.record.to_json() if reply.record is not None else None})
    else:
        if shown[0]:
            print()
        if reply.record is not None:
            print(printable(speed_text(reply.record)), file=sys.stderr)
        elif not reply.cancelled:
            print("the server sent no timings for this reply", file=sys.stderr)
        if reply.finish_reason == "length":
            print("(stopped at the token limit)", file=sys.stderr)
    return CANCELLED_EXIT if reply.cancelled else 0
