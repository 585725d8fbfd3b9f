"""Closing the window (Ctrl+Q) while a server this app launched runs asks first: quitting stops it.

The question is not asked where nobody can see it (offscreen, as tests run: a failing test closing its
window must not wait on a modal box forever); the first test lets the window believe it is on a display."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication, QMessageBox

pytestmark = pytest.mark.server


def _answer(qtbot, button_text: str, seen: list, tries: int = 200) -> None:
    """Press `button_text` in the question box once it is open (it is modal: the close waits on it); give up
    after `tries` looks 50 ms apart."""
    left = [tries]

    def press() -> None:
        box = QApplication.activeModalWidget()
        if not isinstance(box, QMessageBox):
            left[0] -= 1
            if left[0] > 0:
                QTimer.singleShot(50, press)
            return
        seen.append(box.text())
        next(b for b in box.buttons() if b.text() == button_text).click()

    QTimer.singleShot(50, press)


def _stop(qtbot, live) -> None:
    """Stop the server and let the panel take in its exit (and load its History) before the window goes."""
    live.shutdown()
    qtbot.waitUntil(lambda: live.slot.state == "exited", timeout=30_000)
    qtbot.waitUntil(lambda: live.history_table.rowCount() == 1, timeout=10_000)
    qtbot.wait(200)


def test_quit_with_a_server_running_asks_first(qtbot, demo_model, monkeypatch):
    from llm_tuner.app import build_window

    monkeypatch.delenv("LLM_TUNER_SMOKE_TEST", raising=False)
    monkeypatch.setattr(QGuiApplication, "platformName", staticmethod(lambda: "xcb"))
    _app, _ctx, window = build_window()
    qtbot.addWidget(window)
    window.show()
    live = window.live_panel
    assert live.quit_question() is None
    live.args_edit.setText(f"-m {demo_model} -c 512 -t 1")
    assert live.start()
    qtbot.waitUntil(lambda: live.slot.running, timeout=10_000)
    try:
        question = live.quit_question()
        assert question == f"A server is running ({demo_model.stem}, {live.slot.url}). Stop it and quit?"
        seen: list = []
        _answer(qtbot, "Cancel", seen)
        assert not window.close()  # Cancel: the window and the server stay
        assert seen == [question] and window.isVisible() and live.slot.running
        _answer(qtbot, "Stop and quit", seen)
        assert window.close()
        assert len(seen) == 2 and not window.isVisible()
    finally:
        _stop(qtbot, live)
    assert live.quit_question() is None


def test_nobody_to_ask_quits_without_asking(qtbot, demo_model, monkeypatch):
    """Offscreen (tests) or in a smoke test nobody can answer: the window closes (and the servers stop)."""
    from llm_tuner.app import build_window

    monkeypatch.delenv("LLM_TUNER_SMOKE_TEST", raising=False)
    _app, _ctx, window = build_window()
    qtbot.addWidget(window)
    window.show()
    live = window.live_panel
    live.args_edit.setText(f"-m {demo_model} -c 512 -t 1")
    assert live.start()
    qtbot.waitUntil(lambda: live.slot.running, timeout=10_000)
    seen: list = []
    try:
        assert QGuiApplication.platformName() == "offscreen" and live.quit_question()
        _answer(qtbot, "Cancel", seen, tries=20)  # a question that should not come is refused, not waited on
        assert window.close()
        window.show()
        monkeypatch.setenv("LLM_TUNER_SMOKE_TEST", "1")
        monkeypatch.setattr(QGuiApplication, "platformName", staticmethod(lambda: "xcb"))
        _answer(qtbot, "Cancel", seen, tries=20)
        assert window.close()
        assert seen == []
    finally:
        _stop(qtbot, live)
