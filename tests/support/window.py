"""The app's real main window for a UI test, once its start-up device inventory has arrived."""

from __future__ import annotations


def open_window(qtbot):
    """(context, window) of `app.build_window()`, owned by qtbot, after `inventory_detected` (at most 60 s)."""
    from llm_tuner.app import build_window

    _app, ctx, win = build_window()
    qtbot.addWidget(win)
    with qtbot.waitSignal(ctx.state.inventory_detected, timeout=60_000):
        pass
    return ctx, win
