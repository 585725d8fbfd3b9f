"""Router mode in the window, with the real llama-server: the Profile tab says a profile is a router; Live's Models
tab lists the router's models from its own /models and follows a load, and the Requests table names the model of
each request."""

from __future__ import annotations

import threading

import pytest

from llm_tuner.core.cmdline import import_command
from llm_tuner.qt.context import AppContext
from llm_tuner.qt.request_table_model import MODEL_COLUMN


@pytest.fixture
def ctx(tmp_path):
    from llm_tuner.core.settings import Settings
    from llm_tuner.services.binaries import SERVER, probe
    from llm_tuner.store.db import open_engine

    c = AppContext(settings=Settings(), engine=open_engine(tmp_path / "db.sqlite"))
    c.state.set_binaries({SERVER: probe(SERVER, with_devices=False)})
    yield c
    c.engine.dispose()


def test_the_profile_tab_says_when_a_profile_is_a_router(qtbot, ctx):
    from llm_tuner.ui.panels.profile_panel import ProfilePanel

    panel = ProfilePanel(ctx)
    qtbot.addWidget(panel)
    panel.show()
    panel.set_profile(import_command("--models-dir /srv/models -c 4096").profile)
    assert panel.router_line.isVisible() and "Router mode" in panel.router_line.text()
    assert "/srv/models" in panel.router_line.text() and not ctx.state.profile_errors
    panel.set_profile(import_command("-c 4096").profile)  # neither a model nor a router: an error, no line
    assert not panel.router_line.isVisible() and [a.id for a in ctx.state.profile_errors] == ["no-model"]


@pytest.mark.server
@pytest.mark.timeout(300)
def test_live_lists_a_routers_models_and_names_each_requests_model(qtbot, ctx, demo_model, tmp_path):
    from llm_tuner.services.client import LlamaClient
    from llm_tuner.ui.panels.live_panel import LivePanel

    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "first.gguf").symlink_to(demo_model)
    (folder / "second.gguf").symlink_to(demo_model)
    panel = LivePanel(ctx)
    qtbot.addWidget(panel)
    panel.show()
    panel.args_edit.setText(f"--models-dir {folder} --models-max 1 -c 512 -np 1 -t 2")
    assert panel.start()
    models_tab = panel.tabs.indexOf(panel.router_models)
    qtbot.waitUntil(lambda: panel.tabs.isTabVisible(models_tab), timeout=60_000)
    table = panel.router_models.table
    assert [table.item(r, 0).text() for r in range(table.rowCount())] == ["first", "second"]
    assert panel.router_models.loaded_names() == [] and "loaded: none" in panel.router_models.summary.text()

    def ask() -> None:
        with LlamaClient(panel.slot.url, model="second", timeout=240) as client:
            client.completion("Hello", n_predict=4)

    asker = threading.Thread(target=ask)
    asker.start()
    try:
        qtbot.waitUntil(lambda: panel.request_model.rowCount() == 1, timeout=240_000)
        qtbot.waitUntil(lambda: panel.router_models.loaded_names() == ["second"], timeout=30_000)
    finally:
        asker.join(240)
    assert panel.request_model.index(0, MODEL_COLUMN).data() == "second"
    assert not panel.request_table.isColumnHidden(MODEL_COLUMN)
    panel.stop_server()
    qtbot.waitUntil(lambda: not panel.slot.running, timeout=30_000)


def test_benchmarks_name_the_routers_model_to_measure(qtbot, ctx):
    from llm_tuner.ui.panels.bench_panel import BenchPanel

    panel = BenchPanel(ctx)
    qtbot.addWidget(panel)
    assert panel.spec().model is None  # a server of one model: no name sent
    panel.router_model_edit.setText(" second ")
    assert panel.spec().model == "second" and panel.spec().describe().startswith("model second")
