"""The Live panel on the real llama-server (CPU) and on scripted GPUs."""

from __future__ import annotations

import time

import numpy as np
import pytest

from llm_tuner.qt.context import AppContext
from llm_tuner.services.telemetry.ring import SeriesRing
from llm_tuner.services.telemetry.sampler import GPU_FIELDS


@pytest.fixture
def ctx(tmp_path):
    from llm_tuner.core.settings import Settings
    from llm_tuner.services.binaries import SERVER, probe
    from llm_tuner.store.db import open_engine

    c = AppContext(settings=Settings(), engine=open_engine(tmp_path / "db.sqlite"))
    c.state.set_binaries({SERVER: probe(SERVER, with_devices=False)})
    return c


@pytest.mark.server
def test_start_test_prompt_request_row_log_and_stop(qtbot, ctx, tiny_model):
    from llm_tuner.ui.panels.live_panel import LivePanel

    panel = LivePanel(ctx)
    qtbot.addWidget(panel)
    panel.show()
    panel.args_edit.setText(f"-m {tiny_model} -c 1024 -np 1 -t 2")
    assert panel.start()
    assert "--log-jsonl" not in panel.slot.plan.command_line()
    qtbot.waitUntil(lambda: "ready" in panel.state_label.text(), timeout=90_000)
    assert panel.url_label.text().startswith("http://127.0.0.1:")
    assert panel.test_button.isEnabled()

    results = []
    panel.test_button.click()
    qtbot.waitUntil(lambda: panel.request_model.rowCount() == 1, timeout=60_000)
    qtbot.waitUntil(lambda: "Test prompt answered" in panel.message_label.text(), timeout=60_000)
    rec = panel.request_model.records[0]
    results.append(rec)
    # The table shows the server's own figures (2 decimals).
    row = [panel.request_model.index(0, c).data() for c in range(panel.request_model.columnCount())]
    assert row[2] == str(rec.prompt_n) and row[6] == f"{rec.predicted_per_second:.2f}"
    assert f"{rec.predicted_n} tokens at" in panel.message_label.text()

    # Log console: every line arrives; filter and search work.
    qtbot.waitUntil(lambda: "listening on" in panel.log_console.shown_text(), timeout=5_000)
    panel.log_console.level.setCurrentIndex(0)  # errors only
    assert "listening on" not in panel.log_console.shown_text()
    panel.log_console.level.setCurrentIndex(3)
    panel.log_console.search.setText("print_timing")
    assert all("print_timing" in line for line in panel.log_console.shown_text().splitlines())
    panel.log_console.search.setText("")

    # Devices tab on a CPU-only machine: host CPU/RAM and the server's RSS are drawn; memory by owner.
    qtbot.waitUntil(lambda: ("host", "server_rss_mib") in panel.device_plots.curves, timeout=10_000)
    qtbot.waitUntil(lambda: bool(panel.memory_bars.last), timeout=10_000)
    seg = panel.memory_bars.last[0]
    assert seg.device == "host RAM" and seg.weights_mib and seg.capacity_mib > seg.weights_mib

    panel.stop_button.click()
    qtbot.waitUntil(lambda: "exited" in panel.state_label.text(), timeout=30_000)
    assert "stopped (SIGINT)" in panel.message_label.text()
    panel.tabs.setCurrentIndex(4)
    qtbot.waitUntil(lambda: panel.history_table.rowCount() == 1, timeout=10_000)
    assert panel.history_table.item(0, 3).text() == "1"


@pytest.mark.server  # the real llama-server starts and exits on the missing model
def test_a_failed_start_shows_what_to_do(qtbot, ctx, tmp_path):
    from llm_tuner.ui.panels.live_panel import LivePanel

    panel = LivePanel(ctx)
    qtbot.addWidget(panel)
    panel.args_edit.setText(f"-m {tmp_path / 'gone.gguf'}")
    panel.start()
    qtbot.waitUntil(lambda: "did not start" in panel.state_label.text(), timeout=60_000)  # as the status bar says
    assert "gone.gguf does not exist" in panel.message_label.text()
    assert panel.start_button.isEnabled() and not panel.stop_button.isEnabled()


