"""The Tune view's parts without a server: the knob form, the trials table and plot, the result's wording and
the History's group label (real widgets offscreen, real SQLite)."""

from __future__ import annotations

from PySide6.QtCore import Qt

from llm_tuner.core.tune import Knob, Trial, TuneResult


def _trials() -> list[Trial]:
    ub = "ubatch_size"
    guess = {"score": 40.0, "gen_tps": 40.0, "error": 0.173, "calibrated": True, "on": "probe of a + b"}
    return [Trial(id=1, values={ub: None}, status="measured", score=50.0, run_id=1, predicted=guess),
            Trial(id=2, values={ub: "64"}, knob=ub, status="pruned", reason="Host needs 9.0 of 8.0 GiB"),
            Trial(id=3, values={ub: "128"}, knob=ub, status="failed", reason="server exited: bad value"),
            Trial(id=4, values={ub: "256"}, knob=ub, status="measured", score=53.0, run_id=2,
                  flagged="other processes used 40% CPU"),
            Trial(id=5, values={ub: "512"}, knob=ub, status="measured", score=49.0, run_id=3)]


def test_trials_table_and_plot_mark_pruned_failed_and_flagged_apart(qtbot):
    from llm_tuner.qt.bench_models import COLOR_ROLE
    from llm_tuner.qt.tune_models import TrialTableModel
    from llm_tuner.ui.plots.tune_plots import TrialChart

    model = TrialTableModel()
    model.add_trials(_trials()[:3])
    model.add_trials([_trials()[3],  # trial 3 again (a new reason): its row is replaced
                      _trials()[2].model_copy(update={"reason": "server exited: out of memory"})])
    assert model.rowCount() == 4
    assert model.column_texts(2) == ["measured", "pruned", "failed", "measured (flagged)"]
    assert model.column_texts(7)[1] == "Host needs 9.0 of 8.0 GiB"
    assert model.column_texts(7)[2] == "server exited: out of memory"
    assert "flagged: other processes" in model.column_texts(7)[3]
    # the speed model's prediction beside the measurement (the baseline measured 25 % above it)
    assert model.column_texts(4)[:2] == ["40.0 (±17%)", "–"] and model.column_texts(5)[0] == "+25 %"
    assert "calibrated on probe of a + b" in model.index(0, 4).data(Qt.ItemDataRole.ToolTipRole)
    assert model.column_texts(1)[:2] == ["baseline", "ubatch_size=64"]  # what differs from the baseline
    colours = {model.index(r, 2).data(COLOR_ROLE) for r in range(4)}
    assert len(colours) == 4  # measured, pruned, failed, flagged: four colours

    chart = TrialChart()
    qtbot.addWidget(chart)
    chart.set_trials(_trials(), "Generation speed (t/s)")
    assert [x for x, _ in chart.points["pruned"]] == [2] and [x for x, _ in chart.points["failed"]] == [3]
    assert [x for x, _ in chart.points["flagged"]] == [4]
    assert [x for x, _ in chart.points["measured"]] == [1, 5]
    assert chart.points["pruned"][0][1] < 49.0  # no score: drawn below the lowest score


