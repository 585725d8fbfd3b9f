"""The Benchmarks tab's "Every router model" button (issue 40): the real panel offscreen, a router profile (no -m,
--models-dir) as the Profile tab publishes it, the real BenchRunner starting the real llama-server in router
mode: each model measured with the form's spec, one after another, kept as one group and shown side by side in
the panel's sweep table; the progress names each model."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

pytestmark = [pytest.mark.server, pytest.mark.timeout(600)]


def test_every_router_model_from_the_panel_is_measured_side_by_side(qtbot, tiny_model, tmp_path):
    from llm_tuner.core.cmdline import import_command
    from llm_tuner.core.settings import Settings
    from llm_tuner.qt.context import AppContext
    from llm_tuner.store.db import open_engine
    from llm_tuner.ui.panels.bench_panel import BenchPanel

    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "one.gguf").symlink_to(tiny_model)
    (folder / "two.gguf").symlink_to(tiny_model)
    ctx = AppContext(settings=Settings(), engine=open_engine(tmp_path / "h.sqlite"))
    panel = BenchPanel(ctx)
    qtbot.addWidget(panel)
    ctx.state.set_profile(import_command(f"--models-dir {folder} --models-max 1 -c 512 -np 1 -t 2").profile)
    panel.show()
    qtbot.waitExposed(panel)
    panel.prompt_edit.setText("16")
    panel.gen_spin.setValue(4)
    panel.reps_spin.setValue(1)
    panel.warmup_spin.setValue(0)
    panel.label_edit.setText("router")
    progress: list[str] = []
    panel.session.progressed.connect(lambda _f, text: progress.append(text))
    assert panel.router_all_button.isEnabled() and not panel.sweep_box.isVisible()

    qtbot.mouseClick(panel.router_all_button, Qt.MouseButton.LeftButton)
    assert not panel.router_all_button.isEnabled()  # one benchmark at a time
    qtbot.waitUntil(lambda: not panel.is_running(), timeout=300_000)

    assert panel.sweep_box.isVisible(), panel.status_label.text()
    assert [panel.sweep_table.item(i, 0).text() for i in range(panel.sweep_table.rowCount())] == [
        "one (complete)",
        "two (complete)",
    ], panel.status_label.text()
    runs = sorted(panel.repo.list_runs(), key=lambda r: r.id)
    assert [(r.spec.model, r.sweep_value, r.label) for r in runs] == [
        ("one", "one", "router · one"),
        ("two", "two", "router · two"),
    ]
    group = panel.repo.get_group(runs[0].group_id)
    assert (
        {r.group_id for r in runs} == {group.id} and group.param == "model" and group.values == ("one", "two")
    )
    assert any(t.startswith("one (1/2): ") for t in progress) and any(
        t.startswith("two (2/2): ") for t in progress
    )
    assert panel.router_all_button.isEnabled()
