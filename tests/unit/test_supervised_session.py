"""The supervised-session interface: both kinds implement it, a request is one event, memory comes as snapshots.

A recorded real llama-server log (`-lv 4`: buffer lines and request timings, tests/data/logs) is appended to a
file an AttachedSession follows, as it does for a server someone else started; its events are compared with what
the log parser reads from the same file.
"""

from __future__ import annotations

import inspect
import threading
import time
from pathlib import Path

from llm_tuner.services import logparse
from llm_tuner.services.attach import AttachedSession
from llm_tuner.services.launch import free_port, plan_launch
from llm_tuner.services.server import ServerSession
from llm_tuner.services.supervised import (
    MemorySnapshot,
    RequestFinished,
    ServerState,
    StateChanged,
    SupervisedSession,
)

LOG = Path(__file__).parents[1] / "data" / "logs" / "plain_lv4.log"


def test_both_kinds_implement_the_whole_interface():
    for cls in (ServerSession, AttachedSession):
        assert issubclass(cls, SupervisedSession) and not inspect.isabstract(cls), cls
    launch = ServerSession(plan_launch("/bin/llama-server", ["-m", "m.gguf"], port=free_port()), lambda ev: None)
    attach = AttachedSession("http://127.0.0.1:9", lambda ev: None, api_key="k")
    assert (launch.kind, launch.plan.port, launch.pid, launch.api_key) == ("launch", launch.plan.port, None, None)
    assert (attach.kind, attach.plan, attach.pid, attach.api_key, attach.url) == (
        "attach", None, None, "k", "http://127.0.0.1:9")
    for s in (launch, attach):
        assert s.state == ServerState.IDLE and s.memory == MemorySnapshot() and not s.alive()


def test_a_followed_log_gives_one_event_per_request_and_memory_snapshots(tmp_path):
    parser = logparse.LogParser()  # one parser over the whole file, as the session reads it
    expected = [ev for line in LOG.read_text().splitlines() for ev in parser.feed(line)]
    timings = [ev for ev in expected if isinstance(ev, logparse.RequestTimings)]
    buffers = tuple(ev for ev in expected if isinstance(ev, logparse.BufferSize))
    breakdowns = [ev for ev in expected if isinstance(ev, logparse.MemoryBreakdown)]
    assert len(timings) >= 2 and len(buffers) >= 2 and breakdowns  # the recording has all three

    events: list[object] = []
    lock = threading.Lock()

    def on_event(ev) -> None:
        with lock:
            events.append(ev)

    log = tmp_path / "server.log"
    log.write_text("")
    session = AttachedSession(f"http://127.0.0.1:{free_port()}", on_event, log_path=log, poll_s=0.2,
                              connect_timeout_s=60)
    session.start()
    try:
        with open(log, "a") as f:
            f.write(LOG.read_text())
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with lock:
                if sum(isinstance(e, RequestFinished) for e in events) >= len(timings) and session.memory.buffers \
                        == buffers:
                    break
            time.sleep(0.05)
    finally:
        session.stop()
    assert session.wait(5) and session.state == ServerState.EXITED and session.exit_reason == "detached"

    records = [e.record for e in events if isinstance(e, RequestFinished)]
    assert [(r.task, r.prompt_n, r.predicted_n) for r in records] == [
        (t.task, t.prompt_n, t.predicted_n) for t in timings]
    assert not any(isinstance(e, logparse.RequestTimings) for e in events)  # the record is the only event
    assert all(not r.approximate for r in records)
    snapshots = [e for e in events if isinstance(e, MemorySnapshot)]
    assert len(snapshots) == len(buffers) + len(breakdowns)  # one per memory line or table, each frozen, growing
    grown = [len(s.buffers) for s in snapshots]
    assert grown == sorted(grown) and set(range(1, len(buffers) + 1)) <= set(grown)
    assert snapshots[-1] == session.memory and session.memory == MemorySnapshot(breakdowns[-1], buffers)
    assert [e.state for e in events if isinstance(e, StateChanged)][-1] == ServerState.EXITED
