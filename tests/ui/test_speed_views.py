"""The predicted speed where a user decides, offscreen with real widgets: the Plan's figures, curve and ranked
solver answers beside the bars, the Profile's line under the command, the Get models column (the tests' own hub,
the real demo model's header), and after a real benchmark its measured-vs-predicted line and the refined
calibration the Plan then reads. Each says what it is calibrated on."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from llm_tuner.core.bench_report import busy_warning
from llm_tuner.core.devices import DeviceInventory, HostInfo, LlamaDevice
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.core.settings import Settings
from llm_tuner.qt.context import AppContext
from llm_tuner.store.db import open_engine

HOST = HostInfo(memory_total_mib=65536, memory_available_mib=60000, cpu_flags=("avx", "avx2", "fma", "f16c"))
GPU = DeviceInventory(host=HOST, llama_devices=(LlamaDevice(name="CUDA0", description="NVIDIA GeForce RTX 4090",
                                                             memory_total_mib=16384, memory_free_mib=15000),))


@pytest.fixture
def ctx(tmp_path):
    c = AppContext(settings=Settings(), engine=open_engine(tmp_path / "speed.sqlite"))
    c.state.set_inventory(GPU)
    return c


def _plan_with_speed(qtbot, ctx, demo_model):
    """A shown Plan tab with its speed basis read and the demo model planned at -ngl 3."""
    from llm_tuner.ui.panels.plan_panel import PlanPanel

    panel = PlanPanel(ctx)
    qtbot.addWidget(panel)
    panel.resize(1300, 900)
    panel.show()
    qtbot.waitUntil(lambda: panel.plan_state.speed.basis is not None, timeout=20_000)
    ctx.state.set_profile(LaunchProfile(model=str(demo_model), gpu_layers=3))
    qtbot.waitUntil(lambda: panel.plan_state.model is not None, timeout=10_000)
    panel.recompute_now()
    return panel


def test_the_plan_shows_speed_beside_the_bars_with_a_curve_and_the_answers_ranked(qtbot, ctx, demo_model):
    panel = _plan_with_speed(qtbot, ctx, demo_model)
    box = panel.speed_box
    assert box.isVisible() and "t/s gen" in box.figures_label.text() and "TTFT" in box.figures_label.text()
    assert "roofline" not in box.figures_label.text()  # the host reads weights too: its peak is not known
    assert box.basis_label.text().startswith("default costs, wider error")
    assert len(box.curve.points) > 8 and box.curve.points[-1][1] < box.curve.points[0][1]
    text = box.options_label.text()
    assert "1. Most GPU layers (--n-gpu-layers " in text and "2. as set now" in text
    qtbot.mouseClick(panel.solve_layers_button, Qt.MouseButton.LeftButton)  # apply the fastest
    panel.recompute_now()
    assert "as fast as the fit solver can" in box.options_label.text()
    assert "roofline" in box.figures_label.text()  # all on the GPU: the RTX 4090's published bandwidth


def test_a_calibration_the_store_cannot_give_is_said_not_blamed_on_the_build(qtbot, ctx, demo_model,
                                                                             server_binary):
    """The history's calibrations cannot be read (the table damaged here; a store locked by another program
    alike): the Plan still predicts with default costs, and says the calibration was not read, with why. It said
    "this build is not calibrated: run a benchmark", which no benchmark would change, and the failure showed
    nowhere on screen."""
    import sqlite3

    with sqlite3.connect(ctx.engine.url.database) as db:
        db.execute("DROP TABLE speed_calibrations")
    box = _plan_with_speed(qtbot, ctx, demo_model).speed_box
    text = box.basis_label.text()
    assert "t/s gen" in box.figures_label.text()  # predicted all the same
    assert text.startswith("default costs, wider error") and "calibration could not be read" in text, text
    assert "no such table: speed_calibrations" in text and "Help ▸ Errors" in text
    assert "not calibrated" not in text and "no llama-server build known" not in text


def test_the_profile_says_the_predicted_speed_under_the_command(qtbot, ctx, demo_model):
    from llm_tuner.ui.panels.profile_panel import ProfilePanel

    panel = ProfilePanel(ctx)
    qtbot.addWidget(panel)
    panel.show()
    panel.editors["model"].widget.setText(str(demo_model))
    panel._on_field_edited()
    qtbot.waitUntil(lambda: "t/s gen" in panel.speed_label.text(), timeout=20_000)
    line = panel.speed_label.text()
    assert line.startswith("≈ ") and "prefill" in line and " — default costs, wider error (±35%)" in line
    assert panel.speed_label.isVisible()


def test_get_models_predicts_each_files_speed_from_its_header(qtbot, tmp_path, monkeypatch, demo_model):
    from llm_tuner.ui.dialogs.get_models_dialog import SPEED_COL, GetModelsDialog
    from tests.support.fake_hub import serve_demo, sha256_of

    hub = serve_demo(demo_model, sha256_of(demo_model), monkeypatch)
    try:
        ctx = AppContext(settings=Settings(model_folders=[str(tmp_path)]), engine=open_engine(tmp_path / "db.sqlite"))
        ctx.state.set_inventory(GPU)
        dlg = GetModelsDialog(ctx)
        qtbot.addWidget(dlg)
        dlg.show()
        header = dlg.file_table.horizontalHeaderItem(SPEED_COL).text()
        assert header == "Predicted speed (this machine)"
        dlg.search_edit.setText("gemma")
        dlg.search()
        qtbot.waitUntil(lambda: dlg.repo_table.rowCount() == 1, timeout=15_000)
        dlg.repo_table.setCurrentCell(0, 0)
        qtbot.waitUntil(lambda: dlg.file_table.rowCount() == 1, timeout=15_000)
        cell = lambda: dlg.file_table.item(0, SPEED_COL)  # noqa: E731
        qtbot.waitUntil(lambda: cell() is not None and "t/s gen" in cell().text(), timeout=30_000)
        assert cell().text().startswith("≈ ") and "prefill" in cell().text()
        assert "default costs" in cell().toolTip() and "roofline" in cell().toolTip()
        assert "default costs, wider error" in dlg.speed_basis_label.text()  # what every speed rests on
        assert list(tmp_path.glob("*.gguf")) == []  # nothing downloaded
        dlg.shutdown()
    finally:
        hub.stop()


@pytest.mark.server
def test_after_a_benchmark_measured_is_beside_predicted_and_one_run_does_not_calibrate(qtbot, tiny_model):
    from llm_tuner.app import build_window

    _app, ctx, window = build_window()
    qtbot.addWidget(window)
    ctx.state.set_profile(LaunchProfile(model=str(tiny_model), threads=2, ctx_size=1024))
    bench = window.bench_panel
    bench.prompt_edit.setText("64")
    bench.gen_spin.setValue(16)
    bench.reps_spin.setValue(2)
    bench.warmup_spin.setValue(0)
    qtbot.mouseClick(bench.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not bench.is_running(), timeout=120_000)
    assert bench.last_run is not None and bench.last_run.status == "complete", bench.status_label.text()
    qtbot.waitUntil(lambda: "calibration" in bench.speed_label.text(), timeout=60_000)
    text = bench.speed_label.text()
    assert text.startswith("Speed — prompt 64: gen ") and "t/s predicted" not in text and "predicted" in text
    assert "prefill" in text and "Predicted with default costs, wider error (±35%)" in text
    plan = window.plan_panel.plan_state
    if busy_warning(bench.last_run):  # a shared machine: the run says so and teaches the calibration nothing
        assert "This run does not refine the calibration: other processes were busy" in text
        return
    assert "The calibration was not refined yet: 1 stored run tells apart only" in text  # one equation each
    assert plan.speed.basis is None or not plan.speed.basis.calibrated
