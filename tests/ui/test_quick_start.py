"""The quick start as a new user walks it, through the widgets they click, with the real llama-server and
the demo model: pick the model → a default profile → save → Launch → test prompt (a request row) → a second
server beside it (and a port clash refused) → a short benchmark → History → a second profile (-ub 256) →
its benchmark → Compare with a verdict."""

from __future__ import annotations

import socket

import pytest
from PySide6.QtCore import Qt

from llm_tuner.core.bench_report import compare_runs
from tests.support.verdicts import verdict_counts

pytestmark = pytest.mark.server

LEFT = Qt.MouseButton.LeftButton


def _type(qtbot, widget, text: str) -> None:
    widget.setFocus()
    widget.selectAll()
    qtbot.keyClick(widget, Qt.Key.Key_Backspace)
    qtbot.keyClicks(widget, text)


def _short_spec(qtbot, bench) -> None:
    _type(qtbot, bench.prompt_edit, "16")
    for spin, value in ((bench.gen_spin, 4), (bench.reps_spin, 2), (bench.warmup_spin, 0)):
        spin.setValue(value)


def _benchmark(qtbot, window) -> None:
    bench = window.bench_panel
    before = bench.last_run
    qtbot.mouseClick(window.quick_start.buttons["bench"], LEFT)  # switches to Benchmarks and presses Run
    assert window.tabs.currentWidget() is bench
    qtbot.waitUntil(lambda: bench.last_run is not before and not bench.is_running(), timeout=60_000)
    assert bench.last_run is not None and bench.last_run.status == "complete", bench.status_label.text()


