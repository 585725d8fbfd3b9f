"""Attach: a server that stops answering is reported ("gone", then a failed exit); a dead URL fails in seconds."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from llm_tuner.services.launch import free_port
from tests.conftest import start_server


def test_attach_to_a_dead_url_fails_within_seconds():
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "llm_tuner", "run", "--json-lines", "--no-samples",
                           "--connect-timeout", "1", "--attach", f"http://127.0.0.1:{free_port()}"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert time.monotonic() - t0 < 20
    exited = [json.loads(x) for x in proc.stdout.splitlines()][-1]
    assert exited["event"] == "exited" and exited["failure"] == "unreachable"
    assert "nothing answers at http://127.0.0.1:" in exited["message"]
    assert "Traceback" not in proc.stderr


def test_a_server_that_goes_away_is_reported_gone_then_the_run_fails(server_binary, tiny_model):
    server = start_server(server_binary, tiny_model, ctx=512)
    cli = subprocess.Popen([sys.executable, "-m", "llm_tuner", "run", "--json-lines", "--no-samples", "--gone-after",
                            "1", "--attach", server.url], stdout=subprocess.PIPE, text=True)
    events = []
    try:
        for raw in cli.stdout:
            ev = json.loads(raw)
            events.append(ev)
            if ev.get("state") == "ready":
                server.process._proc.send_signal(signal.SIGKILL)  # crashes: nobody stops it cleanly
        assert cli.wait(30) == 1
    finally:
        server.client.close()
        server.process.stop()
        if cli.poll() is None:
            cli.kill()
            cli.wait()
        cli.stdout.close()
    states = [e["state"] for e in events if e["event"] == "state"]
    assert "gone" in states[states.index("ready"):]
    exited = events[-1]
    assert exited["event"] == "exited" and exited["failure"] == "gone"
    assert "stopped answering" in exited["message"]


def test_attach_to_a_server_without_slots_says_so_once_and_stops_asking(server_binary, tiny_model):
    """--no-slots: /slots answers 501, after which llama-server closes the connection while promising keep-alive.
    The attach says once that requests cannot be seen without the log, and does not ask /slots again (it did every
    poll: a new connection each time, and a health request could meet the closing one)."""
    from llm_tuner.services.attach import AttachedSession
    from llm_tuner.services.logparse import LogLine
    from llm_tuner.services.supervised import ServerState, StateChanged
    from tests.integration.test_server_session import Events

    server = start_server(server_binary, tiny_model, "--no-slots", ctx=512)
    events = Events()
    session = AttachedSession(server.url, events, poll_s=0.02)
    try:
        session.start()
        events.wait_for(lambda e: isinstance(e, StateChanged) and e.state == ServerState.READY, 20)
        server.client.completion("Hello", n_predict=8)
        time.sleep(0.5)  # ~20 polls
    finally:
        session.stop()
        server.client.close()
        server.process.stop()
    warnings = [e.text for e in events.items if isinstance(e, LogLine)]
    assert len(warnings) == 1 and "--no-slots" in warnings[0], warnings
    assert ServerState.GONE not in [e.state for e in events.items if isinstance(e, StateChanged)]