def test_device_plots_draw_a_curve_per_device_and_shade_throttling(qtbot):
    from llm_tuner.ui.plots.live_plots import DevicePlots

    plots = DevicePlots()
    qtbot.addWidget(plots)
    now = time.time()
    rings = {}
    for d in range(3):
        ring = SeriesRing(GPU_FIELDS, capacity=1000)
        for k in range(100):
            ring.append(now - 10 + k * 0.1, {"util_pct": 50 + d, "vram_used_mib": 1000, "temp_c": 60, "power_w": 300,
                                             "sm_clock_mhz": 1900, "mem_clock_mhz": 3200,
                                             "throttled": 1.0 if (d == 1 and 40 <= k < 60) else 0.0})
        rings[f"nvidia:{d}"] = ring
    assert plots.refresh(rings, now=now, force=True)
    assert {dev for dev, _f in plots.curves} == {"nvidia:0", "nvidia:1", "nvidia:2"}
    x, y = plots.curves[("nvidia:1", "util_pct")].getData()
    assert len(x) == 100 and y[0] == 51
    _tx, ty = plots.throttle_curve.getData()
    assert np.count_nonzero(ty) == 20
    assert not plots.refresh(rings, now=now, force=True)  # nothing changed: nothing redrawn
    # One frame a second at most, with every changed plot and the time axis in it (one paint of the view).
    rings["nvidia:0"].append(now + 0.1, {"util_pct": 99, "temp_c": 61})
    assert [plots.refresh(rings, now=now + 0.1 * k) for k in range(1, 10)].count(True) == 0
    assert plots.refresh(rings, now=now + 1.0)
    assert plots.curves[("nvidia:0", "util_pct")].getData()[1][-1] == 99
    assert plots.curves[("nvidia:0", "temp_c")].getData()[1][-1] == 61
    # The time axis runs ahead of the newest sample and moves only when the samples reach its end (a move repaints
    # every plot with its axes): then it shows the window and 5 % of it ahead.
    x0 = plots.plots["Utilisation"].viewRange()[0]
    assert x0[1] > now + 1.0
    rings["nvidia:0"].append(x0[1], {"util_pct": 98})
    assert plots.refresh(rings, now=x0[1])
    lo, hi = plots.plots["Utilisation"].viewRange()[0]
    assert hi == pytest.approx(x0[1] + 0.05 * 600) and hi - lo == pytest.approx(1.05 * 600)
    assert plots.curves[("nvidia:0", "util_pct")].getData()[0][-1] == x0[1]


def test_throughput_time_axis_reads_as_clock_time_with_a_label(qtbot):
    """One request must not zoom the time axis to fractions of a second ("32.000", no unit)."""
    from types import SimpleNamespace

    from llm_tuner.ui.plots.live_plots import DevicePlots, ThroughputPlots

    plots = ThroughputPlots()
    qtbot.addWidget(plots)
    plots.resize(600, 400)
    plots.add(SimpleNamespace(time_unix=time.time(), prompt_per_second=100.0, predicted_per_second=30.0,
                              draft_acceptance=None))
    assert plots.refresh()
    plots.grab()  # paints the axes (DateAxisItem picks its zoom level while painting)
    lo, hi = plots.rate_plot.viewRange()[0]
    assert hi - lo >= 60
    axis = plots.rate_plot.getAxis("bottom")  # the lowest plot: no request drafted, no draft plot
    ticks = [s for spacing, values in axis.tickValues(lo, hi, 600) for s in axis.tickStrings(values, 1, spacing)]
    assert ticks and all(t.count(":") == 2 for t in ticks), ticks  # h:min:s, not seconds.milliseconds
    assert "local time" in axis.labelText and axis.label.isVisible()
    device = DevicePlots()
    qtbot.addWidget(device)
    device.show_gpu_plots(True)
    assert "local time" in device.plots["Clocks"].getAxis("bottom").labelText


