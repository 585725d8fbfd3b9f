"""Quitting with three running servers (real llama-server, the tiny model): they stop in parallel, each on its own
thread, under a small dialog that names them; the GUI thread makes no store, process-wait or HTTP call meanwhile.

Parallel is shown without timing: every stop waits at a barrier of three before it signals its server, so stops
made one after another would break the barrier (and the test). The stops are held until the dialog was seen."""

from __future__ import annotations

import subprocess
import threading

import httpx
import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from sqlalchemy import event

from llm_tuner.services import process
from tests.support.window import open_window


@pytest.fixture
def window(qtbot):
    _ctx, win = open_window(qtbot)
    return win


def _on_gui_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@pytest.mark.server
def test_quitting_stops_three_servers_in_parallel_off_the_gui_thread(qtbot, window, tiny_model, monkeypatch):
    live = window.live_panel
    for _ in range(3):  # the start policy puts each Start beside the running ones, on a port of its own
        live.args_edit.setText(f"-m {tiny_model} -c 512 -np 1 -t 1")
        assert live.start()
        qtbot.waitUntil(live.is_ready, timeout=120_000)
    assert [s.display_state for s in live.servers()] == ["ready"] * 3

    gui_calls: list[str] = []
    barrier = threading.Barrier(3, timeout=120)
    release = threading.Event()
    stop = process.Child.stop

    def parallel_stop(self, *a, **kw):
        barrier.wait()  # all three stops are under way at once, or this breaks
        release.wait(120)
        return stop(self, *a, **kw)

    popen_wait, send = subprocess.Popen.wait, httpx.Client.send

    def spy_wait(self, *a, **kw):
        if _on_gui_thread():
            gui_calls.append(f"process wait {self.args[0]}")
        return popen_wait(self, *a, **kw)

    def spy_send(self, request, *a, **kw):
        if _on_gui_thread():
            gui_calls.append(f"HTTP {request.url}")
        return send(self, request, *a, **kw)

    def spy_sql(_conn, _cursor, statement, *_a) -> None:
        if _on_gui_thread():
            gui_calls.append(f"SQL {statement[:60]}")

    monkeypatch.setattr(process.Child, "stop", parallel_stop)
    monkeypatch.setattr(subprocess.Popen, "wait", spy_wait)
    monkeypatch.setattr(httpx.Client, "send", spy_send)
    event.listen(window.ctx.engine, "before_cursor_execute", spy_sql)
    seen: list[str] = []

    def look_at_the_dialog() -> None:
        dialogs = [w for w in QApplication.topLevelWidgets() if w.objectName() == "stopping_dialog" and w.isVisible()]
        if not dialogs:
            QTimer.singleShot(20, look_at_the_dialog)
            return
        seen.append(dialogs[0].label.text())
        release.set()

    QTimer.singleShot(0, look_at_the_dialog)
    try:
        left = live.shutdown()  # what the application's aboutToQuit runs
    finally:
        release.set()
        event.remove(window.ctx.engine, "before_cursor_execute", spy_sql)
    assert left == [] and not barrier.broken
    # each exit event follows its history's end (written on the stop's thread): it is awaited, generously
    qtbot.waitUntil(lambda: [s.display_state for s in live.servers()] == ["exited"] * 3, timeout=60_000)
    names = [f"{s.name} (port {s.port})" for s in live.servers()]
    assert seen and all(n in seen[0] for n in names), seen  # the dialog named every server still stopping
    assert gui_calls == []
    assert all(f.what != "Stopping the server" for f in window.errors.failures())
