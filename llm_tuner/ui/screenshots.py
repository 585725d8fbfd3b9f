"""Walk the main views and save a PNG of each (used by scripts/screenshots and the README).

The walk is the quick start a new user follows: pick the demo model, save it as a profile, launch it and
send a test prompt (Live has data), benchmark it and a copy with -ub 256 (short specs), compare the two, then
tune the profile over two of the knobs the app proposes (a three-minute budget), then launch it again and
chat.
"""

from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QEventLoop, Qt
from PySide6.QtGui import QGuiApplication

from llm_tuner.services.demo_model import find_demo_model
from llm_tuner.ui.panels.tune_form import KNOB_ROLE


def _settle(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        QCoreApplication.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 50)
        time.sleep(0.02)


def _grab(window, path: Path) -> Path:
    screen = QGuiApplication.primaryScreen()
    pixmap = screen.grabWindow(window.winId()) if screen is not None else window.grab()
    if pixmap.isNull() or pixmap.width() < 10 or QGuiApplication.platformName() == "offscreen":
        pixmap = window.grab()
    pixmap.save(str(path))
    return path


def _wait_until(predicate, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        _settle(0.1)
    return predicate()


def _short_spec(bench) -> None:
    bench.prompt_edit.setText("128")
    bench.gen_spin.setValue(32)
    bench.reps_spin.setValue(3)
    bench.warmup_spin.setValue(1)


def _short_tune(tune) -> None:
    """Tune the saved profile over two of the proposed knobs (the micro-batch and the threads) with small
    requests and a three-minute budget."""
    form = tune.form
    _wait_until(lambda: "propos" in form.knobs_hint.text() and "…" not in form.knobs_hint.text(), 60)
    for r in range(form.knob_table.rowCount()):
        item = form.knob_table.item(r, 0)
        keep = item.data(KNOB_ROLE).flag in ("ubatch_size", "threads")
        item.setCheckState(Qt.CheckState.Checked if keep else Qt.CheckState.Unchecked)
    form.prompt_spin.setValue(128)
    form.gen_spin.setValue(32)
    form.budget_spin.setValue(180)
    form.screen_reps_spin.setValue(2)
    form.final_reps_spin.setValue(3)


def chat_with(window, live) -> None:
    """Launch the edited profile again and ask the Chat one question (the shot after the tune's: the others
    keep their numbers)."""
    chat = window.chat_panel
    window.tabs.setCurrentWidget(chat)
    live.start()
    _wait_until(live.is_ready, 120)
    _wait_until(lambda: "temperature" in chat.sampling_label.text(), 30)
    chat.system_edit.setPlainText("You are a helpful assistant. Answer briefly.")
    # the demo model has no chat template: it would run on to the 1024-token default
    chat.limit_spin.setValue(48)
    done = []
    chat.session.reply_finished.connect(done.append)
    chat.send("Name three colours of the rainbow.")
    _wait_until(lambda: bool(done), 120)
    if not done:  # a model that rambles on: the shot shows what came, stopped
        chat.stop_button.click()
        _wait_until(lambda: bool(done), 10)
    chat.input_edit.setPlainText("And one more?")


def capture_views(app, ctx, window, out: Path, launch_server: bool = True) -> list[Path]:
    """Walk the quick start (optionally without a server) and grab each main view."""
    saved: list[Path] = []

    def shot(name: str, widget=None) -> None:
        if widget is not None:
            window.tabs.setCurrentWidget(widget)
        _settle(1.2)
        saved.append(_grab(window, out / f"{len(saved) + 1}-{name}.png"))

    _wait_until(lambda: ctx.state.inventory is not None, 60)
    _settle(1.0)
    shot("first-run", window.profile_panel)
    qs = window.quick_start
    demo = find_demo_model()
    models = window.models_panel
    if demo is not None:
        _wait_until(lambda: models.model.row_of(str(demo)) is not None, 30)
    qs.buttons["model"].click()
    _settle(0.5)
    profile = window.profile_panel
    for field, value in (("threads", "2"), ("ctx_size", "4096")):
        profile.editors[field].widget.setText(value)
    profile._on_field_edited()
    qs.buttons["profile"].click()
    shot("profile", profile)
    shot("plan", window.plan_panel)
    live = window.live_panel
    if launch_server:
        window.tabs.setCurrentWidget(live)
        live.start()
        _wait_until(live.is_ready, 120)
        for _ in range(3):
            live.send_test_prompt()
            _wait_until(lambda: live.test_button.isEnabled(), 60)
        live.tabs.setCurrentIndex(0)
        _settle(3.0)
        shot("live-devices", live)
        live.tabs.setCurrentIndex(live.tabs.indexOf(live.request_table.parentWidget()))
        shot("live-requests", live)
        live.tabs.setCurrentIndex(1)
        shot("live-throughput", live)
        live.stop_server()
        _wait_until(lambda: not live.slot.running, 30)
        bench = window.bench_panel
        _short_spec(bench)

        def benchmark() -> None:  # the run may wait for a profile save first: wait for a new run
            before = bench.last_run
            window.run_benchmark()
            _wait_until(lambda: bench.last_run is not before and not bench.is_running(), 300)

        benchmark()
        shot("benchmark", bench)
        qs.buttons["second"].click()
        benchmark()
        bench.tabs.setCurrentIndex(1)
        _settle(1.0)
        shot("history", bench)
        bench.tabs.setCurrentIndex(0)
        qs.buttons["compare"].click()
        _wait_until(lambda: window.compare_panel.model.rowCount() > 0, 30)
        shot("compare", window.compare_panel)
        tune = window.tune_panel
        window.tabs.setCurrentWidget(tune)
        _short_tune(tune)
        tune.candidates.check_button.click()  # the knobs as set: each value planned before the tune starts
        _wait_until(lambda: tune.candidates.table.rowCount() > 0, 60)
        tune.right_tabs.setCurrentWidget(tune.candidates)
        shot("tune-candidates", tune)
        tune.run_button.click()
        _wait_until(lambda: not tune.is_running(), 300)
        tune.right_tabs.setCurrentIndex(0)
        shot("tune-trials", tune)
        tune.right_tabs.setCurrentWidget(tune.result_view)
        shot("tune-result", tune)
        chat_with(window, live)
        shot("chat", window.chat_panel)
        live.stop_server()
        _wait_until(lambda: not live.slot.running, 30)
    else:
        shot("live", live)
        shot("benchmarks", window.bench_panel)
        shot("compare", window.compare_panel)
        shot("tune", window.tune_panel)
    return saved


def capture_get_models(window, out: Path, query: str) -> Path | None:
    """Open Get models from the Models view, search `query` on the hub in HF_ENDPOINT, list the first
    repository and grab the dialog once every file's plan and predicted speed are shown (None: nothing
    found)."""
    dlg = window.models_panel.open_get_models()
    dlg.resize(1300, 560)
    _settle(0.5)
    dlg.search_edit.setText(query)
    dlg.search()
    if not _wait_until(lambda: dlg.repo_table.rowCount() > 0, 30):
        dlg.close()
        return None
    dlg.repo_table.setCurrentCell(0, 0)
    _wait_until(lambda: dlg.file_table.rowCount() > 0, 30)
    speed_col = dlg.file_table.columnCount() - 1
    _wait_until(lambda: all((it := dlg.file_table.item(r, speed_col)) is not None and "t/s" in it.text()
                            for r in range(dlg.file_table.rowCount())), 90)
    _settle(1.0)
    path = _grab(dlg, out / "14-get-models.png")
    dlg.close()
    return path