def test_plots_without_data_on_this_machine_are_hidden(qtbot):
    """No GPU: no temperature, power or clock plots (GPU figures); no draft plot until a request drafted."""
    from types import SimpleNamespace

    from llm_tuner.ui.plots.live_plots import DevicePlots, ThroughputPlots

    device = DevicePlots()
    qtbot.addWidget(device)
    device.show()
    shown = [t for t, p in device.plots.items() if p.isVisible()]
    assert shown == ["Utilisation", "Memory used"]
    bottom = device.plots["Memory used"].getAxis("bottom")
    assert bottom.isVisible() and "local time" in bottom.labelText and bottom.label.isVisible()
    ring = SeriesRing(GPU_FIELDS, capacity=10)
    ring.append(time.time(), {"util_pct": 5, "temp_c": 40})
    device.refresh({"nvidia:0": ring}, force=True)  # a GPU sends samples: its plots appear
    assert all(p.isVisible() for p in device.plots.values())
    assert not device.plots["Memory used"].getAxis("bottom").isVisible()
    assert device.plots["Clocks"].getAxis("bottom").isVisible()

    plots = ThroughputPlots()
    qtbot.addWidget(plots)
    plots.show()
    plain = SimpleNamespace(time_unix=time.time(), prompt_per_second=100.0, predicted_per_second=30.0,
                            draft_acceptance=None)
    plots.add(plain)
    assert plots.refresh(now=100.0)
    assert not plots.draft_plot.isVisible()
    plots.add(SimpleNamespace(time_unix=time.time(), prompt_per_second=100.0, predicted_per_second=30.0,
                              draft_acceptance=0.75))
    assert not plots.refresh(now=100.6)  # one redraw a second at most (issue 26)
    assert plots.refresh(now=101.1)
    assert plots.draft_plot.isVisible() and "local time" in plots.draft_plot.getAxis("bottom").labelText
    assert not plots.rate_plot.getAxis("bottom").label.isVisible()


def test_log_follows_new_lines_without_scrolling_sideways(qtbot):
    """Follow keeps the newest line in view and the start of every line visible (a long last line must not
    scroll the log to its end); the line count fits its label."""
    from llm_tuner.services.logparse import LogLine
    from llm_tuner.ui.panels.log_console import LogConsole

    console = LogConsole()
    qtbot.addWidget(console)
    console.resize(500, 200)
    console.show()
    console.append_lines([LogLine("info", f"srv  log_server_r: request {i}") for i in range(200)])
    console.append_lines([LogLine("info", "slot print_timing: " + "x" * 400)])
    vertical, horizontal = console.text.verticalScrollBar(), console.text.horizontalScrollBar()
    assert horizontal.maximum() > 0 and horizontal.value() == 0
    assert vertical.value() == vertical.maximum() > 0
    console.search.setText("print_timing")
    assert horizontal.value() == 0
    console.search.setText("")
    console.count.setText("20000 lines")
    assert console.count.width() >= console.count.sizeHint().width()


def test_request_table_shows_no_nan(qtbot):
    from llm_tuner.core.session import RequestRecord
    from llm_tuner.qt.request_table_model import RequestTableModel

    model = RequestTableModel()
    model.append(RequestRecord(time_unix=time.time(), slot=None, task=None, cache_n=None, prompt_n=12,
                               prompt_ms=float("nan"), prompt_per_second=float("nan"), predicted_n=4,
                               predicted_ms=2.0, predicted_per_second=2000.0))
    row = [model.index(0, c).data() for c in range(model.columnCount())]
    assert "nan" not in " ".join(row).lower() and "None" not in row
    assert row[1] == "—" and row[4] == "—" and row[6] == "2000.00"


@pytest.mark.server
def test_a_port_in_use_did_not_start_and_history_says_so(qtbot, ctx, tmp_path):
    """A port conflict: the server never started, so the message says so, and the History's Exit reads
    "did not start" with the reason in its tooltip (not "None")."""
    import socket

    from llm_tuner.ui.panels.live_panel import LivePanel

    panel = LivePanel(ctx)
    qtbot.addWidget(panel)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        panel.args_edit.setText(f"-m {tmp_path / 'm.gguf'} --port {port}")
        panel.start()
        qtbot.waitUntil(lambda: "did not start" in panel.state_label.text(), timeout=30_000)
    assert panel.message_label.text().startswith(f"The server did not start: Port 127.0.0.1:{port} is already in use")
    panel.tabs.setCurrentWidget(panel.history_table)
    qtbot.waitUntil(lambda: panel.history_table.rowCount() == 1, timeout=10_000)
    exit_item = panel.history_table.item(0, 4)
    assert exit_item.text() == "did not start" and "already in use" in exit_item.toolTip()
    texts = [panel.history_table.item(0, c).text() for c in range(panel.history_table.columnCount())]
    assert "None" not in texts and all(texts)


