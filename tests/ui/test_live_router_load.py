"""Issue 40, with the real llama-server in router mode: Live's Models tab loads and unloads a model, refuses a load
the plan says will not fit (with the figures) unless overridden, warns when the running models do not fit
together, and shows each model's memory, load time, plan and speed."""

from __future__ import annotations

import pytest

from llm_tuner.ui.panels.live_models import HEADERS
from tests.ui.test_live_router import ctx  # noqa: F401 - the fixture: an app context with the real binary

pytestmark = [pytest.mark.server, pytest.mark.timeout(300)]


def _cell(view, name: str, header: str) -> str:
    col = HEADERS.index(header)
    for r in range(view.table.rowCount()):
        if view.table.item(r, 0).text() == name:
            return view.table.item(r, col).text()
    raise AssertionError(f"{name} not listed")


def test_load_and_unload_from_live_and_a_load_that_will_not_fit_is_refused_unless_overridden(
        qtbot, ctx, tiny_model, tmp_path):
    from llm_tuner.services.client import LlamaClient
    from llm_tuner.ui.panels.live_panel import LivePanel

    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "first.gguf").symlink_to(tiny_model)
    (folder / "second.gguf").symlink_to(tiny_model)
    # "huge" may cache 100 TB of prompts in host RAM (--cache-ram): no machine has room for it in the plan, though
    # its instance starts as any other (the cache is only a ceiling)
    preset = tmp_path / "models.ini"
    preset.write_text(f"[*]\ncache-ram = 0\n\n[huge]\nmodel = {tiny_model}\ncache-ram = 100000000\n")
    panel = LivePanel(ctx)
    qtbot.addWidget(panel)
    panel.show()
    panel.args_edit.setText(f"--models-dir {folder} --models-preset {preset} --models-max 3 -c 512 -np 1 -t 2")
    assert panel.start()
    view = panel.router_models
    qtbot.waitUntil(lambda: view.table.rowCount() == 3 and _cell(view, "huge", "Plan") != "—", timeout=60_000)
    assert "Host" in _cell(view, "first", "Plan") and "MiB" in _cell(view, "first", "Plan")
    try:
        view.select_model("first")
        assert view.load_button.isEnabled() and not view.unload_button.isEnabled()
        view.load_button.click()
        qtbot.waitUntil(lambda: view.loaded_names() == ["first"], timeout=60_000)
        qtbot.waitUntil(lambda: _cell(view, "first", "Memory (RSS)").endswith("MiB"), timeout=10_000)
        assert _cell(view, "first", "Loaded in").endswith(" s")
        with LlamaClient(panel.slot.url, model="first", timeout=120) as client:
            client.completion("Hello", n_predict=4)
        qtbot.waitUntil(lambda: "t/s generation" in _cell(view, "first", "Speed"), timeout=30_000)

        view.select_model("huge")
        view.load_button.click()  # refused by the plan, with its figures; nothing asked of the router
        assert view.message.text().startswith("Not loaded: huge does not fit beside first: Host: ")
        assert "MiB short" in view.message.text()
        qtbot.wait(2500)  # a poll of the router's list or more: it was not asked to load
        assert _cell(view, "huge", "State") == "unloaded"

        view.override_box.setChecked(True)
        view.load_button.click()
        qtbot.waitUntil(lambda: sorted(view.loaded_names()) == ["first", "huge"], timeout=60_000)
        qtbot.waitUntil(lambda: not view.warning.isHidden(), timeout=10_000)  # running ones that do not fit
        assert "do not fit together" in view.warning.text() and "models-autoload" in view.warning.text()

        view.select_model("first")
        assert view.unload_button.isEnabled()
        view.unload_button.click()
        qtbot.waitUntil(lambda: view.loaded_names() == ["huge"], timeout=60_000)
        assert _cell(view, "first", "Memory (RSS)") == "—"
    finally:
        panel.stop_server()
        qtbot.waitUntil(lambda: not panel.slot.running, timeout=30_000)
