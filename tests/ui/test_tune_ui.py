"""Issue 13's done-when path from the window: tune the demo base with the tiny random model in its extra flags
(`-m <tiny> -c 512`: the claims are what is stored, kept, saved and exported, not a model's speed) over a custom
knob that cannot change speed (`--alias a,b`), with a short budget and one repetition, through the widgets a user
clicks. The result keeps the baseline, every trial is stored (the measured ones as runs of one "tune #N" group in
the History), "Save as new profile version" creates a version and "Export report…" writes the Markdown report with
its plot. The tests take `demo_model` too: the demo base needs its file.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog

pytestmark = pytest.mark.server


def _alias_tune(qtbot, window, model, values: str = "a,b"):
    """Set the Tune view as a user would: the demo base with `-m <model> -c 512` in its extra flags (a flag given
    again replaces the base's), the proposed knobs unchecked, the custom knob `--alias a,b` (or `values`), small
    requests, one repetition, a three-minute budget (a cap: the tune ends when its search does, well under a
    minute on a quiet machine)."""
    from llm_tuner.state.tune import DEMO

    panel = window.tune_panel
    form = panel.form
    window.tabs.setCurrentWidget(panel)
    qtbot.waitUntil(lambda: form.base_combo.findData(DEMO) >= 0, timeout=10_000)
    form.base_combo.setCurrentIndex(form.base_combo.findData(DEMO))
    qtbot.keyClicks(form.extra_edit, f"-m {model} -c 512")
    qtbot.keyClick(form.extra_edit, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: "propos" in form.knobs_hint.text() and "…" not in form.knobs_hint.text(), timeout=30_000)
    for r in range(form.knob_table.rowCount()):
        form.knob_table.item(r, 0).setCheckState(Qt.CheckState.Unchecked)
    qtbot.keyClicks(form.custom_flag_edit, "--alias")
    qtbot.keyClicks(form.custom_values_edit, values)
    qtbot.mouseClick(form.add_knob_button, Qt.MouseButton.LeftButton)
    assert [k.values for k in form.knobs()] == [tuple(values.split(","))]
    form.prompt_spin.setValue(32)
    form.gen_spin.setValue(8)
    form.budget_spin.setValue(180)
    form.screen_reps_spin.setValue(1)
    form.final_reps_spin.setValue(1)
    form.final_rounds_spin.setValue(1)
    return panel


def test_tune_view_runs_keeps_the_baseline_saves_a_version_and_exports(qtbot, demo_model, tiny_model, tmp_path,
                                                                        monkeypatch):
    from llm_tuner.app import build_window
    from llm_tuner.core import flags
    from llm_tuner.store.profiles import ProfileRepository
    from llm_tuner.store.runs import RunRepository
    from llm_tuner.store.tunes import TuneRepository

    _app, ctx, window = build_window()
    qtbot.addWidget(window)
    panel = _alias_tune(qtbot, window, tiny_model)
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    assert panel.is_running() and not panel.run_button.isEnabled() and panel.cancel_button.isEnabled()
    qtbot.waitUntil(lambda: not panel.is_running(), timeout=300_000)  # the budget caps it (a busy machine)
    result = panel.result
    assert result is not None, panel.status_label.text()
    assert result.verdict != "better"  # one repetition per side cannot separate: the baseline is kept
    assert "baseline is kept" in panel.result_view.verdict_label.text()
    assert flags.value_of(list(result.winner_argv), "ctx_size") == "512"
    assert flags.value_of(list(result.winner_argv), "model") == str(tiny_model)  # the extra flags' model
    assert panel.right_tabs.currentWidget() is panel.result_view
    log = window.log_console.shown_text()  # the log dock showed each trial's server
    assert "starts its own llama-server for every trial" in log and "listening on" in log

    # Every trial is stored; the measured ones are runs of the tune's group, named so in the History.
    stored = TuneRepository(ctx.engine).list_trials(result.tune_id)
    assert TuneRepository(ctx.engine).get(result.tune_id).spec.final_rounds == 1  # the form's "final starts"
    assert len(stored) >= 3 and panel.trial_model.rowCount() == len(stored)  # baseline, a, b
    measured = [t for t in stored if t.run_id is not None]
    assert measured and all(RunRepository(ctx.engine).get_run(t.run_id).group_id == result.tune_id
                            for t in measured)
    history = window.bench_panel.history_model
    qtbot.waitUntil(lambda: f"tune #{result.tune_id}" in history.column_texts(10), timeout=10_000)
    assert sum(t.score is not None for t in panel.trial_model.trials()) == sum(
        n for kind, pts in panel.chart.points.items() if kind not in ("pruned", "failed") for n in [len(pts)])

    # Save as new profile version: the kept command line (the baseline) under the suggested name.
    name = panel.result_view.name_edit.text()
    assert name
    qtbot.mouseClick(panel.result_view.save_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "Saved" in panel.result_view.action_label.text(), timeout=10_000)
    saved = ProfileRepository(ctx.engine).latest(name)
    assert saved is not None and saved.version == 1 and saved.profile.ctx_size == 512
    assert f"tune {result.tune_id}" in saved.note

    # Export report…: Markdown with the trial plot beside it.
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *a, **k: str(tmp_path / "report"))
    qtbot.mouseClick(panel.result_view.export_button, Qt.MouseButton.LeftButton)
    report = tmp_path / "report" / f"tune-{result.tune_id}.md"
    assert report.is_file() and "-trials.svg)" in report.read_text()
    assert "<circle" in next((tmp_path / "report").glob("*-trials.svg")).read_text()
    window.close()
    ctx.engine.dispose()


def test_cancel_keeps_the_trials_and_resume_continues_without_measuring_them_again(qtbot, demo_model, tiny_model):
    from llm_tuner.app import build_window
    from llm_tuner.store.tunes import TuneRepository

    _app, ctx, window = build_window()
    qtbot.addWidget(window)
    # the baseline, then three candidates: with a model this fast, enough left to cancel after the baseline
    panel = _alias_tune(qtbot, window, tiny_model, "a,b,c")
    qtbot.mouseClick(panel.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.trial_model.rowCount() >= 1, timeout=120_000)  # the baseline is measured
    qtbot.mouseClick(panel.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.is_running(), timeout=60_000)
    assert panel.result is None and "Resume continues" in panel.status_label.text()
    assert panel.progress.value() < 1000 and panel.progress.text().startswith("cancelled at")  # issue 22 item 21
    qtbot.waitUntil(lambda: panel.resume_combo.count() == 1, timeout=10_000)
    tune = panel.resume_combo.currentData()
    assert tune.status == "cancelled" and panel.resume_button.isEnabled()
    kept = TuneRepository(ctx.engine).list_trials(tune.id)
    assert kept

    qtbot.mouseClick(panel.resume_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not panel.is_running(), timeout=300_000)
    assert panel.result is not None and panel.result.tune_id == tune.id, panel.status_label.text()
    after = {t.id: t for t in TuneRepository(ctx.engine).list_trials(tune.id)}
    for t in kept:  # not measured again: its runs and samples are kept (a race may top them up with more)
        assert after[t.id].run_ids[:len(t.run_ids)] == t.run_ids and after[t.id].samples[:len(t.samples)] == t.samples
    assert len({tuple(t.argv) for t in after.values()}) == len(after)  # no argv tried twice
    qtbot.waitUntil(lambda: panel.resume_combo.count() == 0, timeout=10_000)  # finished: nothing to resume
    window.close()
    ctx.engine.dispose()