def test_knob_form_takes_proposed_and_custom_knobs_and_edited_values(qtbot):
    from llm_tuner.ui.panels.tune_form import TuneForm

    form = TuneForm()
    qtbot.addWidget(form)
    form.set_proposed_knobs([Knob(key="ubatch_size", flag="ubatch_size", values=("64", "128"), reason="-ub ≤ -b"),
                             Knob(key="threads", flag="threads", values=("1", "2"), reason="the CPU computes")])
    assert "2 knob(s) proposed" in form.knobs_hint.text()
    qtbot.keyClicks(form.custom_flag_edit, "--fork-only-flag")
    qtbot.keyClicks(form.custom_values_edit, "x,default")
    qtbot.mouseClick(form.add_knob_button, Qt.MouseButton.LeftButton)
    assert form.custom_flag_edit.text() == ""  # added: the row is cleared for the next one
    form.knob_table.item(1, 0).setCheckState(Qt.CheckState.Unchecked)  # no thread knob
    form.knob_table.item(0, 1).setText("64,128,256")  # one more candidate
    knobs = form.knobs()
    assert [k.values for k in knobs] == [("64", "128", "256"), ("x", None)]  # "default": the flag left out
    assert knobs[1].flag == "--fork-only-flag"

    # A new proposal (another base profile) replaces the proposed rows and keeps the user's own.
    form.set_proposed_knobs([Knob(key="batch_size", flag="batch_size", values=("256", "2048"), reason="")])
    assert [k.flag for k in form.knobs()] == ["batch_size", "--fork-only-flag"]
    qtbot.keyClicks(form.custom_flag_edit, "--no-values")
    qtbot.mouseClick(form.add_knob_button, Qt.MouseButton.LeftButton)
    assert "Not added" in form.knobs_hint.text() and form.knob_table.rowCount() == 2

    form.objective_combo.setCurrentIndex(form.objective_combo.findData("max_context"))
    objective = form.objective()
    assert objective.kind == "max_context" and objective.min_gen_tps == 10.0 and objective.clients == 1
    form.objective_combo.setCurrentIndex(form.objective_combo.findData("throughput"))
    form.clients_spin.setValue(4)
    assert form.objective().clients == 4 and form.objective().min_gen_tps is None
    assert form.constraints()["min_ctx"] is None and form.constraints()["max_ppl_increase_pct"] == 1.0


def test_result_says_plainly_when_the_baseline_is_kept(qtbot):
    from llm_tuner.ui.panels.tune_result import TuneResultView

    view = TuneResultView()
    qtbot.addWidget(view)
    base = ("-m", "m.gguf", "-ub", "512")
    kept = TuneResult(tune_id=4, baseline_argv=base, winner_argv=base, searched_winner_argv=(*base[:3], "256"),
                      verdict="within noise",
                      comparisons=({"name": "gen_tps@32", "unit": "t/s", "higher_is_better": True,
                                    "a": {"median": 50.0, "n": 5}, "b": {"median": 50.4, "n": 5}, "delta_pct": 0.8,
                                    "ci_low_pct": -1.5, "ci_high_pct": 3.1, "verdict": "within noise"},))
    view.set_result(kept, "demo tuned")
    assert "No change was better than noise" in view.verdict_label.text()
    assert "baseline is kept" in view.verdict_label.text()
    assert view.model.column_texts(4) == ["+0.8"] and view.model.column_texts(6) == ["within noise"]
    assert "Save the baseline" in view.save_button.text()
    assert "none (the winner is the baseline)" in view.details_label.text()

    won = kept.model_copy(update={"verdict": "better", "winner_argv": (*base[:3], "256"),
                                  "changed_flags": ({"flag": "--ubatch-size", "a": "512", "b": "256"},)})
    view.set_result(won, "demo tuned")
    assert "beats the baseline" in view.verdict_label.text()
    assert "Flags that changed: --ubatch-size: 512 → 256" in view.details_label.text()
    noisy = won.model_copy(update={"final_n_note": "n = 9 per side, chosen before the final: the screening's "
                                                   "spread 6.0% against a screened gain of +20.0%"})
    view.set_result(noisy, "demo tuned")
    assert "(n = 9 per side, chosen before the final: the screening's spread 6.0%" in view.table_title.text()
    view.set_result(won.model_copy(update={"verdict": "within noise", "winner_argv": base}), "demo tuned")
    assert "The racing winner changed --ubatch-size: 512 → 256; not kept." in view.details_label.text()
    nothing = kept.model_copy(update={"searched_winner_argv": base, "comparisons": ()})
    view.set_result(nothing, "")
    assert "No candidate beat the baseline" in view.verdict_label.text()
    assert not view.view.isVisibleTo(view) and "No final A/B" in view.table_title.text()
    out_of_time = nothing.model_copy(update={"trials": (Trial(id=1, values={"ubatch_size": None}, score=50.0),)})
    view.set_result(out_of_time, "")
    assert "No candidate was measured within the budget" in view.verdict_label.text()


