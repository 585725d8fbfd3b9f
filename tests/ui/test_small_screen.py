"""Issue 35 item 17: the window at 1366x768 with the quick start strip shown (a first run on a laptop). Each Live
plot keeps at least 120 px for its curves, the memory by owner shows its rows without scrolling, the Tune form
shows at least four objective rows beside six knob rows, and the Models list shows Size and Layers."""

from __future__ import annotations

import time
from types import SimpleNamespace

from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QScrollArea

from llm_tuner.core.devices import DeviceInventory, GpuInfo
from llm_tuner.core.tune import Knob, TuneResult
from llm_tuner.services.telemetry.breakdown import MemorySegments

MIN_PLOT_PX = 120
REASON = "physical batch (never above the batch: llama.cpp clamps it)"


def _window(qtbot):
    from llm_tuner.app import build_window

    _app, ctx, window = build_window()
    qtbot.addWidget(window)
    window.resize(1366, 768)
    window.show()
    window.quick_start.setVisible(True)  # as on a first run
    qtbot.waitUntil(lambda: window.log_dock.height() < 200)  # the first-run dock sizes are applied
    qtbot.wait(50)
    return ctx, window


def _curve_heights(plots) -> list[float]:
    """The height of each shown plot's area for curves (its ViewBox: no title, no axis)."""
    return [p.getViewBox().size().height() for p in plots if p.isVisible()]


def _scroll_of(widget) -> QScrollArea:
    w = widget.parentWidget()
    while not isinstance(w, QScrollArea):
        w = w.parentWidget()
    return w


def _in_sight(widget, scroll: QScrollArea) -> bool:
    top = widget.mapTo(scroll.viewport(), QPoint(0, 0)).y()
    return top >= 0 and top + widget.height() <= scroll.viewport().height()


def test_live_plots_keep_their_height_and_the_memory_rows_show(qtbot):
    ctx, window = _window(qtbot)
    live = window.live_panel
    window.tabs.setCurrentWidget(live)
    live.tabs.setCurrentWidget(live.devices)
    live.devices.set_inventory(DeviceInventory())  # a machine without a GPU: CPU and memory
    live.memory_bars.set_segments([MemorySegments("host RAM", 240.0, 30.0, 20.0, 60.0, 9000.0, 14000.0, 24000.0)])
    qtbot.wait(100)
    heights = _curve_heights(live.device_plots.plots.values())
    assert len(heights) == 2 and min(heights) >= MIN_PLOT_PX, heights
    plots_scroll = _scroll_of(live.device_plots.view)
    assert live.device_plots.view.height() <= plots_scroll.viewport().height()  # both in sight, no scrolling
    rows = live.memory_bars.rows
    assert _in_sight(rows, _scroll_of(rows))  # its row is whole, not behind a scroll bar

    gpu = GpuInfo(name="CUDA0", vendor="nvidia", model="NVIDIA H200", memory_total_mib=143_771,
                  llama_names=("CUDA0",))
    live.devices.set_inventory(DeviceInventory(devices=(gpu,)))  # five plots: they scroll, each keeps its height
    qtbot.wait(100)
    heights = _curve_heights(live.device_plots.plots.values())
    assert len(heights) == 5 and min(heights) >= MIN_PLOT_PX, heights

    live.tabs.setCurrentWidget(live.throughput)
    plots = live.throughput
    for acc in (None, 0.75):  # a request that drafted tokens shows the third plot
        plots.add(SimpleNamespace(time_unix=time.time(), prompt_per_second=100.0, predicted_per_second=30.0,
                                  draft_acceptance=acc))
    plots.refresh(now=time.monotonic() + 10)
    qtbot.wait(100)
    heights = _curve_heights((plots.prompt_plot, plots.rate_plot, plots.draft_plot))
    assert len(heights) == 3 and min(heights) >= MIN_PLOT_PX, heights
    ctx.engine.dispose()


def test_tune_shows_four_objective_rows_and_six_knobs(qtbot):
    ctx, window = _window(qtbot)
    window.tabs.setCurrentWidget(window.tune_panel)
    form = window.tune_panel.form
    form.set_proposed_knobs([Knob(key=f"k{i}", flag=f"--knob-{i}", values=("1", "2"), reason=REASON)
                             for i in range(8)])
    qtbot.wait(100)
    scroll = _scroll_of(form)
    shown = [w for w in (form.objective_combo, form.prompt_spin, form.gen_spin, form.depth_spin) if _in_sight(w, scroll)]
    assert len(shown) == 4, [w.objectName() or type(w).__name__ for w in shown]
    table = form.knob_table
    assert sum(table.rowHeight(r) for r in range(6)) <= table.viewport().height(), table.viewport().height()
    ctx.engine.dispose()


def test_models_list_shows_size_and_layers(qtbot, demo_model):
    ctx, window = _window(qtbot)
    panel = window.models_panel
    qtbot.waitUntil(lambda: panel.table.model().rowCount() > 0 and not panel.scanner.running, timeout=30_000)
    qtbot.wait(100)
    table, header = panel.table, panel.table.horizontalHeader()
    columns = [table.model().headerData(i, header.orientation()) for i in range(header.count())]

    def in_sight() -> None:
        for name in ("Name", "Size", "Layers"):
            i = columns.index(name)
            left = header.sectionViewportPosition(i)
            assert left >= 0 and left + header.sectionSize(i) <= table.viewport().width(), (
                name, left, table.viewport().width())

    in_sight()
    # a tune that kept its baseline and can be resumed: its result's buttons and the Resume row made the
    # window's least width grow and the list shrink
    base = ("-m", "m.gguf", "-ub", "512")
    window.tune_panel.result_view.set_result(TuneResult(tune_id=1, baseline_argv=base, winner_argv=base), "demo")
    window.tune_panel.resume_combo.addItem("tune #1 gemma-3-270m-q4_k_m (no candidate measured, 1 trials)")
    window.tune_panel.resume_row.show()  # and it can be resumed
    window.tune_panel.right_tabs.setCurrentWidget(window.tune_panel.result_view)
    window.tabs.setCurrentWidget(window.tune_panel)
    qtbot.wait(200)
    in_sight()
    ctx.engine.dispose()
