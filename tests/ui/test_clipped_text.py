"""Issue 22 item 22: text the window cut off. The Plan's figure beside the host bar ("… of 21.17 GiB f"),
Settings' RPC headers ("orker (host:port"), the sweep table's headers, the Tune knobs' "Why" column, and the
Tune knob table at 1366x768 (one and a half rows)."""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt

from llm_tuner.core.bench_spec import BenchRun, Repetition
from llm_tuner.core.memory import DeviceMemory
from llm_tuner.core.tune import Knob


def _headers_whole(table) -> list[str]:
    """The header texts wider than their column (a cut header)."""
    header = table.horizontalHeader()
    return [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())
            if header.sectionSize(c) < header.sectionSizeHint(c)]


def test_the_plan_figure_beside_the_host_bar_is_whole(qtbot):
    from llm_tuner.ui.plots.memory_bars import MemoryBarsWidget, bar_text

    host = DeviceMemory("Host", "CPU", model_mib=2300.0, kv_mib=80.0, compute_mib=300.0, output_mib=1.0,
                        overhead_mib=200.0, capacity_mib=24100, available_mib=21670, mapped_mib=2200.0)
    bars = MemoryBarsWidget()
    qtbot.addWidget(bars)
    bars.resize(900, 120)  # the Plan's width at 1366 px with the Models dock
    bars.set_devices((host,))
    bars.show()
    assert bar_text(host) == "681 MiB + 2.15 GiB mapped of 21.16 GiB free"
    assert bars.drawn_texts() == [bar_text(host)]
    bars.grab()  # paints
    bars.resize(300, 120)  # too narrow for it: elided with "…" (the tooltip has it whole), never cut mid-letter
    assert bars.drawn_texts()[0].endswith("…")


def test_settings_rpc_headers_are_whole(qtbot):
    from llm_tuner.core.settings import RpcWorker, Settings
    from llm_tuner.ui.dialogs.workers_box import WorkersBox

    box = WorkersBox(Settings(rpc_workers=[RpcWorker(endpoint="192.168.100.200:50052")]))
    qtbot.addWidget(box)
    box.resize(700, 300)
    box.show()
    assert _headers_whole(box.table) == []


def test_sweep_table_headers_are_whole(qtbot, tmp_path):
    from llm_tuner.core.settings import Settings
    from llm_tuner.qt.context import AppContext
    from llm_tuner.store.db import open_engine
    from llm_tuner.ui.panels.bench_panel import BenchPanel

    def run(i: int, value: str) -> BenchRun:
        reps = tuple(Repetition(seq=k, prompt_tokens=n, prompt_n=n, prompt_per_second=500.0 + k, predicted_n=32,
                                predicted_per_second=60.0 + k, ttft_ms=100.0, latency_ms=300.0)
                     for n in (512, 2048) for k in range(3))
        return BenchRun(id=i, label=f"ub{value}", reps=reps, status="complete", sweep_value=value)

    ctx = AppContext(settings=Settings(), engine=open_engine(tmp_path / "s.sqlite"))
    panel = BenchPanel(ctx)
    qtbot.addWidget(panel)
    panel.resize(1366, 700)
    panel.show()
    panel.show_sweep([run(1, "256"), run(2, "512")])
    assert panel.sweep_table.columnCount() == 5 and _headers_whole(panel.sweep_table) == []
    ctx.engine.dispose()


REASONS = ("matched K/V types (mixed ones fall back to a slow kernel); quantized needs flash attention",
           "logical batch", "physical batch (never above the batch: llama.cpp clamps it)",
           "speculative decoding without a draft model (n-gram lookups in the context)", "flash attention",
           "CPU threads for generation", "the largest context that fits while generation stays fast enough")


def test_tune_knob_reasons_are_whole_and_three_rows_show_at_1366x768(qtbot):
    from llm_tuner.app import build_window

    _app, _ctx, window = build_window()
    qtbot.addWidget(window)
    window.resize(1366, 768)
    window.show()
    window.tabs.setCurrentWidget(window.tune_panel)
    form = window.tune_panel.form
    form.set_proposed_knobs([Knob(key=f"k{i}", flag=f"--knob-{i}", values=("1", "2"), reason=r)
                             for i, r in enumerate(REASONS)])
    table = form.knob_table
    qtbot.waitUntil(lambda: table.viewport().height() > 0)
    qtbot.wait(50)
    # at least three whole rows in sight
    assert table.rowAt(table.viewport().height() - 1) in (-1, *range(2, len(REASONS)))
    assert sum(table.rowHeight(r) for r in range(3)) <= table.viewport().height()
    # the reasons get room: two lines of at least ~140 px beside the values (they had ~80 px, two or three words)
    why = table.columnWidth(2)
    assert why >= 140 and why >= table.columnWidth(1), why
    fm = table.fontMetrics()
    short = REASONS[2]  # "physical batch (never above the batch: llama.cpp clamps it)" reads whole
    cell = table.visualItemRect(table.item(2, 2))
    assert fm.boundingRect(QRect(0, 0, cell.width() - 8, 10_000), int(Qt.TextFlag.TextWordWrap), short).height() \
        <= cell.height()
    assert all(table.item(r, 2).toolTip() == reason for r, reason in enumerate(REASONS))  # the long ones whole
