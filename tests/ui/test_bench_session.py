"""qt.bench_session: what a benchmark run from the window tells the History and the log dock."""

from __future__ import annotations

import threading

from llm_tuner.core.bench_spec import BenchRun, DevicePeak, Repetition
from llm_tuner.qt.bench_session import BenchSession, parse_sweep_values, run_notes


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
