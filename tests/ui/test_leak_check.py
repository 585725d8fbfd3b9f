"""The autouse leak check (tests/support/leak_check.py) fails a test that leaves ours alive, naming it."""

from __future__ import annotations

import threading

import pytest

from tests.support import leak_check


def _check(monkeypatch, leak, cleanup):
    """Run the check around `leak()`; return the failure message (None: no failure). `cleanup` runs after."""
    gen = leak_check.watch(monkeypatch, grace_s=0.3)
    next(gen)
    try:
        leak()
        with pytest.raises(StopIteration):
            next(gen)
        return None
    except pytest.fail.Exception as exc:
        return str(exc)
    finally:
        cleanup()


def test_a_sampler_thread_left_running_is_named(qtbot, monkeypatch):
    from llm_tuner.services.telemetry.sampler import Sampler

    sampler = Sampler("left", lambda: [], 3600.0, lambda _s: None)
    message = _check(monkeypatch, sampler.start, sampler.stop)
    assert message is not None and "thread 'llm-tuner:sampler-left'" in message
    # A thread stopped in time is no leak.
    sampler = Sampler("stopped", lambda: [], 3600.0, lambda _s: None)
    assert _check(monkeypatch, lambda: (sampler.start(), sampler.stop()), lambda: None) is None


def test_a_running_job_a_timer_and_a_shown_widget_are_named(qtbot, monkeypatch):
    from llm_tuner.qt.gui_gc import GuiThreadCollector
    from llm_tuner.qt.workers import BackgroundJob
    from llm_tuner.ui.widgets import ElidedLabel

    release = threading.Event()
    left = {}

    def leak():
        left["job"] = BackgroundJob(lambda _ctl: release.wait(10), what="Waiting").start(long=True)
        left["collector"] = GuiThreadCollector(interval_ms=60_000)
        left["label"] = ElidedLabel()
        left["label"].show()

    def cleanup():
        release.set()
        qtbot.waitUntil(lambda: not BackgroundJob.live_jobs(), timeout=60_000)  # a busy machine

    message = _check(monkeypatch, leak, cleanup)
    assert message is not None
    assert "background job " in message and "leak.<locals>.<lambda>" in message
    assert "(Waiting; running, its function entered on jobs-long_" in message  # where the job stands, as its executor says
    # Where the stuck job waits: its thread's stack names the line (a CI failure says more than "alive").
    assert "The other threads now:" in message and "release.wait(10)" in message
    assert "active QTimer started at gui_gc.py" in message
    assert "top-level widget ElidedLabel" in message and "(shown)" in message
    # The check cleaned up the timer and the widget, so the next test starts clean.
    assert not left["collector"]._timer.isActive()
