"""The Tune view's Candidates tab: what a tune would try, planned before it starts (the list `tune --dry-run`
prints). Real widgets offscreen, a real random-weight GGUF, the real memory plan."""

from __future__ import annotations

from PySide6.QtCore import Qt

from llm_tuner.core.memory import PlanDevice
from llm_tuner.core.tune import Objective
from llm_tuner.services.tune import PlacementResolver, default_knobs, make_plan_fn, preview_candidates
from tests.support.random_gguf import write_qwen3_dense, zero_weights


def test_placement_candidates_show_with_their_verdicts_and_figures(qtbot, tmp_path):
    from llm_tuner.ui.panels.tune_candidates import CandidateView

    with zero_weights():  # the plan reads the header only
        model = write_qwen3_dense(tmp_path / "dense.gguf", n_layer=24, n_embd=1024, n_ff=3072, n_head=16,
                                  n_head_kv=8, head_dim=64, n_ctx_train=32768)
    base = ["-m", str(model), "-c", "8192"]
    gpu, host = PlanDevice("CUDA0", "CUDA", 1800), PlanDevice("Host", "CPU", 24000, 20000)
    resolver = PlacementResolver(base, {}, gpus=[gpu], host=host, margin_mib=128)
    knobs = default_knobs(base, {}, objective=Objective(kind="gen_tps"), resolver=resolver)
    cands = preview_candidates(base, {}, knobs, resolver, make_plan_fn(128, gpus=[gpu], host=host))
    view = CandidateView()
    qtbot.addWidget(view)
    view.set_candidates(cands)
    rows = view.rows()
    assert len(rows) == sum(len(k.values) for k in knobs)
    placed = [r for r in rows if r[0] == "placement" and r[4] != "(the base)"]
    assert placed and all(r[2] == "fits" for r in placed)
    assert any("--n-gpu-layers" in r[4] and "q4_0" in r[4] for r in placed)
    assert all("MiB left" in r[3] for r in placed)  # the plan's figure beside each
    # a value that replaces the base's flag shows only what changes, never the whole command line
    t1 = next(c for c in preview_candidates([*base, "-t", "2"], {}, knobs, resolver,
                                            make_plan_fn(128, gpus=[gpu], host=host)) if c.knob == "t")
    assert str(model) not in t1.args_text and "--threads" in t1.args_text
    assert "does not fit the GPUs" in view.summary.text()
    seen = []
    view.check_requested.connect(lambda: seen.append(True))
    qtbot.mouseClick(view.check_button, Qt.MouseButton.LeftButton)
    assert seen == [True]
