"""The Tune view's Candidates tab: what a tune would try, planned before it starts (the list `tune --dry-run`
prints). Real widgets offscreen, a real random-weight GGUF, the real memory plan."""

from __future__ import annotations

from PySide6.QtCore import Qt

from llm_tuner.core.memory import PlanDevice
from llm_tuner.core.tune import Knob, Objective
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
    placed = [r for r in rows if r[0] == "placement" and r[5] != "(the base)"]
    assert placed and all(r[2] == "fits" for r in placed)
    assert any("--n-gpu-layers" in r[5] and "q4_0" in r[5] for r in placed)
    assert all("MiB left" in r[4] for r in placed)  # the plan's figure beside each
    assert all(r[3] == "–" for r in rows)  # no speed model given: no prediction
    # a value that replaces the base's flag shows only what changes, never the whole command line
    t1 = next(c for c in preview_candidates([*base, "-t", "2"], {}, knobs, resolver,
                                            make_plan_fn(128, gpus=[gpu], host=host)) if c.knob == "t")
    assert str(model) not in t1.args_text and "--threads" in t1.args_text
    assert "does not fit the GPUs" in view.summary.text()
    seen = []
    view.check_requested.connect(lambda: seen.append(True))
    qtbot.mouseClick(view.check_button, Qt.MouseButton.LeftButton)
    assert seen == [True]


def test_candidates_show_their_predicted_speed_and_the_ones_a_race_would_not_start(qtbot, tmp_path):
    from llm_tuner.core.speed import SpeedCalibration
    from llm_tuner.services.tune import SpeedOracle
    from llm_tuner.ui.panels.tune_candidates import CandidateView

    with zero_weights():
        model = write_qwen3_dense(tmp_path / "dense.gguf", n_layer=8, n_embd=512, n_ff=1024, n_head=8,
                                  n_head_kv=4, head_dim=64, n_ctx_train=4096)
    base = ["-m", str(model), "-c", "2048"]
    host = PlanDevice("Host", "CPU", 24000, 20000)
    knobs = [Knob(key="t", flag="threads", values=("1", "4"))]
    # a CPU calibrated at 1 and 4 threads: reading host memory 4x faster with 4 threads
    cal = SpeedCalibration({"read:Host@1": 0.5, "read:Host@4": 0.125, "fixed:cpu@1": 0.0, "fixed:cpu@4": 0.0,
                            "compute:Host@1": 0.1, "compute:Host@4": 0.025, "pfixed:cpu@1": 0.0,
                            "pfixed:cpu@4": 0.0, "attn_gen:Host:f16/f16@1": 0.4, "attn_gen:Host:f16/f16@4": 0.1,
                            "attn_prefill:Host:f16/f16@1": 0.04, "attn_prefill:Host:f16/f16@4": 0.01},
                           source="probe of test models", error=0.15, threads=(1, 4))
    speed = SpeedOracle(Objective(kind="gen_tps", prompt_tokens=16, gen_tokens=8), cal, [], host)
    cands = preview_candidates([*base, "-t", "4"], {}, knobs, None, make_plan_fn(128, gpus=[], host=host), speed)
    by_value = {c.value: c for c in cands}
    assert by_value["1"].predicted and by_value["1"].predicted["calibrated"]
    assert "speed model" in by_value["1"].speed_pruned and not by_value["4"].speed_pruned
    view = CandidateView()
    qtbot.addWidget(view)
    view.set_candidates(cands)
    rows = {r[1]: r for r in view.rows()}
    assert rows["1"][2] == "pruned (speed)" and rows["4"][2] == "fits"
    assert "gen" in rows["1"][3] and "t/s" in rows["1"][3]
    assert "predicted far behind" in view.summary.text() and "probe of test models" in view.summary.text()
