"""Issue 22 in the window: a wrong paste cannot be imported; Start and Run refuse a profile the advice knows will
fail (no model, a value llama-server refuses) and offer "anyway"; a failed server's own command stays in Live.
Real widgets offscreen, a real SQLite file, the real llama-server where one starts."""

from __future__ import annotations

import shlex

import pytest

from llm_tuner.core.cmdline import import_command
from llm_tuner.core.settings import Settings
from llm_tuner.qt.context import AppContext
from llm_tuner.services.binaries import default_catalog
from llm_tuner.store.db import open_engine


@pytest.fixture
def ctx(tmp_path):
    from llm_tuner.services.binaries import SERVER, probe

    c = AppContext(settings=Settings(), engine=open_engine(tmp_path / "ui.sqlite"))
    c.state.set_binaries({SERVER: probe(SERVER, with_devices=False)})
    yield c
    c.engine.dispose()


@pytest.mark.parametrize(("text", "importable"), [("hello, this is my shopping list", False),
                                                   ("--frobnicate 3", False), ("llama-server -m m.gguf", True)])
def test_the_paste_dialog_keeps_import_disabled_for_a_wrong_paste(qtbot, text, importable):
    from PySide6.QtWidgets import QDialogButtonBox

    from llm_tuner.ui.dialogs.paste_command_dialog import PasteCommandDialog

    dlg = PasteCommandDialog(default_catalog())
    qtbot.addWidget(dlg)
    with qtbot.waitSignal(dlg.read_finished, timeout=5000):
        dlg.set_text(text)
    assert dlg.buttons.button(QDialogButtonBox.StandardButton.Ok).isEnabled() is importable
    assert ("Not importable" in dlg.report.text()) is not importable


@pytest.mark.server
def test_live_refuses_a_profile_with_advice_errors_and_offers_launch_anyway(qtbot, ctx, tmp_path):
    from llm_tuner.ui.panels.live_panel import LivePanel
    from llm_tuner.ui.panels.profile_panel import ProfilePanel

    profile_panel = ProfilePanel(ctx)
    qtbot.addWidget(profile_panel)
    live = LivePanel(ctx)
    qtbot.addWidget(live)
    live.show()
    profile_panel.set_profile(import_command(f"-m {tmp_path / 'm.gguf'} -c abc", default_catalog()).profile)
    assert live.fleet.from_editor and live.anyway_button.isHidden()
    assert not live.start()
    text = live.message_label.text()
    assert text.startswith("Not started:") and "-c needs a whole number, got 'abc'" in text and "Launch anyway" in text
    assert not live.anyway_button.isHidden() and live.slot.state == "idle" and live.slot.plan is None
    profile_panel.set_profile(import_command("-c 4096", default_catalog()).profile)  # router mode without a model
    assert not live.start() and "no model" in live.message_label.text()


@pytest.mark.server
def test_typed_arguments_without_a_model_are_refused_too(qtbot, ctx):
    from llm_tuner.ui.panels.live_panel import LivePanel

    live = LivePanel(ctx)
    qtbot.addWidget(live)
    live.args_edit.setText("-c 4096 --port 0")
    assert not live.start() and "no model" in live.message_label.text()
    assert live.slot.plan is None  # nothing started: no green "Ready" for a router with no model


@pytest.mark.server
def test_launch_anyway_starts_it(qtbot, ctx):
    from llm_tuner.ui.panels.live_panel import LivePanel

    live = LivePanel(ctx)
    qtbot.addWidget(live)
    live.show()
    live.args_edit.setText("-c 4096")
    assert not live.start()
    live.anyway_button.click()  # the user's explicit choice (a fork's router, say)
    assert live.slot.plan is not None and live.anyway_button.isHidden()
    qtbot.waitUntil(lambda: live.is_ready() or not live.slot.running, timeout=60_000)
    live.stop_server()
    qtbot.waitUntil(lambda: not live.slot.running, timeout=30_000)


def test_bench_refuses_the_edited_profiles_errors_and_offers_run_anyway(qtbot, ctx, tmp_path):
    from llm_tuner.ui.panels.bench_panel import BenchPanel
    from llm_tuner.ui.panels.profile_panel import ProfilePanel

    profile_panel = ProfilePanel(ctx)
    qtbot.addWidget(profile_panel)
    bench = BenchPanel(ctx)
    qtbot.addWidget(bench)
    bench.show()
    profile_panel.set_profile(import_command(f"-m {tmp_path / 'm.gguf'} -fa maybe", default_catalog()).profile)
    bench.run_button.click()  # Run waits for the profile's store call (the workspace's store_busy), then checks
    qtbot.waitUntil(lambda: bench.status_label.text().startswith("Cannot start:"), timeout=10_000)
    text = bench.status_label.text()
    assert text.startswith("Cannot start:") and "-fa takes on|off|auto, got 'maybe'" in text
    assert not bench.anyway_button.isHidden() and not bench.session.is_running()


@pytest.mark.server
def test_after_a_failure_the_args_line_shows_the_failed_sessions_command(qtbot, ctx, tmp_path):
    """Issue 22 item 11: the editor moved on to another profile while the first one failed to start."""
    from llm_tuner.core.profile import LaunchProfile
    from llm_tuner.ui.panels.live_panel import LivePanel

    live = LivePanel(ctx)
    qtbot.addWidget(live)
    live.show()
    first = tmp_path / "first.gguf"
    first.write_bytes(b"GGUF" + b"\0" * 64)  # llama-server refuses it at load
    ctx.state.set_profile(LaunchProfile(model=str(first), ctx_size=1024))
    assert live.start(force=True)
    ctx.state.set_profile(LaunchProfile(model=str(tmp_path / "second.gguf"), ctx_size=2048))
    # while it starts, the line is its own command (issue 35 item 12); the edit is what the next Start launches
    assert "first.gguf" in live.args_edit.text() and "second.gguf" in live.fleet.command
    qtbot.waitUntil(lambda: "did not start" in live.state_label.text(), timeout=60_000)  # issue 34's words
    assert "did not start" in live.message_label.text()
    words = shlex.split(live.args_edit.text())
    assert str(first) in words and str(tmp_path / "second.gguf") not in words


def test_the_profile_tab_says_a_folder_is_a_folder(qtbot, ctx, tmp_path):
    """Issue 22 item 8 in the window: the background look at the model is the header reader's (one look)."""
    from llm_tuner.core.profile import LaunchProfile
    from llm_tuner.ui.panels.profile_panel import ProfilePanel

    folder = tmp_path / "x.gguf"
    folder.mkdir()
    panel = ProfilePanel(ctx)
    qtbot.addWidget(panel)
    panel.set_profile(LaunchProfile(model=str(folder)))
    qtbot.waitUntil(lambda: any(a.id == "model-file-unreadable" for a in panel.advice), timeout=10_000)
    texts = [panel.advice_list.item(i).text() for i in range(panel.advice_list.count())]
    assert f"ERROR: {folder} is a folder, not a model file" in texts
    assert not any("does not exist" in t for t in texts)
    assert [a.id for a in ctx.state.profile_errors] == ["model-file-unreadable"]  # Launch and Run refuse it
