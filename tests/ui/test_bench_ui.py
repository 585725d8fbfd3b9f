"""Done-when path: from the window, benchmark two profiles of the demo model, compare them with a
verdict, restart the app and find both runs in the History (real server, real SQLite, short specs). The other
tests (saved profiles, a sweep, a run right after Save, Cancel) benchmark profiles of the tiny random model
(tests/conftest.py): they claim what the window stores and shows, not the demo model's figures."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from llm_tuner.core.bench_report import compare_runs
from tests.support.verdicts import verdict_counts

pytestmark = pytest.mark.server


def _short_spec(panel, label: str, extra: str) -> None:
    panel.prompt_edit.setText("16")
    panel.gen_spin.setValue(4)
    panel.reps_spin.setValue(2)
    panel.warmup_spin.setValue(0)
    panel.label_edit.setText(label)
    panel.extra_edit.setText(extra)


def _run(qtbot, panel) -> None:
    with qtbot.waitSignal(panel.ctx.state.bench_runs_changed, timeout=5_000):
        qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.is_running(), timeout=120_000)
    assert panel.last_run is not None and panel.last_run.status == "complete", panel.status_label.text()


def test_benchmark_two_profiles_compare_and_find_them_after_restart(qtbot, demo_model, tmp_path, monkeypatch):
    from llm_tuner.app import build_window

    _app, ctx, window = build_window()
    qtbot.addWidget(window)
    bench = window.bench_panel
    assert "demo model" in bench.target_label.full_text()  # no profile yet: the demo model with default flags
    window.tabs.setCurrentWidget(bench)

    _short_spec(bench, "ub512", "-ub 512")
    _run(qtbot, bench)
    run_a = bench.last_run
    assert [r.prompt_n for r in run_a.reps] == [16, 16]
    assert bench.summary_model.rowCount() > 0 and "Prefill @ 16 tok (t/s)" in bench.summary_model.column_texts(0)
    _short_spec(bench, "ub32", "-ub 32")
    _run(qtbot, bench)

    compare = window.compare_panel
    window.tabs.setCurrentWidget(compare)
    compare.by_profiles.setChecked(True)
    qtbot.waitUntil(lambda: compare.combo_a.count() == 2, timeout=10_000)
    compare.combo_a.setCurrentIndex(compare.combo_a.findData("ub512"))
    compare.combo_b.setCurrentIndex(compare.combo_b.findData("ub32"))
    qtbot.mouseClick(compare.compare_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: compare.model.rowCount() > 0, timeout=10_000)
    # The verdicts are those core.bench_report gives the two stored runs (their speeds vary from run to run).
    expected = compare_runs(run_a, bench.last_run, compare.threshold_spin.value())
    assert compare.model.verdicts() == {c.name: c.verdict for c in expected}
    assert compare.model.verdicts()["gen_tps@16"] is not None
    assert verdict_counts(expected) in compare.verdict_label.text()
    assert compare.diff_table.item(0, 0).text() == "--ubatch-size"  # one name for every spelling
    assert (compare.diff_table.item(0, 1).text(), compare.diff_table.item(0, 2).text()) == ("512", "32")

    # Export the first run as a Markdown report with PNG plots.
    paths = bench.export_runs([run_a], tmp_path / "export", "md")
    assert paths[0].read_text().count(".png)") >= 2
    assert len(list((tmp_path / "export").glob("*.png"))) >= 2

    window.close()
    ctx.engine.dispose()

    # Restart: a new window on the same data folder shows both runs in the History.
    _app, ctx2, again = build_window()
    qtbot.addWidget(again)
    history = again.bench_panel.history_model
    qtbot.waitUntil(lambda: history.rowCount() == 2, timeout=10_000)
    assert sorted(history.column_texts(2)) == ["ub32", "ub512"]
    assert set(history.column_texts(5)) == {"complete"}

    # Re-run the newest run from the History: same command line and spec, a new run.
    panel = again.bench_panel
    panel.tabs.setCurrentIndex(1)
    panel.history_view.selectRow(0)
    rerun_of = panel.selected_runs()[0]
    qtbot.mouseClick(panel.rerun_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.last_run is not None and not panel.is_running(), timeout=120_000)
    assert panel.last_run.server_argv == rerun_of.server_argv and panel.last_run.spec == rerun_of.spec
    qtbot.waitUntil(lambda: history.rowCount() == 3, timeout=10_000)

    # Delete asks for confirmation first.
    panel.tabs.setCurrentIndex(1)
    panel.history_view.selectRow(0)
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.No)
    qtbot.mouseClick(panel.delete_button, Qt.MouseButton.LeftButton)
    assert len(panel.repo.list_runs()) == 3
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    qtbot.mouseClick(panel.delete_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: history.rowCount() == 2, timeout=10_000)


def test_saved_profiles_are_benchmarked_with_their_version_and_diffed_by_flag(qtbot, tiny_model):
    from llm_tuner.app import build_window
    from llm_tuner.core.profile import LaunchProfile
    from llm_tuner.store.profiles import ProfileRepository

    _app, ctx, window = build_window()
    qtbot.addWidget(window)
    profiles = ProfileRepository(ctx.engine)
    base = LaunchProfile(model=str(tiny_model), threads=2, ctx_size=1024)
    saved = [profiles.save("big-ub", base.model_copy(update={"ubatch_size": 512})),
             profiles.save("small-ub", base.model_copy(update={"ubatch_size": 32}))]
    bench = window.bench_panel
    for s in saved:
        ctx.state.profile_name = s.name
        ctx.state.set_profile(s.profile)  # what the Profile tab publishes
        assert s.name in bench.target_label.full_text()
        _short_spec(bench, "", "")
        _run(qtbot, bench)
        assert bench.last_run.label == s.name and bench.last_run.profile_version_id == s.version_id

    compare = window.compare_panel
    compare.by_profiles.setChecked(True)
    qtbot.waitUntil(lambda: compare.combo_a.findData("small-ub") >= 0, timeout=10_000)
    compare.combo_a.setCurrentIndex(compare.combo_a.findData("big-ub"))
    compare.combo_b.setCurrentIndex(compare.combo_b.findData("small-ub"))
    qtbot.mouseClick(compare.compare_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: compare.model.rowCount() > 0, timeout=10_000)
    rows = {compare.diff_table.item(i, 0).text(): (compare.diff_table.item(i, 1).text(),
                                                  compare.diff_table.item(i, 2).text())
            for i in range(compare.diff_table.rowCount())}
    assert rows == {"--ubatch-size": ("512", "32")}  # from the saved profiles (core.cmdline.profile_diff)
    assert set(compare.model.verdicts().values()) <= {"better", "worse", "within noise"}


def test_sweep_from_the_panel_shows_a_line_plot_and_table_and_keeps_a_group(qtbot, tiny_model):
    from llm_tuner.app import build_window
    from llm_tuner.core.profile import LaunchProfile

    _app, ctx, window = build_window()
    qtbot.addWidget(window)
    ctx.state.set_profile(LaunchProfile(model=str(tiny_model), threads=2))  # what the Profile tab publishes
    window.show()
    bench = window.bench_panel
    window.tabs.setCurrentWidget(bench)
    qtbot.waitExposed(window)
    assert not bench.sweep_box.isVisible()  # no sweep yet
    _short_spec(bench, "sw", "")
    bench.reps_spin.setValue(1)
    bench.sweep_param_edit.setText("-ub")
    bench.sweep_values_edit.setText("32,256")
    qtbot.mouseClick(bench.sweep_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not bench.is_running(), timeout=120_000)
    assert bench.sweep_box.isVisible()  # on screen, beside the run's result
    assert bench.sweep_table.rowCount() == 2
    assert [bench.sweep_table.item(i, 0).text() for i in range(2)] == ["32 (complete)", "256 (complete)"]
    runs = bench.repo.list_runs()
    assert len({r.group_id for r in runs}) == 1 and runs[0].group_id is not None
    assert bench.repo.get_group(runs[0].group_id).values == ("32", "256")


def test_run_right_after_save_waits_for_the_store_and_carries_the_saved_version(qtbot, tiny_model, monkeypatch):
    """Save, then Run at once (the save is still on the profile store's worker thread): the run waits for it
    and points at the saved version, labelled by the profile's name (not "(unsaved edits)")."""
    from PySide6.QtWidgets import QInputDialog

    from llm_tuner.app import build_window
    from llm_tuner.core.profile import LaunchProfile
    from llm_tuner.store.profiles import ProfileRepository

    _app, ctx, window = build_window()
    qtbot.addWidget(window)
    profile, bench = window.profile_panel, window.bench_panel
    qtbot.waitUntil(lambda: not profile.store_busy, timeout=10_000)
    profile.set_profile(LaunchProfile(model=str(tiny_model), threads=2, ctx_size=1024, ubatch_size=64))
    monkeypatch.setattr(QInputDialog, "getText", lambda *a, **k: ("quick", True))
    _short_spec(bench, "", "")

    qtbot.mouseClick(profile.save_button, Qt.MouseButton.LeftButton)
    assert profile.store_busy  # the save has not reached the store yet
    qtbot.mouseClick(bench.run_button, Qt.MouseButton.LeftButton)
    assert bench.is_running() and "profile save" in bench.status_label.text()

    qtbot.waitUntil(lambda: bench.last_run is not None and not bench.is_running(), timeout=120_000)
    saved = ProfileRepository(ctx.engine).latest("quick")
    assert saved is not None and saved.version == 1
    run = bench.last_run
    assert run.status == "complete", bench.status_label.text()
    assert (run.label, run.profile_version_id) == ("quick", saved.version_id)
    # the log dock shows the benchmark's own server, after a line saying so
    qtbot.waitUntil(lambda: "print_timing" in window.log_console.shown_text(), timeout=10_000)
    log = window.log_console.shown_text()
    assert log.index("benchmark starts its own llama-server") < log.index("print_timing")


def test_cancel_leaves_the_bar_where_the_run_stopped_and_says_cancelled(qtbot, tiny_model):
    """Issue 22 item 21: after Cancel the bar read 100 % (the runner reports 1.0 as it winds up)."""
    from llm_tuner.app import build_window
    from llm_tuner.core.profile import LaunchProfile

    _app, ctx, window = build_window()
    qtbot.addWidget(window)
    ctx.state.set_profile(LaunchProfile(model=str(tiny_model), threads=2))  # what the Profile tab publishes
    bench = window.bench_panel
    window.tabs.setCurrentWidget(bench)
    _short_spec(bench, "cancelled", "-c 512")
    bench.reps_spin.setValue(50)
    qtbot.mouseClick(bench.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bench.progress.value() > 0, timeout=120_000)  # measuring: a repetition is done
    qtbot.mouseClick(bench.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not bench.is_running(), timeout=60_000)
    assert 0 < bench.progress.value() < 1000 and bench.progress.text().startswith("cancelled at")
    assert "Cancelled" in bench.status_label.text()
    _short_spec(bench, "again", "-c 512")  # the next run starts from 0 %, without the word
    qtbot.mouseClick(bench.run_button, Qt.MouseButton.LeftButton)
    assert bench.progress.value() == 0 and bench.progress.text() == "0%"
    qtbot.waitUntil(lambda: not bench.is_running(), timeout=120_000)
    assert bench.progress.value() == 1000