def test_history_names_a_tune_trial_by_its_group(qtbot, tmp_path):
    from llm_tuner.core.bench_spec import BenchRun, RunGroup
    from llm_tuner.core.settings import Settings
    from llm_tuner.qt.context import AppContext
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.runs import RunRepository
    from llm_tuner.ui.panels.bench_history import RunHistoryTab

    ctx = AppContext(settings=Settings(), engine=open_engine(tmp_path / "h.sqlite"))
    repo = RunRepository(ctx.engine)
    tune = repo.create_group(RunGroup(kind="tune", label="demo"))
    sweep = repo.create_group(RunGroup(kind="sweep", param="-ub", values=("64", "128")))
    for group_id in (tune, tune, sweep, None):
        repo.finish_run(repo.create_run(BenchRun(label="demo", group_id=group_id)), "complete")
    tab = RunHistoryTab(ctx, repo)
    qtbot.addWidget(tab)
    tab.refresh()
    qtbot.waitUntil(lambda: tab.model.rowCount() == 4, timeout=10_000)
    assert (tune, sweep) == (1, 2)  # one id counter, but each kind numbered on its own (issue 35 item 14)
    assert sorted(tab.model.column_texts(10)) == ["", "sweep #1 (-ub)", "tune #1", "tune #1"]
    # refreshes are parallel jobs: an older one finishing last (it still saw a deleted run) is not shown
    stale = (tab.state._seq, repo.list_overview(), repo.labels(), {}, [])
    repo.delete_run(repo.list_overview()[0].id)
    ctx.state.bench_runs_changed.emit()
    qtbot.waitUntil(lambda: tab.model.rowCount() == 3, timeout=10_000)
    tab.state._on_loaded(stale)
    assert tab.model.rowCount() == 3
    ctx.engine.dispose()


def test_session_delivers_trials_in_a_few_batches_and_the_log_intro(qtbot, tmp_path, monkeypatch):
    """200 trials from the runner's thread reach the GUI in a few batches (at most ~3 a second), all of them,
    the last ones before the result."""
    import threading

    from llm_tuner.core.settings import Settings
    from llm_tuner.core.tune import Objective, TuneSpec
    from llm_tuner.qt.context import AppContext
    from llm_tuner.qt.tune_session import TuneSession
    from llm_tuner.store.db import open_engine

    release = threading.Event()

    class Runner:  # stands for TuneRunner: the session's threading and batching are under test
        def run(self, spec, *, progress, cancelled, on_trial, resume_tune_id):
            for i in range(200):
                on_trial(Trial(id=i, values={"ubatch_size": str(i)}, status="measured", score=float(i)))
                progress(i / 200, f"trial {i}")
            release.wait(10)
            return TuneResult(tune_id=1, baseline_argv=spec.base_argv, winner_argv=spec.base_argv)

    ctx = AppContext(settings=Settings(), engine=open_engine(tmp_path / "h.sqlite"))
    session = TuneSession(ctx)
    monkeypatch.setattr(session, "_runner", lambda devices: Runner())
    batches, logs, order = [], [], []
    session.trials_recorded.connect(batches.append)
    session.trials_recorded.connect(lambda _b: order.append("trials"))
    session.tune_succeeded.connect(lambda _r: order.append("result"))
    session.server_log_lines.connect(logs.extend)
    spec = TuneSpec(base_argv=("-m", "x.gguf"), objective=Objective())
    assert session.start(lambda: spec) and not session.start(lambda: spec)  # one tune at a time
    qtbot.waitUntil(lambda: sum(map(len, batches)) == 200, timeout=10_000)
    release.set()
    with qtbot.waitSignal(session.tune_finished, timeout=10_000):
        pass
    assert 1 <= len(batches) <= 10
    assert [t.id for b in batches for t in b] == list(range(200))
    assert order[-1] == "result" and "starts its own llama-server" in logs[0].text
    ctx.engine.dispose()