def test_quick_start_from_model_to_verdict(qtbot, demo_model):
    from llm_tuner.app import build_window

    _app, ctx, window = build_window()
    qtbot.addWidget(window)
    window.resize(1500, 950)
    window.show()
    qs = window.quick_start
    qtbot.waitUntil(qs.isVisible, timeout=5000)  # a first run (no profiles, no runs) shows the quick start
    assert "Next: Select a model" in qs.hint.text()
    profile, live, bench = window.profile_panel, window.live_panel, window.bench_panel
    assert profile.empty_hint.isVisible()
    assert "No requests yet" in live.requests_hint.text() and not live.requests_hint.isHidden()

    # 1. The demo model is listed in Models; clicking it gives a default profile for it.
    models = window.models_panel
    qtbot.waitUntil(lambda: models.model.row_of(str(demo_model)) is not None, timeout=30_000)
    index = models.proxy.mapFromSource(models.model.index(models.model.row_of(str(demo_model)), 0))
    qtbot.mouseClick(models.table.viewport(), LEFT, pos=models.table.visualRect(index).center())
    qtbot.waitUntil(lambda: profile.profile.model == str(demo_model), timeout=5_000)
    assert live.args_edit.text().startswith("--model ")  # Live follows the profile, not a bare -m
    assert f"--model {demo_model}" in " ".join(profile.preview.toPlainText().split())
    # lean on the shared CI machine: 2 threads, a small context
    _type(qtbot, profile.editors["threads"].widget, "2")
    _type(qtbot, profile.editors["ctx_size"].widget, "2048")

    # 2. Save it as a profile (named after the model).
    qtbot.mouseClick(qs.buttons["profile"], LEFT)
    assert profile.names_list.count() == 1 and profile.current_name == demo_model.stem
    assert not profile.empty_hint.isVisible()

    # 3. Launch from the Live tab; the status bar shows state and URL.
    window.tabs.setCurrentWidget(live)
    assert f"--model {demo_model}" in live.args_edit.text() and "--threads 2" in live.args_edit.text()
    qtbot.mouseClick(live.start_button, LEFT)
    qtbot.waitUntil(live.is_ready, timeout=90_000)
    first_url = live.slot.url
    assert live.url_label.text() == first_url
    assert "ready" in window.server_state_label.text() and first_url in window.server_state_label.text()
    assert demo_model.stem in live.server_combo.currentText() and "ready" in live.server_combo.currentText()
    qtbot.waitUntil(lambda: "listening on" in window.log_console.shown_text(), timeout=10_000)  # bottom dock

    # 4. Send test prompt: a request row appears.
    qtbot.mouseClick(live.test_button, LEFT)
    qtbot.waitUntil(lambda: live.request_model.rowCount() == 1, timeout=60_000)
    assert live.requests_hint.isHidden()
    qtbot.waitUntil(lambda: "Test prompt answered" in live.message_label.text(), timeout=30_000)

    # A second server beside the first: its own port, both listed; a clash with a used port is refused.
    qtbot.mouseClick(live.new_server_button, LEFT)
    assert live.server_combo.count() == 2 and live.slots[0].state == "ready"
    port = first_url.rsplit(":", 1)[1]
    _type(qtbot, live.args_edit, f"-m {demo_model} -c 512 -t 1 --port {port}")
    qtbot.mouseClick(live.start_button, LEFT)
    assert f"Port {port} is already used by" in live.message_label.text()
    assert live.slots[1].state == "idle"  # refused before anything started: no second entry "exited"
    with socket.socket() as busy:  # a port taken by something else: the launcher says so
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        _type(qtbot, live.args_edit, f"-m {demo_model} -c 512 -t 1 --port {busy.getsockname()[1]}")
        qtbot.mouseClick(live.start_button, LEFT)
        qtbot.waitUntil(lambda: "already in use" in live.message_label.text(), timeout=10_000)
        assert "did not start" in live.server_combo.currentText()
    _type(qtbot, live.args_edit, f"-m {demo_model} -c 512 -t 1")
    qtbot.mouseClick(live.start_button, LEFT)
    qtbot.waitUntil(live.is_ready, timeout=90_000)
    assert live.slot is live.slots[1] and live.slots[1].url != first_url
    titles = [live.server_combo.itemText(i) for i in range(live.server_combo.count())]
    assert all("ready" in t for t in titles) and titles[0] != titles[1]
    assert "+1 more running" in window.server_state_label.text()
    qtbot.mouseClick(live.stop_button, LEFT)
    qtbot.waitUntil(lambda: live.slots[1].state == "exited", timeout=30_000)
    live.server_combo.setCurrentIndex(0)
    assert live.request_model.rowCount() == 1 and live.is_ready()  # the first server's view comes back

    # 5. A short benchmark of the profile; the run appears in History.
    _short_spec(qtbot, bench)
    _benchmark(qtbot, window)
    first = bench.last_run
    assert first.label == demo_model.stem and [r.prompt_n for r in first.reps] == [16, 16]
    bench.tabs.setCurrentIndex(1)
    qtbot.waitUntil(lambda: bench.history_model.rowCount() == 1, timeout=10_000)
    assert bench.history_hint.text() == ""

    # 6. A second profile (duplicate with -ub 256), benchmarked.
    qtbot.mouseClick(qs.buttons["second"], LEFT)
    assert profile.names_list.count() == 2 and profile.profile.ubatch_size == 256
    # the next Start launches it; the line shows the running server's own command (issue 35 item 12)
    assert "--ubatch-size 256" in live.fleet.command and "--ubatch-size" not in live.args_edit.text()
    _benchmark(qtbot, window)
    assert bench.last_run.label == profile.current_name
    qtbot.waitUntil(lambda: bench.history_model.rowCount() == 2, timeout=10_000)

    # 7. Compare: B against A with a verdict and the flag that differs.
    compare = window.compare_panel
    qtbot.mouseClick(qs.buttons["compare"], LEFT)
    assert window.tabs.currentWidget() is compare
    qtbot.waitUntil(lambda: compare.model.rowCount() > 0, timeout=15_000)
    text = compare.verdict_label.text()
    assert f"B = run {bench.last_run.id}" in text and f"A = run {first.id}" in text
    assert verdict_counts(compare_runs(first, bench.last_run, compare.threshold_spin.value())) in text
    assert compare.diff_table.item(0, 0).text() in ("-ub", "--ubatch-size")
    qtbot.waitUntil(lambda: "Done" in qs.hint.text(), timeout=5_000)
    assert all(qs.done.values())

    qtbot.mouseClick(live.stop_button, LEFT)
    qtbot.waitUntil(lambda: live.slot.state == "exited", timeout=30_000)

    # A restart with saved profiles and runs: no quick start (Help → Quick start brings it back).
    window.close()
    _app, _ctx, again = build_window()
    qtbot.addWidget(again)
    again.show()
    qtbot.wait(300)  # the store's answer comes off the GUI thread: the strip stays hidden
    assert not again.quick_start.isVisible()
    help_menu = next(a.menu() for a in again.menuBar().actions() if a.text() == "&Help")
    next(a for a in help_menu.actions() if a.text() == "&Quick start").trigger()
    assert again.quick_start.isVisible()


def test_server_menu_shortcuts_log_dock_and_status(qtbot):
    from PySide6.QtGui import QGuiApplication

    from llm_tuner.app import build_window

    _app, _ctx, window = build_window()
    qtbot.addWidget(window)
    window.show()
    server_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Server")
    shortcuts = {a.text(): a.shortcut().toString() for a in server_menu.actions() if a.text()}
    assert shortcuts["&Launch"] == "F5" and shortcuts["&Stop"] == "Shift+F5"
    assert shortcuts["&Benchmark"] == "Ctrl+B" and shortcuts["&Copy command"] == "Ctrl+Shift+C"
    assert "(F5)" in window.live_panel.start_button.toolTip()
    assert "(Ctrl+B)" in window.bench_panel.run_button.toolTip()
    assert window.log_dock.widget() is window.log_console  # the log is visible from every tab
    assert window.live_panel.tabs.indexOf(window.log_console) == -1
    assert "not running" in window.server_state_label.text()
    window.copy_action.trigger()
    assert QGuiApplication.clipboard().text().startswith(("llama-server", "/"))


