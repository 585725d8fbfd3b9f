"""Compare's "vs another build" row offers a re-tune when the profile is slower on the other build by more than
the noise (issue 39's CLI offer, in the window): a real stored build A/B (a "builds" group in a real SQLite
history, interleaved A B A B, pooled and compared by services.bench.builds) shown by the real row offscreen;
"Re-tune for this build" asks the Tune tab for that profile and binary through the shared state."""

from __future__ import annotations

from llm_tuner.core.bench_spec import BenchRun, BenchSpec, Repetition, RunGroup
from llm_tuner.core.build import BuildStamp
from llm_tuner.core.settings import Settings
from llm_tuner.qt.context import AppContext
from llm_tuner.services.bench.builds import SIDE_A, SIDE_B, builds_verdict
from llm_tuner.store.db import open_engine
from llm_tuner.store.runs import RunRepository

OLD = BuildStamp(key="f:aaaaaaaaaaaa h:1 p:-", file_sha256="a" * 64, help_sha256="1" * 64)
NEW = BuildStamp(key="f:bbbbbbbbbbbb h:2 p:-", file_sha256="b" * 64, help_sha256="2" * 64)
OTHER = "/opt/llama-new/llama-server"
SPEC = BenchSpec(prompt_tokens=(64,), gen_tokens=16, reps=4, warmup=0)


def _stored_ab(repo: RunRepository, gen_tps: dict[str, float]):
    """A builds group as builds_ab stores it: A B A B, each run with its build, read back from the history."""
    group_id = repo.create_group(
        RunGroup(kind="builds", param="llama-server", values=("llama-server", OTHER), label="q")
    )
    for _round in range(2):
        for side, build, binary in ((SIDE_A, OLD, "llama-server"), (SIDE_B, NEW, OTHER)):
            run_id = repo.create_run(
                BenchRun(
                    label="q",
                    build=build,
                    binary_path=binary,
                    group_id=group_id,
                    sweep_value=side,
                    spec=SPEC,
                    status="running",
                )
            )
            for i in range(SPEC.reps):
                repo.add_rep(
                    run_id,
                    Repetition(
                        prompt_tokens=64,
                        seq=i,
                        rep=i,
                        predicted_n=16,
                        predicted_per_second=gen_tps[side] * (1 + 0.002 * i),
                        prompt_per_second=500.0 + i,
                    ),
                )
            repo.finish_run(run_id, "complete")
    runs = sorted(repo.list_runs(group_id=group_id), key=lambda r: r.id)
    return builds_verdict(runs, group_id)


def test_a_slower_build_offers_a_retune_that_asks_the_tune_tab(qtbot, tmp_path):
    from llm_tuner.ui.panels.compare_panel import ComparePanel

    ctx = AppContext(settings=Settings(), engine=open_engine(tmp_path / "ui.sqlite"))
    repo = RunRepository(ctx.engine)
    panel = ComparePanel(ctx)
    qtbot.addWidget(panel)
    row = panel.builds_row
    qtbot.waitUntil(lambda: row.profile_combo.count() == 0, timeout=5_000)  # its profiles job is done
    assert not row.retune_button.isVisible()

    slower = _stored_ab(repo, {SIDE_A: 40.0, SIDE_B: 30.0})  # generation 25 % slower on B
    assert slower.b_slower
    panel.show()
    row.show_verdict(slower, "q", OTHER)
    assert row.retune_button.isVisible() and row.retune_button.text() == "Re-tune for this build"
    assert "slower on this build" in row.retune_button.toolTip() and OTHER in row.retune_button.toolTip()
    assert row.status_label.text().startswith("done: B against A: ")
    rows = {
        panel.diff_table.item(i, 0).text(): panel.diff_table.item(i, 2).text()
        for i in range(panel.diff_table.rowCount())
    }
    assert rows["llama-server build"] == "bbbbbbbb"  # the panel shows the pooled sides
    with qtbot.waitSignal(ctx.state.tune_requested, timeout=2_000) as asked:
        row.retune_button.click()
    assert asked.args == ["q", OTHER]

    same = _stored_ab(repo, {SIDE_A: 40.0, SIDE_B: 40.1})  # within noise: nothing to re-tune
    assert not same.b_slower
    row.show_verdict(same, "q", OTHER)
    assert not row.retune_button.isVisible()
    faster = _stored_ab(repo, {SIDE_A: 30.0, SIDE_B: 40.0})
    row.show_verdict(faster, "q", OTHER)
    assert not faster.b_slower and not row.retune_button.isVisible()


def test_the_tune_tab_takes_a_retune_request_with_the_profile_as_base_and_the_other_build(qtbot, tiny_model):
    """The request through the real window: the Tune tab comes forward with the saved profile as its base and
    the other build as the binary the tune's spec (and its knob proposal) will run."""
    from llm_tuner.app import build_window
    from llm_tuner.core.profile import LaunchProfile
    from llm_tuner.store.profiles import ProfileRepository

    _app, ctx, window = build_window()
    qtbot.addWidget(window)
    ProfileRepository(ctx.engine).save("q", LaunchProfile(model=str(tiny_model), ctx_size=512))
    ProfileRepository(ctx.engine).save("other", LaunchProfile(model=str(tiny_model), ctx_size=256))
    tune = window.tune_panel
    ctx.state.workspace.request_tune("q", OTHER)
    assert window.tabs.currentWidget() is tune
    qtbot.waitUntil(lambda: tune.form.base_combo.currentData() == "q", timeout=10_000)
    assert tune.state.binary == OTHER and tune.state.user_chose_base
    assert "Re-tuning q for the build" in tune.status_label.text()
    target = tune.state.target_for("q")
    assert target.binary == OTHER and "512" in target.argv
    ctx.state.compare_requested.emit(1, 2)  # History's "Compare": the window (it owns the tabs) shows Compare
    assert window.tabs.currentWidget() is window.compare_panel
    window.close()
    ctx.engine.dispose()
