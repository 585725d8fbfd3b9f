"""What the Benchmarks and Compare views show people: readable metric names, a hint instead of empty
axes before any run, the whole comparison table above the chart, a legend that covers no data."""

from __future__ import annotations

from PySide6.QtCore import QPointF

from llm_tuner.core.bench_spec import BenchRun, DevicePeak, Repetition


def _run(run_id: int, gen: list[float], label: str, lengths: tuple[int, ...] = (128,)) -> BenchRun:
    reps = tuple(Repetition(seq=i, prompt_tokens=n, prompt_n=n, prompt_per_second=500.0 + i, predicted_n=32,
                            predicted_per_second=g, ttft_ms=100.0 + i, latency_ms=300.0 + i,
                            peaks=(DevicePeak(device="Host", vram_used_mib=400.0 + i),))
                 for n in lengths for i, g in enumerate(gen))
    return BenchRun(id=run_id, label=label, reps=reps, status="complete", server_argv=("-m", "x.gguf"))


def test_hints_before_data_then_readable_tables_and_the_whole_comparison(qtbot):
    from llm_tuner.app import build_window

    _app, ctx, window = build_window()
    qtbot.addWidget(window)
    window.resize(1366, 768)
    window.show()
    bench, compare = window.bench_panel, window.compare_panel

    # Before any run: a centred hint, not empty axes.
    assert not bench.chart_stack.showing_content() and "Run a benchmark" in bench.chart_stack.hint.text()
    assert not compare.chart_stack.showing_content() and "Pick A and B" in compare.chart_stack.hint.text()

    a, b = _run(1, [60.0, 61.0, 59.0], "ub512"), _run(2, [70.0, 71.0, 69.0], "ub256")
    window.tabs.setCurrentWidget(bench)
    bench.show_run(a)
    qtbot.wait(50)
    assert bench.chart_stack.showing_content()
    labels = bench.summary_model.column_texts(0)
    assert labels[:4] == ["Prefill @ 128 tok (t/s)", "Generation @ 128 tok (t/s)",
                          "Time to first token @ 128 tok (ms)", "Latency @ 128 tok (ms)"]
    assert "Peak memory: Host (MiB)" in labels
    # The numbers and n stay whole: the metric column takes what is left (it elides, with a tooltip, when
    # the results side is narrow).
    view, header = bench.summary_view, bench.summary_view.horizontalHeader()
    for col in range(1, bench.summary_model.columnCount()):
        assert header.sectionSize(col) >= view.sizeHintForColumn(col)
    model = bench.summary_model  # the name column takes what is left; where it is elided, the tooltip has it all
    if header.sectionSize(0) < view.sizeHintForColumn(0):
        from PySide6.QtCore import Qt

        tips = [model.data(model.index(r, 0), Qt.ItemDataRole.ToolTipRole) or "" for r in range(model.rowCount())]
        assert all(label in tip for label, tip in zip(labels, tips, strict=True))

    window.tabs.setCurrentWidget(compare)
    compare.show_comparison(a, b)
    qtbot.wait(50)
    assert compare.chart_stack.showing_content()
    rows = compare.model.rowCount()
    assert rows == 5 and compare.model.column_texts(0)[0] == "Prefill @ 128 tok (t/s)"
    assert compare.model.verdicts()["gen_tps@128"] == "better"  # ids stay the machine-readable keys
    assert _rows_in_sight(compare.table) == 5  # the main result first: every row, above the chart

    window.resize(1400, 900)  # two prompt lengths: 9 metrics; the table shows 8 and the chart keeps room
    qtbot.wait(50)
    compare.show_comparison(_run(1, [60.0, 61.0], "ub512", (128, 512)), _run(2, [70.0, 71.0], "ub256", (128, 512)))
    qtbot.wait(50)
    assert compare.model.rowCount() == 9 and _rows_in_sight(compare.table) == 8
    assert compare.chart.height() >= compare.chart.minimumHeight()
    window.close()
    ctx.engine.dispose()


def _rows_in_sight(table) -> int:
    height = table.viewport().height()
    return sum(1 for r in range(table.model().rowCount())
               if 0 <= table.rowViewportPosition(r) and table.rowViewportPosition(r) + table.rowHeight(r) <= height)


def test_error_bar_legend_sits_above_the_data(qtbot):
    from llm_tuner.ui.plots.bench_plots import ErrorBarChart

    chart = ErrorBarChart()
    qtbot.addWidget(chart)
    for size in ((640, 360), (500, 150)):
        chart.resize(*size)
        chart.show()
        chart.set_data(["128 tok", "512 tok"], [("1: a run with a long label", [[90.0, 95.0, 99.0], [50.0]]),
                                                ("2: another run", [[80.0], [60.0, 62.0]])], "t/s")
        qtbot.wait(50)
        vb = chart.getViewBox()
        legend = chart.legend.mapRectToItem(vb, chart.legend.boundingRect())  # in the view's pixels
        highest = vb.mapFromView(QPointF(0.0, 99.0)).y()  # the highest dot, in the same pixels
        assert 0 <= legend.top() and legend.bottom() < highest, (size, legend, highest)