def test_steps_tick_when_done_and_stay_ticked(qtbot):
    """A benchmark ticks its step when it completed, not while it runs; the second benchmark step needs a
    second profile measured; a launch and a test prompt stay ticked after the server is gone."""
    from llm_tuner.app import build_window
    from llm_tuner.core.bench_spec import BenchRun
    from llm_tuner.core.session import RequestRecord

    _app, _ctx, window = build_window()
    qtbot.addWidget(window)
    window.show()
    qs, bench, live = window.quick_start, window.bench_panel, window.live_panel

    def history_shows(n: int, status: str) -> None:
        bench.refresh_history()
        qtbot.waitUntil(lambda: bench.history_model.rowCount() == n
                        and bench.history_model.payload(0).status == status, timeout=10_000)
        qs.refresh()

    first = bench.repo.create_run(BenchRun(label="demo"))
    history_shows(1, "running")
    assert not qs.done["bench"] and not qs.buttons["bench"].text().startswith("✓")
    bench.repo.finish_run(first, "complete")
    history_shows(1, "complete")
    assert qs.done["bench"] and qs.buttons["bench"].text() == "✓ 5 · Benchmark"
    bench.repo.finish_run(bench.repo.create_run(BenchRun(label="demo")), "complete")  # the same profile again
    history_shows(2, "complete")
    assert not qs.done["bench2"]
    second = bench.repo.create_run(BenchRun(label="demo ub256"))
    history_shows(3, "running")
    assert not qs.done["bench2"]
    bench.repo.finish_run(second, "failed", "the server did not start")
    history_shows(3, "failed")
    assert not qs.done["bench2"]
    bench.repo.finish_run(bench.repo.create_run(BenchRun(label="demo ub256")), "complete")
    history_shows(4, "complete")
    assert qs.done["bench2"]

    # A server that was ready and answered a request, then a launch that fails in the same slot (it forgets
    # the first server's state): steps 3 and 4 stay ticked.
    slot = live.slots[0]
    slot.state = "ready"
    slot.records = [RequestRecord(time_unix=0.0, slot=0, task=1, cache_n=0, prompt_n=8, prompt_ms=1.0,
                                  prompt_per_second=8000.0, predicted_n=4, predicted_ms=1.0,
                                  predicted_per_second=4000.0)]
    qs.refresh()
    assert qs.done["launch"] and qs.done["prompt"]
    slot.state, slot.records = "exited", []
    qs.refresh()
    assert qs.done["launch"] and qs.done["prompt"]
    assert qs.buttons["launch"].text() == "✓ 3 · Launch"


def test_the_steps_ask_the_owning_views_through_the_workspace(qtbot, demo_model):
    """Without a server: "Pick a model" has Models select the demo model (the profile follows), "Save profile"
    has the Profile tab save it under the model's name, "Second profile" has it save a -ub 256 copy; a step
    whose turn has not come says what to do first, and "Compare" brings the Compare tab with its own words."""
    from llm_tuner.app import build_window

    _app, ctx, window = build_window()
    qtbot.addWidget(window)
    window.show()
    qs, profile = window.quick_start, window.profile_panel
    qtbot.mouseClick(qs.buttons["profile"], LEFT)
    assert "Pick a model first" in qs.hint.text() and profile.names_list.count() == 0
    qtbot.mouseClick(qs.buttons["second"], LEFT)
    assert "Save a first profile" in qs.hint.text()
    models = window.models_panel
    qtbot.waitUntil(lambda: models.model.row_of(str(demo_model)) is not None, timeout=30_000)
    qtbot.mouseClick(qs.buttons["model"], LEFT)
    assert window.tabs.currentWidget() is profile
    qtbot.waitUntil(lambda: profile.profile.model == str(demo_model), timeout=5_000)
    qtbot.mouseClick(qs.buttons["profile"], LEFT)
    assert profile.current_name == demo_model.stem and ctx.state.workspace.profile_names == (demo_model.stem,)
    qtbot.mouseClick(qs.buttons["second"], LEFT)
    assert profile.current_name == f"{demo_model.stem} ub256" and profile.profile.ubatch_size == 256
    assert ctx.state.workspace.profile_names == (demo_model.stem, f"{demo_model.stem} ub256")
    qtbot.waitUntil(lambda: not profile.store_busy, timeout=10_000)
    qs.refresh()
    assert qs.done["model"] and qs.done["profile"] and qs.done["second"] and not qs.done["launch"]
    qtbot.mouseClick(qs.buttons["prompt"], LEFT)
    assert window.tabs.currentWidget() is window.live_panel and "Launch a server first" in qs.hint.text()
    qtbot.mouseClick(qs.buttons["compare"], LEFT)
    assert window.tabs.currentWidget() is window.compare_panel
    qtbot.waitUntil(lambda: window.compare_panel.verdict_label.text() != "", timeout=10_000)
    assert not qs.done["compare"]
    window.close()
