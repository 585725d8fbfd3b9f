"""Deleting runs in the History: the SQL runs on a worker thread (a run with many repetitions takes a while), the
table reloads without them, and nothing of it runs on the GUI thread."""

from __future__ import annotations

import threading

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