def test_request_time_column_fits_its_text(qtbot, ctx):
    from llm_tuner.core.session import RequestRecord
    from llm_tuner.ui.panels.live_panel import LivePanel

    panel = LivePanel(ctx)
    qtbot.addWidget(panel)
    panel.resize(900, 500)
    panel.show()
    panel.tabs.setCurrentIndex(panel.tabs.indexOf(panel.request_table.parentWidget()))
    panel._on_bridge_request_finished(panel.slot, RequestRecord(
        time_unix=time.time(), slot=3, task=1, cache_n=0, prompt_n=9, prompt_ms=600.0, prompt_per_second=14.36,
        predicted_n=32, predicted_ms=800.0, predicted_per_second=36.78, ttft_ms=626.71, latency_ms=1469.61))
    qtbot.waitUntil(lambda: panel.request_model.rowCount() == 1, timeout=2_000)  # the next 100 ms batch
    table = panel.request_table
    shown = [c for c in range(panel.request_model.columnCount()) if not table.isColumnHidden(c)]  # Model: routers'
    assert shown and all(table.columnWidth(c) >= table.sizeHintForColumn(c) for c in shown)


def _record(i: int, *, prompt_n: int = 9, t: float | None = None, draft: bool = False):
    from llm_tuner.core.session import RequestRecord

    return RequestRecord(time_unix=time.time() if t is None else t, slot=i % 4, task=i, cache_n=0, prompt_n=prompt_n,
                         prompt_ms=20.0, prompt_per_second=450.0 + i % 7, predicted_n=4, predicted_ms=80.0,
                         predicted_per_second=50.0 + i % 5, draft_n=4 if draft else None,
                         draft_n_accepted=3 if draft else None, ttft_ms=25.0, latency_ms=105.0)


def test_finishing_requests_does_not_resize_the_columns(qtbot, ctx):
    """A busy server: rows arrive in batches and the column widths stay as they are (fitting measured every
    row on each request, up to 0.4 s); the user fits them on request."""
    from llm_tuner.ui.panels.live_panel import LivePanel

    panel = LivePanel(ctx)
    qtbot.addWidget(panel)
    panel.resize(900, 500)
    panel.show()
    panel.tabs.setCurrentWidget(panel.requests)
    panel._on_bridge_request_finished(panel.slot, _record(0))
    qtbot.waitUntil(lambda: panel.request_model.rowCount() == 1, timeout=2_000)
    table, model = panel.request_table, panel.request_model
    assert table.columnWidth(2) >= table.sizeHintForColumn(2)  # fitted once, to the first rows
    table.setColumnWidth(2, 40)  # the user narrows a column
    batches = []
    model.rowsInserted.connect(lambda *_a: batches.append(model.rowCount()))
    for i in range(1, 300):
        panel._on_bridge_request_finished(panel.slot, _record(i, prompt_n=123_456_789 if i == 150 else 9))
    assert model.rowCount() == 1  # nothing inserted per request
    qtbot.waitUntil(lambda: model.rowCount() == 300, timeout=2_000)
    assert len(batches) <= 2 and panel.slot.n_requests == 300
    assert table.columnWidth(2) == 40  # 300 finished requests, one with a wide number: no resize
    panel.requests.fit_button.click()
    assert table.columnWidth(2) >= table.sizeHintForColumn(2) > 40


def test_a_hidden_throughput_tab_does_no_work(qtbot, ctx):
    """Requests finish while the Requests tab shows: the throughput curves are not redrawn until their tab
    shows, then every request is there."""
    from llm_tuner.ui.panels.live_panel import LivePanel

    panel = LivePanel(ctx)
    qtbot.addWidget(panel)
    panel.show()
    panel.tabs.setCurrentWidget(panel.requests)
    for i in range(40):
        panel._on_bridge_request_finished(panel.slot, _record(i, t=1_000_000.0 + i))
    qtbot.waitUntil(lambda: panel.request_model.rowCount() == 40, timeout=2_000)
    qtbot.wait(300)  # three redraw ticks
    x, _y = panel.throughput.gen_pts.getData()
    assert x is None or len(x) == 0
    panel.tabs.setCurrentWidget(panel.throughput)
    qtbot.waitUntil(lambda: panel.throughput.gen_pts.getData()[0] is not None
                    and len(panel.throughput.gen_pts.getData()[0]) == 40, timeout=2_000)


