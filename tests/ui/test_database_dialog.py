"""A damaged history database in the window: one dialog; "start fresh" moves the file aside, "Quit" quits."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QMessageBox


@pytest.mark.parametrize("answer", [QMessageBox.StandardButton.Yes, QMessageBox.StandardButton.Close])
def test_one_dialog_then_fresh_database_or_quit(qtbot, isolated_data_dir, monkeypatch, answer):
    from llm_tuner.app import build_window

    db = isolated_data_dir / "llm-tuner.sqlite"
    db.write_text("not a database\n")
    shown: list[str] = []

    def fake_exec(box):  # the user's click: the dialog itself is the real one
        shown.append(box.text())
        assert box.button(QMessageBox.StandardButton.Yes).text() == "Move it aside and start fresh"
        return answer

    monkeypatch.setattr(QMessageBox, "exec", fake_exec)
    _app, ctx, window = build_window()
    assert len(shown) == 1 and str(db) in shown[0] and "damaged" in shown[0]
    moved = [p for p in isolated_data_dir.iterdir() if p.name.startswith("llm-tuner.sqlite.unusable-")]
    if answer == QMessageBox.StandardButton.Close:
        assert window is None and ctx is None and not moved
        assert db.read_text() == "not a database\n"
        return
    qtbot.addWidget(window)
    with qtbot.waitSignal(ctx.state.inventory_detected, timeout=60_000):
        pass
    assert len(moved) == 1 and moved[0].read_text() == "not a database\n"
    assert db.read_bytes().startswith(b"SQLite format 3")
    from llm_tuner.qt.workers import BackgroundJob

    # the window's start-up jobs (binary probes, the Tune view's knob proposal) end before it closes: under load
    # (CI with llama.cpp building beside it) the proposal still waited for the pool after the leak check's grace
    qtbot.waitUntil(lambda: not BackgroundJob.live_jobs(), timeout=60_000)
