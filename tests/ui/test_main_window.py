"""The window opens on real parts: the embedded llama-server is found and shown in the status bar."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.window import open_window


@pytest.mark.server
def test_window_shows_areas_and_the_server_found(qtbot):
    ctx, window = open_window(qtbot)
    tabs = [window.tabs.tabText(i) for i in range(window.tabs.count())]
    assert tabs == ["Profile", "Plan", "Live", "Chat", "Benchmarks", "Compare", "Tune"]
    assert window.models_dock.windowTitle() == "Models"
    assert window.server_label.text().startswith("llama-server ")
    assert "CPU" in window.server_label.text()
    assert "CPU only" in window.devices_label.text()
    # the build as a benchmark's run names it (`--version` reads 0.6.0-dev for every build of the package)
    from llm_tuner.services.binaries import build_stamp

    stamp = build_stamp(None, ctx.settings)
    assert stamp is not None and f"llama-server build {stamp.short} [" in window.server_label.text()
    assert "--version: " in window.server_label.toolTip()


def test_smoke_test_flag_exits_zero():
    out = subprocess.run([sys.executable, "-m", "llm_tuner", "--smoke-test"], capture_output=True, text=True,
                         timeout=120, env={**__import__("os").environ, "QT_QPA_PLATFORM": "offscreen"})
    assert out.returncode == 0, out.stderr[-2000:]


def test_version_flag():
    out = subprocess.run([sys.executable, "-m", "llm_tuner", "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    assert out.stdout.startswith("llm-tuner ")


def test_settings_change_reprobes_and_reports_a_bad_server_path(qtbot, tmp_path):
    from llm_tuner.services.settings_store import load_settings

    ctx, window = open_window(qtbot)
    bad = ctx.settings.model_copy(update={"llama_server_path": str(tmp_path / "missing-server"),
                                          "model_folders": [str(tmp_path)]})
    window.apply_settings(bad)
    # the re-probe's answer, not the start-up probe's (which may finish later on a busy machine)
    qtbot.waitUntil(lambda: window.server_label.text() == "llama-server: not usable", timeout=120_000)
    assert "does not exist" in window.server_label.toolTip()
    assert load_settings().model_folders == [str(tmp_path)]  # saved, survives a restart


def test_window_layout_and_tab_are_restored_on_restart(qtbot):
    from llm_tuner.app import build_window

    _app, _ctx, window = build_window()
    qtbot.addWidget(window)
    window.tabs.setCurrentIndex(3)
    window.close()
    _app, _ctx, again = build_window()
    qtbot.addWidget(again)
    assert again.tabs.currentIndex() == 3


def test_plots_follow_a_switch_to_a_dark_palette(qtbot):
    """A desktop switching to dark changes the app palette: every plot's background and axes follow."""
    import pyqtgraph as pg
    from PySide6.QtGui import QColor, QPalette
    from PySide6.QtWidgets import QApplication

    from llm_tuner.app import build_window

    app, _ctx, window = build_window()
    qtbot.addWidget(window)
    light = QApplication.palette()
    views = window.findChildren(pg.GraphicsView)
    assert len(views) >= 5  # live devices, memory by owner, throughput, benchmark and compare charts
    try:
        dark = QPalette(light)
        dark.setColor(QPalette.ColorRole.Base, QColor("#1e1e1e"))
        dark.setColor(QPalette.ColorRole.Text, QColor("#e6e6e6"))
        app.setPalette(dark)
        qtbot.waitUntil(lambda: all(v.backgroundBrush().color() == QColor("#1e1e1e") for v in views), timeout=5000)
        axes = [i for v in views for i in v.scene().items() if isinstance(i, pg.AxisItem)]
        assert axes and all(a.textPen().color() == QColor("#e6e6e6") for a in axes)
    finally:
        app.setPalette(light)
        pg.setConfigOptions(background=light.color(QPalette.ColorRole.Base), foreground=light.color(QPalette.ColorRole.Text))


def test_a_fresh_window_shows_no_error_before_the_user_did_anything(qtbot):
    """Issue 35 item 9: a new window's Advice names the first step (pick a model) without a red ERROR; Start still
    refuses a command with no model, and a profile the user set up without one gets the error."""
    from PySide6.QtCore import Qt

    from llm_tuner.app import build_window
    from llm_tuner.core.profile import LaunchProfile

    _app, ctx, window = build_window()
    qtbot.addWidget(window)
    advice = window.profile_panel.advice_list
    items = [advice.item(i) for i in range(advice.count())]
    texts = [i.text() for i in items]
    assert not any(t.startswith("ERROR") for t in texts), texts
    assert any("pick a model" in t.lower() for t in texts), texts
    step = next(i for i in items if i.data(Qt.ItemDataRole.UserRole) == "no-model")
    assert step.foreground().color().name() != "#c62828"  # not painted as an error
    assert [a.id for a in ctx.state.profile_errors] == ["no-model"]  # Start refuses it, and says why
    window.profile_panel.set_profile(LaunchProfile(ctx_size=4096))  # the user set something, still no model
    texts = [advice.item(i).text() for i in range(advice.count())]
    assert any(t.startswith("ERROR: no model") for t in texts), texts
