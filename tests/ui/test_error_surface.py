"""One error surface: a failed background job, an exception in a thread or in a slot, and a server that could not
be started each reach the user (the status bar, or the view's own line) and the Errors list, and the log once."""

from __future__ import annotations

import logging
import sys
import threading

import pytest
from PySide6.QtGui import QGuiApplication
from sqlalchemy import text

from llm_tuner.qt.workers import BackgroundJob


@pytest.fixture
def window(qtbot, caplog):
    from llm_tuner.app import build_window

    caplog.set_level(logging.ERROR, logger="llm_tuner.qt.errors")
    _app, ctx, win = build_window()
    qtbot.addWidget(win)
    win.resize(1600, 900)
    win.show()
    with qtbot.waitSignal(ctx.state.inventory_detected, timeout=60_000):
        pass
    qtbot.waitUntil(lambda: not BackgroundJob.live_jobs(), timeout=60_000)  # the start-up loads are done
    win.errors.clear()
    caplog.clear()
    return win


def _status(win) -> str:
    """The status bar's message, whole (an elided one keeps the whole text in the tooltip)."""
    return win.status_text()


def _logged(caplog, what: str) -> int:
    return sum(1 for r in caplog.records if r.getMessage().startswith(f"{what} failed:"))


def test_failed_loads_reach_the_status_bar_the_errors_list_and_the_log_once(qtbot, window, caplog):
    """The History and Compare loads (jobs that had no failure path) when the store cannot answer."""
    with window.ctx.engine.begin() as conn:  # a store that cannot answer: the runs table is gone
        conn.execute(text("DROP TABLE bench_reps"))
        conn.execute(text("DROP TABLE bench_runs"))
    window.ctx.state.bench_runs_changed.emit()
    qtbot.waitUntil(lambda: {f.what for f in window.errors.failures()} >= {
        "Reading or changing the benchmark history", "Loading the runs to compare"}, timeout=30_000)
    qtbot.waitUntil(lambda: "failed:" in _status(window), timeout=10_000)
    status = _status(window)
    assert "no such table" in status and "Try again" in status  # what happened, and what to do
    assert _logged(caplog, "Reading or changing the benchmark history") == 1 and _logged(caplog, "Loading the runs to compare") == 1
    qtbot.waitUntil(lambda: window.errors_button.text() == "⚠ 2 errors", timeout=10_000)  # both signals came
    assert window.errors_button.isVisible()

    window.errors_button.click()  # the list opens again from the status bar, with Copy details
    dialog = window._errors_dialog
    assert dialog is not None and dialog.isVisible() and dialog.list.count() == 2
    dialog.copy_details()
    copied = QGuiApplication.clipboard().text()
    assert "failed: OperationalError" in copied and "Traceback (most recent call last)" in copied
    dialog.hide()


def test_an_exception_in_a_thread_or_a_slot_reaches_the_user_and_the_log_once(qtbot, window, caplog, monkeypatch):
    from llm_tuner import app as app_module

    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # restored after the test
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    monkeypatch.delenv("LLM_TUNER_SMOKE_TEST", raising=False)
    app_module.install_excepthook()

    def boom() -> None:
        raise RuntimeError("boom in a thread")

    t = threading.Thread(target=boom, name="llm-tuner-test-boom")
    t.start()
    t.join(30)
    qtbot.waitUntil(lambda: "boom in a thread" in _status(window), timeout=10_000)
    assert _status(window).startswith("A background task (llm-tuner-test-boom) failed: RuntimeError: boom in a thread")
    assert _logged(caplog, "A background task (llm-tuner-test-boom)") == 1

    try:
        raise ValueError("boom in a slot")
    except ValueError:
        sys.excepthook(*sys.exc_info())  # what Qt does with an exception a slot let through
    qtbot.waitUntil(lambda: "boom in a slot" in _status(window), timeout=10_000)
    assert _logged(caplog, "An action") == 1 and len(window.errors.failures()) == 2