def test_the_request_table_keeps_the_newest_and_says_where_the_rest_are(qtbot):
    from llm_tuner.ui.panels.live_requests import RequestsView

    view = RequestsView(max_rows=100)
    qtbot.addWidget(view)
    view.show()
    assert not view.hint.isHidden() and view.note.isHidden()
    for i in range(250):
        view.add(_record(i))
    qtbot.waitUntil(lambda: view.model.total == 250, timeout=2_000)
    assert view.model.rowCount() == 100 and view.model.records[0].task == 150  # the newest 100
    assert view.hint.isHidden() and not view.note.isHidden()
    assert "newest 100 of 250" in view.note.text() and "history" in view.note.text()
    view.reset([_record(i) for i in range(5)])
    assert view.model.rowCount() == 5 and view.note.isHidden()


def test_request_bins_cost_the_same_at_any_count_and_keep_outliers():
    """The throughput plots draw from bins: a bounded number of points whatever the requests, exact while
    there are few, and a spike in the middle of 100k requests is still drawn."""
    from llm_tuner.ui.plots.request_bins import RequestBins

    bins = RequestBins(("gen", "draft"), max_bins=100, rolling=4)
    for i in range(10):
        bins.add(float(i), {"gen": float(i), "draft": None})
    t, v = bins.points("gen")
    assert list(t) == list(range(10)) and list(v) == list(range(10))  # one point per request
    assert list(bins.means("gen")[1][-1:]) == [7.5]  # mean of the last 4
    assert len(bins.points("draft")[0]) == 0 and not bins.known["draft"]
    for i in range(10, 100_000):
        bins.add(float(i), {"gen": 1000.0 if i == 54_321 else 50.0, "draft": 75.0 if i % 2 else None})
    t, v = bins.points("gen")
    assert len(t) <= 200 and bins.total == 100_000
    assert 1000.0 in v and t.min() == 0.0 and t.max() == 99_999.0
    assert bins.known["draft"] and set(bins.points("draft")[1]) == {75.0}


