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
def test_live_lists_a_routers_models_and_names_each_requests_model(qtbot, ctx, tiny_model, tmp_path):
    from llm_tuner.services.client import LlamaClient
    from llm_tuner.ui.panels.live_panel import LivePanel

    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "first.gguf").symlink_to(tiny_model)
    (folder / "second.gguf").symlink_to(tiny_model)
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


def test_show_all_reads_a_routers_requests_back_with_their_models(qtbot, tmp_path):
    """The history keeps each request's model: "Show all" reads a router session back from the real SQLite file
    and the Requests table's Model column names them."""
    from llm_tuner.core.session import RequestRecord
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.sessions import SessionRepository
    from llm_tuner.ui.panels.live_requests import RequestsView

    repo = SessionRepository(open_engine(tmp_path / "history.sqlite"))
    sid = repo.begin(["llama-server", "--models-dir", "/srv/models"], started_unix=1_000_000.0)
    recs = [RequestRecord(time_unix=1_000_001.0 + i, slot=0, task=i, cache_n=0, prompt_n=8, prompt_ms=4.0,
                          prompt_per_second=2000.0, predicted_n=4, predicted_ms=40.0, predicted_per_second=100.0,
                          model=("first", "second")[i % 2]) for i in range(6)]
    repo.add_requests(sid, recs)
    view = RequestsView(max_rows=2)
    qtbot.addWidget(view)
    view.show()
    view.reset([], 6)  # a fresh view of the session: its requests are in the history only
    assert view.table.isColumnHidden(MODEL_COLUMN)
    view.read_all(repo, sid, lambda: (6, []))
    qtbot.waitUntil(lambda: view.model.rowCount() == 6, timeout=10_000)
    assert [view.model.index(r, MODEL_COLUMN).data() for r in range(6)] == ["first", "second"] * 3
    assert not view.table.isColumnHidden(MODEL_COLUMN)


def test_the_models_tab_binds_its_state_a_refused_load_asks_nothing(qtbot, tmp_path):
    """Live's Models view shows RouterModelsState's rows and words; Load is enabled by the state's rules and a
    load the plan refuses says its figures without a request to the router (there is none at this URL)."""
    from dataclasses import replace

    from llm_tuner.core.memory import host_device
    from llm_tuner.core.memory.router import plan_router
    from llm_tuner.core.server_endpoints import RouterModel
    from llm_tuner.services.library import read_model
    from llm_tuner.services.router_watch import RouterModels
    from llm_tuner.ui.panels.live_models import HEADERS, RouterModelsView
    from tests.support.router_models import write_three

    folder = write_three(tmp_path, ("a", "b"))
    infos = {n: read_model(folder / f"{n}.gguf") for n in ("a", "b")}
    host = host_device(None)
    plan = plan_router({n: ["-m", str(folder / f"{n}.gguf"), "-c", "4096", "--cache-ram", "0"] for n in infos},
                       infos, (), host)
    a, b = (plan.model(n).use_mib["Host"] for n in ("a", "b"))
    plan = replace(plan, budgets_mib={"Host": a + b + plan.margins_mib.get("Host", 0) - 1.0})
    view = RouterModelsView()
    qtbot.addWidget(view)
    view.show()
    listed = RouterModels((RouterModel("a", "loaded"), RouterModel("b", "unloaded", path="/m/b.gguf")), plan=plan)
    view.show_models(listed, url="http://127.0.0.1:9")
    assert view.table.rowCount() == 2 and view.loaded_names() == ["a"]
    assert view.table.item(1, HEADERS.index("File")).toolTip() == "/m/b.gguf"
    assert view.summary.text().startswith("2 model(s); loaded: a.")
    assert not view.load_button.isEnabled() and not view.unload_button.isEnabled()  # nothing selected
    view.select_model("a")
    assert view.unload_button.isEnabled() and not view.load_button.isEnabled()
    view.select_model("b")
    assert view.load_button.isEnabled()
    view.load_button.click()
    assert view.message.text().startswith("Not loaded: b does not fit beside a: Host: ")
    assert not view.actions.jobs  # nothing was asked of the router
    view.show_models(RouterModels((RouterModel("a", "loaded"), RouterModel("b", "loaded")), plan=plan),
                     url="http://127.0.0.1:9")  # another client loaded b
    assert view.warning.isVisible() and "do not fit together" in view.warning.text()
    view.show_models(None)
    assert view.table.rowCount() == 0 and view.warning.isHidden()
