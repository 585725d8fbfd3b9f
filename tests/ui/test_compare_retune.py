"""Compare's "vs another build" row offers a re-tune when the profile is slower on the other build by more than
the noise (issue 39's CLI offer, in the window): a real stored build A/B (a "builds" group in a real SQLite
history, interleaved A B A B, pooled and compared by services.bench.builds) shown by the real row offscreen;
"Re-tune for this build" asks the Tune tab for that profile and binary through the shared state."""

from __future__ import annotations

from llm_tuner.core.settings import Settings
from llm_tuner.qt.context import AppContext
from llm_tuner.services.bench.builds import SIDE_A, SIDE_B
from llm_tuner.store.db import open_engine
from llm_tuner.store.runs import RunRepository
from tests.support.stored_builds import OTHER
from tests.support.stored_builds import stored_ab as _stored_ab


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