def test_the_log_file_keeps_the_failure(qtbot, window):
    from llm_tuner import app as app_module
    from llm_tuner.services.paths import log_dir

    app_module.setup_logging()
    BackgroundJob(lambda _ctl: 1 / 0, what="Dividing for the log").start()
    qtbot.waitUntil(lambda: "Dividing for the log failed" in _status(window), timeout=10_000)
    for handler in logging.getLogger().handlers:
        handler.flush()
    logged = (log_dir() / "llm-tuner.log").read_text()
    assert logged.count("Dividing for the log failed: ZeroDivisionError") == 1 and "Traceback" in logged


def test_a_server_that_cannot_be_started_says_why_in_live_and_the_list(qtbot, window, caplog, tmp_path):
    """The `server-start` thread raising (a binary path no process can run): the start is reported, logged once,
    and the slot ends as "did not start" with why, not "starting" forever."""
    from llm_tuner.services.launch import plan_launch

    live = window.live_panel
    plan = plan_launch(str(tmp_path / "llama\0server"), ["-m", str(tmp_path / "m.gguf"), "--port", "8799"], {},
                       catalog=None, watch=False)
    live.slot.plan = plan
    live.bridge.launch(plan)
    qtbot.waitUntil(lambda: live.slot.display_state == "did not start", timeout=30_000)
    assert "embedded null byte" in live.message_label.text() and not live.slot.running
    assert [f.what for f in window.errors.failures()] == ["Starting the server"]
    assert _logged(caplog, "Starting the server") == 1
    assert window.server_state_label.text() == "server: did not start"


def test_a_failure_the_user_must_act_on_opens_a_dialog(qtbot, window, tmp_path):
    """A full disk: the status bar is not enough (every save fails until space is freed), so a dialog says it;
    an ordinary failure opens none."""
    from PySide6.QtWidgets import QApplication

    from llm_tuner.store.db import StorageFullError

    def dialogs():
        return [w for w in QApplication.topLevelWidgets() if w.objectName() == "action_needed_dialog" and w.isVisible()]

    BackgroundJob(lambda _ctl: 1 / 0, what="Dividing").start()
    qtbot.waitUntil(lambda: "Dividing failed" in _status(window), timeout=10_000)
    assert dialogs() == []

    def save(_ctl):
        raise StorageFullError(tmp_path / "history.sqlite")

    BackgroundJob(save, what="Saving the profile").start()
    qtbot.waitUntil(lambda: bool(dialogs()), timeout=10_000)
    box = dialogs()[0]
    assert box.text() == "Saving the profile failed." and "Free some disk space" in box.informativeText()
    box.close()


def test_what_to_do_depends_on_what_failed(tmp_path):
    import sqlite3

    from sqlalchemy.exc import OperationalError

    from llm_tuner.qt.errors import DEFAULT_ADVICE, advice_for
    from llm_tuner.store.db import StorageFullError

    assert advice_for(StorageFullError(tmp_path / "h.sqlite")) == (
        "Free some disk space (the history database's folder is in Settings), then try again.", True)
    locked = OperationalError("UPDATE x", {}, sqlite3.OperationalError("database is locked"))
    assert advice_for(locked)[0].startswith("Another program may hold the history database") and not advice_for(locked)[1]
    assert advice_for(OperationalError("SELECT", {}, sqlite3.OperationalError("no such table: x"))) == (
        DEFAULT_ADVICE, False)
    assert advice_for(PermissionError(13, "denied"))[0].startswith("Check that you may read and write")