def test_the_log_keeps_the_newest_lines_and_copies_the_selected_ones(qtbot):
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication

    from llm_tuner.services.logparse import LogLine
    from llm_tuner.ui.panels.log_console import LogConsole

    console = LogConsole(max_lines=50)
    qtbot.addWidget(console)
    console.show()
    console.append_lines([LogLine("info", f"line {i}") for i in range(80)])
    lines = console.shown_text().splitlines()
    assert len(lines) == 50 and lines[0] == "I line 30" and lines[-1] == "I line 79"
    assert console.count.text() == "50 lines"
    console.text.selectRow(48)
    qtbot.keyClick(console.text, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QGuiApplication.clipboard().text() == "I line 78"


def test_show_all_reads_the_whole_session_back_without_gaps_or_doubles(qtbot, tmp_path):
    """"Show all" past the ring: the session's requests from the real history, joined to those the panel got
    while it was read (the history is written first: it may be ahead of the panel, never behind but for those)."""
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.sessions import SessionRepository
    from llm_tuner.ui.panels.live_requests import RequestsView

    repo = SessionRepository(open_engine(tmp_path / "db.sqlite"))
    sid = repo.begin(["llama-server"], started_unix=time.time())
    recs = [_record(i, t=1_000_000.0 + i) for i in range(120)]
    for rec in recs[:110]:
        repo.add_request(sid, rec)
    view = RequestsView(max_rows=50)
    qtbot.addWidget(view)
    view.show()
    for rec in recs[:105]:
        view.add(rec)
    qtbot.waitUntil(lambda: view.model.total == 105, timeout=2_000)
    assert view.model.rowCount() == 50 and view.all_button.isVisible()
    got = {"received": 105}
    view.read_all(repo, sid, lambda: (got["received"], recs[got["received"] - 50:got["received"]]))
    got["received"] = 115  # ten more reached the panel while the history was read (110 stored)
    qtbot.waitUntil(lambda: view.model.rowCount() == 115, timeout=10_000)
    assert [r.task for r in view.model.records] == list(range(115))
    assert view.note.isHidden() and not view.all_button.isVisible()
    view.add(recs[115])  # the table keeps growing: the user asked for all
    qtbot.waitUntil(lambda: view.model.rowCount() == 116, timeout=2_000)
    view.show_all(recs[:110], 100, recs[50:100])  # the history ahead of the panel: those come as usual
    assert [r.task for r in view.model.records] == list(range(100))
    view.reset(recs[:60])  # another session: the ring again
    assert view.model.rowCount() == 50


@pytest.mark.server
def test_a_profile_program_launches_only_once_confirmed(qtbot, ctx, tmp_path):
    """The Live tab runs the profile's own program (a fork, another build) once the user confirmed it, and never
    before: nothing runs an unconfirmed program."""
    from llm_tuner.core.profile import LaunchProfile
    from llm_tuner.services.binaries import trust_binary
    from llm_tuner.ui.panels.live_panel import LivePanel

    mark = tmp_path / "ran.txt"
    prog = tmp_path / "llama-server"
    prog.write_text(f"#!/bin/sh\necho ran >> {mark}\n")
    prog.chmod(0o755)
    panel = LivePanel(ctx)
    qtbot.addWidget(panel)
    ctx.state.set_profile(LaunchProfile(binary=str(prog), model=str(tmp_path / "m.gguf")))
    qtbot.waitUntil(lambda: panel.fleet.from_editor, timeout=5000)
    with pytest.raises(ValueError, match="not been confirmed"):
        panel.fleet.build_plan(panel.start_facts())
    assert not panel.start() and not mark.exists()
    trust_binary(prog, ctx.settings, save=False)
    assert panel.fleet.build_plan(panel.start_facts()).binary == str(prog)
    assert not mark.exists()  # planning runs nothing


def test_request_rows_land_with_the_log_lines_that_finished_them(qtbot, ctx):
    """Issue 26: a request's row is inserted in the same batch as its log lines (one paint of both views per
    batch, not one for the lines and another for the rows a timer later)."""
    from llm_tuner.services.logparse import LogLine
    from llm_tuner.ui.panels.live_panel import LivePanel

    panel = LivePanel(ctx)
    qtbot.addWidget(panel)
    panel.show()
    panel.tabs.setCurrentWidget(panel.requests)
    for i in range(3):
        panel._on_bridge_request_finished(panel.slot, _record(i))
    assert panel.request_model.rowCount() == 0  # queued, not inserted per request
    panel._on_bridge_log_lines_received(panel.slot, [LogLine("info", f"slot print_timing: task {i}") for i in range(3)])
    assert panel.request_model.rowCount() == 3  # with the lines, no timer of its own in between
    assert panel.log_console.model.rowCount() == 3


def test_request_rows_repaint_the_shown_table_at_most_once_a_second(qtbot, ctx):
    """Issue 26: a repaint of the request table costs ~10 ms, so while it shows, rows land with the log lines at
    most once every ROWS_EVERY_S (the lines still come every batch); none is lost, and hidden it takes every
    batch."""
    from llm_tuner.services.logparse import LogLine
    from llm_tuner.ui.panels.live_panel import LivePanel
    from llm_tuner.ui.panels.live_requests import ROWS_EVERY_S

    panel = LivePanel(ctx)
    qtbot.addWidget(panel)
    panel.show()
    panel.tabs.setCurrentWidget(panel.requests)

    def batch(i: int) -> None:
        panel._on_bridge_request_finished(panel.slot, _record(i))
        panel._on_bridge_log_lines_received(panel.slot, [LogLine("info", f"slot print_timing: task {i}")])

    batch(0)
    assert panel.request_model.rowCount() == 1  # the first lands at once
    batch(1)
    batch(2)
    assert panel.request_model.rowCount() == 1 and panel.log_console.model.rowCount() == 3
    qtbot.wait(int(1000 * ROWS_EVERY_S) + 50)
    batch(3)
    assert panel.request_model.rowCount() == 4  # the rows held back land with the next batch, in order
    assert [r.task for r in panel.request_model.records] == [0, 1, 2, 3]
    batch(4)
    qtbot.waitUntil(lambda: panel.request_model.rowCount() == 5, timeout=3_000)  # no more lines: the timer
    panel.tabs.setCurrentWidget(panel.throughput)
    batch(5)
    assert panel.request_model.rowCount() == 6  # hidden: no paint, so no wait


def test_the_bridge_hands_log_lines_over_a_few_times_a_second(qtbot):
    """Issue 26: each batch of log lines repaints the log view (the most of the app's CPU under a busy server),
    so a server writing lines all the time gets them shown every FRAME_MS (4 Hz), all of them, in order."""
    import threading

    from llm_tuner.qt.server_bridge import FRAME_MS, ServerBridge
    from llm_tuner.services.logparse import LogLine

    bridge = ServerBridge()
    batches: list[list] = []
    bridge.log_lines_received.connect(batches.append)
    stop = threading.Event()

    def write() -> None:  # a busy server's log reader: a line every 5 ms
        i = 0
        while not stop.is_set():
            bridge._post(LogLine("info", f"line {i}"))
            i += 1
            time.sleep(0.005)

    t = threading.Thread(target=write)
    t0 = time.monotonic()
    t.start()
    qtbot.wait(2000)
    stop.set()
    t.join()
    qtbot.wait(2 * FRAME_MS)
    elapsed = time.monotonic() - t0
    assert 2 <= len(batches) <= elapsed / 0.25 + 1  # at most four a second (ten before)
    lines = [x.text for b in batches for x in b]
    assert lines == [f"line {i}" for i in range(len(lines))] and len(lines) > 100


@pytest.mark.server
def test_memory_by_owner_forgets_a_server_that_crashed(qtbot, ctx, tiny_model):
    """Issue 35 item 10: after the server died, memory by owner no longer shows its weights and K/V in host RAM
    (the last snapshot stayed, as if the memory were still held); it says the server is gone."""
    import os
    import signal

    from llm_tuner.ui.panels.live_panel import LivePanel

    panel = LivePanel(ctx)
    qtbot.addWidget(panel)
    panel.show()
    panel.args_edit.setText(f"-m {tiny_model} -c 1024 -np 1 -t 2")
    assert panel.start()
    qtbot.waitUntil(lambda: "ready" in panel.state_label.text(), timeout=90_000)
    qtbot.waitUntil(lambda: bool(panel.memory_bars.last) and bool(panel.memory_bars.last[0].weights_mib),
                    timeout=10_000)
    os.kill(panel.bridge.session.pid, signal.SIGKILL)  # a crash: no goodbye
    qtbot.waitUntil(lambda: "exited" in panel.state_label.text() or "did not" in panel.state_label.text(),
                    timeout=30_000)
    qtbot.wait(1500)  # a few redraws of the Devices tab
    assert panel.memory_bars.last == []
    assert "not running" in panel.memory_bars.rows.empty_text


@pytest.mark.server
def test_the_arguments_line_shows_the_selected_servers_command(qtbot, ctx, tiny_model):
    """Issue 35 item 12: while a server runs, the arguments line is its command (read-only), not the profile edited
    since; a new server's line is the edited profile's, which Start launches."""
    import shlex

    from llm_tuner.core.profile import LaunchProfile
    from llm_tuner.ui.panels.live_panel import LivePanel

    panel = LivePanel(ctx)
    qtbot.addWidget(panel)
    panel.show()
    running = f"-m {tiny_model} -c 1024 -np 1 -t 2"
    panel.args_edit.setText(running)
    assert panel.start()
    qtbot.waitUntil(lambda: "ready" in panel.state_label.text(), timeout=90_000)
    ctx.state.set_profile(LaunchProfile(model=str(tiny_model), ctx_size=2048, threads=2))  # edited meanwhile
    own = shlex.split(running) + ["--port", str(panel.slot.port)]  # its whole command: the port chosen for it too
    assert shlex.split(panel.args_edit.text()) == own
    assert panel.args_edit.isReadOnly()
    assert "2048" in panel.start_button.toolTip()  # Start says what it would launch beside this one

    panel.new_server_button.click()  # an empty slot: the edited profile, editable, is what Start launches
    assert "--ctx-size 2048" in panel.args_edit.text() and not panel.args_edit.isReadOnly()
    panel.server_combo.setCurrentIndex(0)
    assert shlex.split(panel.args_edit.text()) == own and panel.args_edit.isReadOnly()
    panel.stop_button.click()
    qtbot.waitUntil(lambda: "exited" in panel.state_label.text(), timeout=30_000)
    assert "--ctx-size 2048" in panel.args_edit.text() and not panel.args_edit.isReadOnly()  # Start's command again
