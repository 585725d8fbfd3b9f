"""Issue 40: the Plan tab plans a router profile's models together (their folder, two planned GPUs) and writes
its presets file; a plain profile shows no router box."""

from __future__ import annotations

import pytest

from llm_tuner.core.cmdline import import_command
from llm_tuner.core.devices import DeviceInventory, HostInfo
from llm_tuner.core.settings import Settings
from llm_tuner.qt.context import AppContext
from llm_tuner.store.db import open_engine
from llm_tuner.ui.panels.plan_panel import PlanPanel
from tests.support.router_models import write_three


@pytest.fixture
def panel(qtbot, tmp_path):
    ctx = AppContext(settings=Settings(), engine=open_engine(tmp_path / "plan.sqlite"))
    ctx.state.set_inventory(DeviceInventory(host=HostInfo(memory_total_mib=65536, memory_available_mib=60000)))
    w = PlanPanel(ctx)
    qtbot.addWidget(w)
    w.resize(1100, 900)
    w.show()
    yield w
    ctx.engine.dispose()


def test_the_plan_tab_plans_a_routers_models_together_on_planned_gpus(qtbot, panel, tmp_path):
    folder = write_three(tmp_path / "models", ("a", "b"))
    box = panel.router_box
    panel.ctx.state.set_profile(import_command("-m /nowhere.gguf -c 512").profile)
    assert not box.isVisible()
    panel.plan_state.add_planned_device("CUDA0", "CUDA", 24576)
    panel.plan_state.add_planned_device("CUDA1", "CUDA", 24576)
    panel.ctx.state.set_profile(import_command(f"--models-dir {folder} -c 32768 -ngl 99 --cache-ram 0").profile)
    qtbot.waitUntil(lambda: box.isVisible() and box.table.rowCount() == 4, timeout=60_000)
    headers = [box.table.horizontalHeaderItem(c).text() for c in range(box.table.columnCount())]
    assert headers == ["Model", "CUDA0 (MiB)", "CUDA1 (MiB)", "Host (MiB)"]
    assert [box.table.item(r, 0).text() for r in range(4)] == ["a", "b", "available", "margin"]
    assert float(box.table.item(0, 1).text()) < float(box.table.item(1, 1).text())  # b's deeper K/V
    assert "Sets that fit together: {a, b}" in box.lines.text() and "--models-max 2" in box.lines.text()

    from llm_tuner.services.router_presets import read_presets
    from llm_tuner.store.profiles import ProfileRepository

    repo = ProfileRepository(panel.ctx.engine)
    repo.save("a", import_command(f"-m {folder / 'a.gguf'} -c 4096 -ctk q8_0 -ctv q8_0 -fa on").profile)
    out = tmp_path / "models.ini"
    job = box.write_presets(str(out))  # started: its `finished` may come before a waitSignal could connect
    qtbot.waitUntil(lambda: job.is_finished, timeout=60_000)
    written = read_presets(out)
    assert written.models["a"]["cache-type-k"] == "q8_0"  # its saved profile's K/V settings
    assert "n-gpu-layers" in written.models["b"] and "cache-type-k" not in written.models["b"]  # the solver's
    assert "from the saved profiles a" in box.summary.text()

    job = box.open_presets(str(out))
    qtbot.waitUntil(lambda: job.is_finished, timeout=60_000)
    assert set(box.opened) == {"a", "b"} and "2 model(s) saved as profiles" in box.summary.text()
    assert repo.latest("b").profile.model == str(folder / "b.gguf")
    assert repo.latest("a").version == 1  # read back, "a" equals its saved profile: no second version
