"""Deleting runs in the History: the SQL runs on a worker thread (a run with many repetitions takes a while), the
table reloads without them, and nothing of it runs on the GUI thread."""

from __future__ import annotations

import threading

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox
from sqlalchemy import event


def test_deleting_runs_runs_its_sql_off_the_gui_thread(qtbot, tmp_path, monkeypatch):
    from llm_tuner.core.bench_spec import BenchRun
    from llm_tuner.core.settings import Settings
    from llm_tuner.qt.context import AppContext
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.runs import RunRepository
    from llm_tuner.ui.panels.bench_history import RunHistoryTab

    ctx = AppContext(settings=Settings(), engine=open_engine(tmp_path / "h.sqlite"))
    repo = RunRepository(ctx.engine)
    for label in ("a", "b", "c"):
        repo.finish_run(repo.create_run(BenchRun(label=label)), "complete")
    tab = RunHistoryTab(ctx, repo)
    qtbot.addWidget(tab)
    tab.refresh()
    qtbot.waitUntil(lambda: tab.model.rowCount() == 3, timeout=10_000)

    deletes: list[bool] = []  # per DELETE statement: did it run on the GUI thread?

    def spy(_conn, _cursor, statement, *_a) -> None:
        if statement.lstrip().upper().startswith("DELETE"):
            deletes.append(threading.current_thread() is threading.main_thread())

    event.listen(ctx.engine, "before_cursor_execute", spy)
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *_a, **_k: QMessageBox.StandardButton.Yes))
    try:
        tab.view.selectAll()
        tab.delete_button.click()
        qtbot.waitUntil(lambda: tab.model.rowCount() == 0, timeout=20_000)
    finally:
        event.remove(ctx.engine, "before_cursor_execute", spy)
    assert deletes and not any(deletes) and repo.list_overview() == []
    ctx.engine.dispose()


def test_opening_a_run_deleted_elsewhere_says_so_and_reads_the_list_again(qtbot, tmp_path):
    """A run deleted by another window or the CLI after the list was read: a double-click on it did nothing."""
    from llm_tuner.core.bench_spec import BenchRun
    from llm_tuner.core.settings import Settings
    from llm_tuner.qt.context import AppContext
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.runs import RunRepository
    from llm_tuner.ui.panels.bench_history import RUN_ROLE, RunHistoryTab

    ctx = AppContext(settings=Settings(), engine=open_engine(tmp_path / "h.sqlite"))
    repo = RunRepository(ctx.engine)
    ids = [repo.create_run(BenchRun(label=label)) for label in ("a", "b")]
    for run_id in ids:
        repo.finish_run(run_id, "complete")
    tab = RunHistoryTab(ctx, repo)
    qtbot.addWidget(tab)
    tab.refresh()
    qtbot.waitUntil(lambda: tab.model.rowCount() == 2, timeout=10_000)
    tab.show()
    row = next(r for r in range(tab.proxy.rowCount()) if tab.proxy.index(r, 0).data(RUN_ROLE).id == ids[1])
    repo.delete_run(ids[1])  # elsewhere
    opened = []
    tab.state.add_callback(lambda what, *d: opened.append(d) if what == "opened" else None)
    rect = tab.view.visualRect(tab.proxy.index(row, 0))
    qtbot.mouseClick(tab.view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())  # as a user's does:
    qtbot.mouseDClick(tab.view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())  # press, then double
    qtbot.waitUntil(lambda: tab.model.rowCount() == 1, timeout=10_000)
    assert f"Run #{ids[1]} is no longer in the history" in tab.hint.text() and not opened
    ctx.engine.dispose()
