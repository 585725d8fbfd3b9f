"""ServerBridge on a real attached session following a recorded `-lv 4` log: each request arrives once, the
memory as frozen snapshots (the latest kept for Live's memory bars), and the Live panel's bars draw it."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from llm_tuner.qt.context import AppContext
from llm_tuner.qt.server_bridge import ServerBridge
from llm_tuner.services import logparse
from llm_tuner.services.supervised import MemorySnapshot

LOG = Path(__file__).parents[1] / "data" / "logs" / "plain_lv4.log"


@pytest.fixture
def ctx(tmp_path):
    from llm_tuner.core.settings import Settings
    from llm_tuner.store.db import open_engine

    return AppContext(settings=Settings(), engine=open_engine(tmp_path / "db.sqlite"))


def _expected():
    parser = logparse.LogParser()
    events = [ev for line in LOG.read_text().splitlines() for ev in parser.feed(line)]
    return ([ev for ev in events if isinstance(ev, logparse.RequestTimings)],
            tuple(ev for ev in events if isinstance(ev, logparse.BufferSize)))


class _Health(BaseHTTPRequestHandler):
    """Someone else's server as an attach sees it with a log file: /health answers ok (the log says the rest)."""

    def do_GET(self) -> None:
        body = b'{"status":"ok"}'
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args) -> None:
        pass


@pytest.fixture
def health_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, name="test-health", daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(5)


def _attach_and_replay(qtbot, bridge: ServerBridge, url: str, tmp_path) -> None:
    log = tmp_path / "server.log"
    log.write_text("")
    bridge.attach(url, log_path=str(log))
    qtbot.waitUntil(lambda: bridge.session is not None and bridge.session.started_unix is not None, timeout=10_000)
    with open(log, "a") as f:
        f.write(LOG.read_text())


def _stop(bridge) -> None:
    """Stop as quitting does (on a `server-stop` thread), and wait for the end."""
    done = bridge.stop_at_quit()
    assert done is None or done.wait(60)


def test_requests_arrive_once_and_memory_as_snapshots(qtbot, health_url, tmp_path):
    timings, buffers = _expected()
    bridge = ServerBridge(gpu_readers={})
    records, snapshots = [], []
    bridge.request_finished.connect(records.append)
    bridge.memory_changed.connect(snapshots.append)
    try:
        _attach_and_replay(qtbot, bridge, health_url, tmp_path)
        qtbot.waitUntil(lambda: len(records) >= len(timings) and bridge.memory.buffers == buffers, timeout=60_000)
        qtbot.wait(300)  # nothing more comes: no second event for a request
    finally:
        _stop(bridge)
    assert [r.task for r in records] == [t.task for t in timings]
    assert all(isinstance(s, MemorySnapshot) for s in snapshots) and snapshots[-1] is bridge.memory
    assert bridge.memory == bridge.session.memory


def test_the_live_memory_bars_draw_the_bridges_snapshot(qtbot, ctx, health_url, tmp_path):
    """The bars are drawn from the snapshot the bridge received (with the telemetry's latest values); a host-only
    machine gives one stack, the host's, with the server's weights, KV cache and compute in it."""
    from llm_tuner.ui.panels.live_panel import LivePanel

    _timings, buffers = _expected()
    bridge = ServerBridge(gpu_readers={})
    panel = LivePanel(ctx, bridge=bridge)
    bridge.setParent(panel)  # goes with the panel, as the panel's own bridges do
    qtbot.addWidget(panel)
    panel.show()
    drawn = []
    original = panel.memory_bars.set_segments
    panel.memory_bars.set_segments = lambda segs, **kw: (drawn.append(segs), original(segs, **kw))
    try:
        _attach_and_replay(qtbot, bridge, health_url, tmp_path)
        qtbot.waitUntil(lambda: bridge.memory.buffers == buffers, timeout=60_000)
        qtbot.waitUntil(lambda: any(s and (s[0].weights_mib or 0) > 0 for s in drawn), timeout=10_000)
    finally:
        _stop(bridge)
    seg = next(s for s in drawn if s and (s[0].weights_mib or 0) > 0)[0]
    assert seg.weights_mib > 100 and seg.kv_mib > 0 and seg.compute_mib > 0


def test_an_attach_whose_log_cannot_be_read_says_so_once_and_follows_the_file_once_it_is_there(
        qtbot, ctx, health_url, tmp_path):
    """Attach naming a log file that is not there (a typo, or a server not started yet): with a log named,
    /slots is not polled, so the Requests tab stayed empty for good and nothing said why. The Live log says it,
    once; the file is followed as soon as it appears."""
    from llm_tuner.ui.panels.live_panel import LivePanel

    timings, _buffers = _expected()
    bridge = ServerBridge(gpu_readers={})
    panel = LivePanel(ctx, bridge=bridge)
    bridge.setParent(panel)
    qtbot.addWidget(panel)
    panel.show()
    log = tmp_path / "server.log"
    records = []
    bridge.request_finished.connect(records.append)
    try:
        panel.attach(health_url, str(log))
        qtbot.waitUntil(lambda: "cannot be read" in panel.log_console.shown_text(), timeout=10_000)
        qtbot.wait(800)  # a few more reads of the missing file
        shown = panel.log_console.shown_text()
        assert shown.count("cannot be read") == 1, shown
        assert str(log) in shown and "No such file" in shown
        log.write_text(LOG.read_text())
        qtbot.waitUntil(lambda: len(records) >= len(timings), timeout=30_000)
    finally:
        _stop(bridge)
    assert [r.task for r in records] == [t.task for t in timings]