def test_base_choices_prefer_the_profile_shown_and_keep_the_user_choice(qtbot):
    from llm_tuner.state.tune import DEMO, EDITED
    from llm_tuner.ui.panels.tune_form import TuneForm

    form = TuneForm()
    qtbot.addWidget(form)
    changed = []
    form.base_combo.currentIndexChanged.connect(changed.append)
    form.set_base_choices(["fast", "long ctx"], True, prefer="long ctx")
    assert form.base_combo.currentData() == "long ctx" and len(changed) == 1  # a base: its knobs are proposed
    assert [form.base_combo.itemData(i) for i in range(form.base_combo.count())] == ["fast", "long ctx", EDITED, DEMO]
    form.base_combo.setCurrentIndex(form.base_combo.findData(DEMO))
    form.set_base_choices(["fast", "long ctx", "new"], False, prefer="long ctx")  # a reload keeps the choice
    assert form.base_combo.currentData() == DEMO and len(changed) == 2
    form.set_base_choices(["fast", "long ctx", "new"], False, prefer="new", keep=False)  # or follows the Profile tab
    assert form.base_combo.currentData() == "new" and len(changed) == 3


def test_panel_base_follows_a_profile_saved_in_the_profile_tab(qtbot, demo_model, tmp_path):
    """A profile saved after the Tune tab opened becomes its base (with its knobs proposed) until the user picks
    one; a user's pick stays."""
    from llm_tuner.core.profile import LaunchProfile
    from llm_tuner.core.settings import Settings
    from llm_tuner.qt.context import AppContext
    from llm_tuner.state.tune import DEMO
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.profiles import ProfileRepository
    from llm_tuner.ui.panels.tune_panel import TunePanel

    ctx = AppContext(settings=Settings(), engine=open_engine(tmp_path / "h.sqlite"))
    panel = TunePanel(ctx)
    qtbot.addWidget(panel)
    form = panel.form

    def proposed() -> bool:
        return "propos" in form.knobs_hint.text() and "…" not in form.knobs_hint.text()

    qtbot.waitUntil(lambda: form.base_combo.currentData() == DEMO and proposed(), timeout=30_000)
    assert form.knob_table.rowCount() > 0  # knobs for the demo model
    saved = ProfileRepository(ctx.engine).save("small", LaunchProfile(model=str(demo_model), ctx_size=512))
    ctx.state.profile_name = saved.name
    ctx.state.set_profile(saved.profile)  # what the Profile tab publishes after a save
    qtbot.waitUntil(lambda: form.base_combo.currentData() == "small" and proposed(), timeout=30_000)

    form.base_combo.setCurrentIndex(form.base_combo.findData(DEMO))
    form.base_combo.activated.emit(form.base_combo.currentIndex())  # the user picked the demo model
    qtbot.waitUntil(proposed, timeout=30_000)
    other = ProfileRepository(ctx.engine).save("other", saved.profile.model_copy(update={"ctx_size": 1024}))
    ctx.state.profile_name = other.name
    ctx.state.set_profile(other.profile)
    qtbot.waitUntil(lambda: form.base_combo.findData("other") >= 0, timeout=10_000)  # the choices reloaded
    assert form.base_combo.currentData() == DEMO
    qtbot.waitUntil(proposed, timeout=30_000)
    panel.shutdown()
    ctx.engine.dispose()


def test_result_view_says_what_its_save_and_export_did(qtbot, tmp_path):
    from llm_tuner.ui.panels.tune_result import TuneResultView

    view = TuneResultView()
    qtbot.addWidget(view)
    asked: list[str] = []
    view.save_requested.connect(asked.append)
    base = ("-m", "m.gguf", "-ub", "512")
    view.set_result(TuneResult(tune_id=5, tune_number=2, baseline_argv=base, winner_argv=base), "")
    view.save_button.click()
    assert view.action_label.text() == "Type a profile name first." and asked == []
    view.name_edit.setText(" demo ")
    view.save_button.click()
    assert asked == ["demo"]
    path = view.export_report(tmp_path)
    assert path == tmp_path / "tune-2.md" and path.is_file() and view.action_label.text() == f"Exported: {path}"
    view.set_result(None)
    assert view.action_label.text() == "" and view.export_report(tmp_path) is None
