"""qt.bench_session: what a benchmark run from the window tells the History and the log dock."""

from __future__ import annotations

import threading

from llm_tuner.core.bench_spec import BenchRun, DevicePeak, Repetition
from llm_tuner.qt.bench_session import BenchSession
from llm_tuner.state.benchmarks import parse_sweep_values, run_notes


def test_sweep_values_split_on_commas_or_on_semicolons_when_values_hold_commas():
    assert parse_sweep_values(" 256, 512 ,,1024") == ["256", "512", "1024"]
    assert parse_sweep_values("0,1;2,3; ") == ["0,1", "2,3"]


def test_run_notes_put_the_plan_beside_the_measured_peak():
    run = BenchRun(id=3, reps=(Repetition(prompt_tokens=64, peaks=(DevicePeak(device="Host", vram_used_mib=9.0),)),),
                   memory_predicted_mib={"CUDA0": 1500.0}, memory_measured_mib={"CUDA0": 1620.0, "Host": 800.0})
    notes = run_notes(run)
    assert "Memory — CUDA0: plan 1,500 MiB, measured peak 1,620 MiB; Host: measured peak 800 MiB" in notes


def test_a_run_tells_the_history_a_few_times_not_once_per_repetition(qtbot, tmp_path):
    from llm_tuner.core.settings import Settings
    from llm_tuner.qt.context import AppContext
    from llm_tuner.store.db import open_engine

    ctx = AppContext(settings=Settings(), engine=open_engine(tmp_path / "h.sqlite"))
    session = BenchSession(ctx)
    changed, progress, logs = [], [], []
    ctx.state.bench_runs_changed.connect(lambda: changed.append(1))
    session.progressed.connect(lambda f, t: progress.append(t))
    session.server_log_lines.connect(logs.extend)
    release = threading.Event()

    def work(runner, report, cancelled):
        for i in range(200):  # 200 repetitions stored, one progress each
            report(i / 200, f"rep {i}")
        release.wait(10)
        return []

    assert session.start(work) and session.is_running()
    assert not session.start(work)  # one run at a time
    qtbot.waitUntil(lambda: len(progress) == 200, timeout=10_000)
    release.set()
    with qtbot.waitSignal(session.run_finished, timeout=10_000):
        pass
    assert not session.is_running()
    assert 1 <= len(changed) <= 10  # coalesced (every RUNS_CHANGED_MS at most) plus one at the end
    assert "benchmark starts its own llama-server" in logs[0].text
    ctx.engine.dispose()


def test_history_lists_light_runs_and_opens_the_whole_record(qtbot, tmp_path):
    from PySide6.QtCore import Qt

    from llm_tuner.core.bench_spec import BenchSpec
    from llm_tuner.core.settings import Settings
    from llm_tuner.qt.context import AppContext
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.runs import RunRepository
    from llm_tuner.ui.panels.bench_panel import BenchPanel

    ctx = AppContext(settings=Settings(), engine=open_engine(tmp_path / "h.sqlite"))
    repo = RunRepository(ctx.engine)
    run_id = repo.create_run(BenchRun(label="ub512", spec=BenchSpec(prompt_tokens=(64,), reps=2)))
    for i in range(2):
        repo.add_rep(run_id, Repetition(seq=i, prompt_tokens=64, prompt_n=64, prompt_per_second=500.0, predicted_n=8,
                                        predicted_per_second=60.0, ttft_ms=120.0 + i))
    repo.finish_run(run_id, "complete")
    panel = BenchPanel(ctx)
    qtbot.addWidget(panel)
    panel.show()
    panel.tabs.setCurrentIndex(1)
    qtbot.waitUntil(lambda: panel.history_model.rowCount() == 1, timeout=10_000)
    assert panel.history_model.column_texts(8) == ["60.0"]  # medians from the light repetitions
    listed = panel.history_model.payload(0)
    assert all(r.ttft_ms is None for r in listed.reps)

    view = panel.history_view
    rect = view.visualRect(view.model().index(0, 0))
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())  # Qt 6 wants the press first
    qtbot.mouseDClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(lambda: panel.last_run is not None, timeout=10_000)
    assert panel.tabs.currentIndex() == 0 and [r.ttft_ms for r in panel.last_run.reps] == [120.0, 121.0]
    assert "Time to first token @ 64 tok (ms)" in panel.summary_model.column_texts(0)
    panel.close()
    ctx.engine.dispose()