def test_an_unreadable_settings_file_is_kept_aside_and_said_at_start(qtbot, caplog):
    """A settings.json broken by hand or by a full disk: the app starts on defaults (folders, binary path and
    trusted binaries gone) and says so, with where the old file is kept, in the status bar and the Errors list."""
    from llm_tuner.app import build_window
    from llm_tuner.services.settings_store import settings_path

    path = settings_path()
    path.write_text('{"model_folders": ["/models"],', encoding="utf-8")  # cut short
    caplog.set_level(logging.ERROR, logger="llm_tuner.qt.errors")
    _app, ctx, win = build_window()
    qtbot.addWidget(win)
    with qtbot.waitSignal(ctx.state.inventory_detected, timeout=60_000):
        pass
    kept = path.with_suffix(".json.broken")
    assert kept.read_text(encoding="utf-8").startswith('{"model_folders"')  # nothing lost
    assert ctx.settings.model_folders != ["/models"]
    failure = next(f for f in win.errors.failures() if f.what == "Reading the settings")
    assert str(path) in failure.message and str(kept) in failure.message and "default settings" in failure.message
    qtbot.waitUntil(lambda: "Reading the settings failed" in _status(win), timeout=10_000)
    assert "File ▸ Settings" in _status(win)
    _app, _ctx, again = build_window()  # said once: the next start reads a fresh settings file, or none
    qtbot.addWidget(again)
    assert sum(f.what == "Reading the settings" for f in again.errors.failures()) == 1


def test_a_data_folder_that_cannot_be_used_starts_on_the_apps_own_and_is_said(qtbot, tmp_path, monkeypatch):
    """The drive holding the chosen data folder is not connected: the window opens on the app's own folder and
    says where this session's history goes, in a dialog (the user must act) and the Errors list, without a
    traceback (a setting, not a bug). Settings says why the folder cannot be used, will not save a typed folder
    that cannot be made, creates a new one on Save, and still saves other settings beside the untouched one."""
    from PySide6.QtWidgets import QMessageBox

    from llm_tuner.app import build_window
    from llm_tuner.core.settings import Settings
    from llm_tuner.services.settings_store import save_settings
    from llm_tuner.ui.dialogs.settings_dialog import SettingsDialog

    monkeypatch.delenv("LLM_TUNER_DATA_DIR")
    for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"), ("XDG_STATE_HOME", "state")):
        monkeypatch.setenv(var, str(tmp_path / sub))
    gone = tmp_path / "media" / "usb" / "llm-tuner"
    gone.parent.mkdir(parents=True)  # the mount point is there, empty
    save_settings(Settings(data_dir=str(gone)))
    _app, ctx, win = build_window()
    qtbot.addWidget(win)
    with qtbot.waitSignal(ctx.state.inventory_detected, timeout=60_000):
        pass
    assert str(ctx.engine.url.database).startswith(str(tmp_path / "data" / "llm-tuner"))
    assert not gone.exists()  # nothing made on the bare mount point
    failure = next(f for f in win.errors.failures() if f.what == "Opening the data folder")
    assert f"{gone} does not exist (is its drive connected?)" in failure.message and failure.needs_action
    assert "Traceback" not in failure.details and str(tmp_path / "data" / "llm-tuner") in failure.advice
    box = win.findChild(QMessageBox, "action_needed_dialog")
    assert box is not None and "does not exist" in box.informativeText()
    box.close()

    dialog = SettingsDialog(ctx.settings)
    qtbot.addWidget(dialog)
    assert "does not exist (is its drive connected?)" in dialog.data_dir_note.text()
    dialog.threshold.setValue(5.0)
    dialog.accept()  # the saved folder untouched: the other settings are saved
    assert dialog.result() == SettingsDialog.DialogCode.Accepted and dialog.result_settings().ab_threshold_pct == 5.0
    dialog = SettingsDialog(ctx.settings)
    qtbot.addWidget(dialog)
    (tmp_path / "a-file").write_text("x")
    dialog.data_dir.setText(str(tmp_path / "a-file" / "history"))
    assert "is a file, not a folder" in dialog.data_dir_note.text()
    dialog.accept()
    assert dialog.result() != SettingsDialog.DialogCode.Accepted  # a typed folder that cannot be made: not saved
    dialog.data_dir.setText(str(tmp_path / "new-drive" / "llm"))
    assert "Save creates it" in dialog.data_dir_note.text()
    dialog.accept()
    assert dialog.result() == SettingsDialog.DialogCode.Accepted and (tmp_path / "new-drive" / "llm").is_dir()
    assert dialog.result_settings().data_dir == str(tmp_path / "new-drive" / "llm")
