"""The Plan panel (issue 12): the draft model is planned, the MoE solver's placement is what the profile launches
(real llama-server), and the -ot preview says MiB moved off each device and follows device and rule changes."""

from __future__ import annotations

import pytest

from llm_tuner.core.memory import args_from_profile, plan_memory
from llm_tuner.core.profile import LaunchProfile
from tests.ui.test_plan_panel import ctx, panel  # noqa: F401 - the Plan panel's fixtures, shared


def test_the_profiles_draft_model_is_in_the_plan(qtbot, ctx, panel, demo_model):
    ctx.state.set_profile(LaunchProfile(model=str(demo_model), ctx_size=4096, parallel=1))
    qtbot.waitUntil(lambda: panel.plan_state.model is not None, timeout=10_000)
    alone = panel.recompute_now().device("Host")
    ctx.state.set_profile(LaunchProfile(model=str(demo_model), ctx_size=4096, parallel=1,
                                        spec_type=("draft-simple",), draft_model=str(demo_model)))
    qtbot.waitUntil(lambda: panel.plan_state.draft_model is not None, timeout=10_000)
    both = panel.recompute_now().device("Host")
    # the demo model as its own draft: its weights (mapped again), KV and compute come on top
    assert both.model_mib == pytest.approx(2 * alone.model_mib, rel=0.01)
    assert both.mapped_mib == pytest.approx(2 * alone.mapped_mib, rel=0.01)
    assert both.resident_mib + both.mapped_mib > 1.9 * (alone.resident_mib + alone.mapped_mib) - alone.overhead_mib
    assert "Draft model" in panel.summary_label.text()
    # the bars and the text keep what must be resident apart from the weights mapped from the file
    from llm_tuner.ui.plots.memory_bars import bar_text, segments

    assert dict(segments(both))["Mapped weights (page cache)"] == both.mapped_mib
    assert " mapped + 8.00 GiB prompt cache of " in bar_text(both) and "must stay resident" in panel.summary_label.text()
    panel.bars.grab()  # paints them
    ctx.state.set_profile(LaunchProfile(model=str(demo_model), ctx_size=4096, parallel=1))
    assert panel.recompute_now().device("Host").model_mib == pytest.approx(alone.model_mib)


def test_a_draft_model_that_cannot_be_read_is_said_not_left_as_not_read_yet(qtbot, ctx, panel, demo_model, tmp_path):
    """A -md with a typo, or a file that is no GGUF: the plan leaves the draft out, and says so and why (it said
    "Draft model not read yet." for good, under a verdict that does not count it)."""
    missing = tmp_path / "draft-typo.gguf"
    ctx.state.set_profile(LaunchProfile(model=str(demo_model), ctx_size=4096, parallel=1,
                                        spec_type=("draft-simple",), draft_model=str(missing)))
    qtbot.waitUntil(lambda: "could not be read" in panel.summary_label.text(), timeout=10_000)  # the view's own
    text = panel.summary_label.text()
    assert "Draft model draft-typo.gguf could not be read (the file does not exist)" in text, text
    assert "not read yet" not in text and "check -md in the Profile tab" in text
    assert panel.plan_state.draft_model is None

    not_gguf = tmp_path / "notes.gguf"
    not_gguf.write_text("not a model\n")
    ctx.state.set_profile(LaunchProfile(model=str(demo_model), ctx_size=4096, parallel=1,
                                        spec_type=("draft-simple",), draft_model=str(not_gguf)))
    qtbot.waitUntil(lambda: "notes.gguf could not be read" in panel.summary_label.text(), timeout=10_000)
    assert "draft-typo" not in panel.summary_label.text()  # the reason is the file's now, not the typo's

    ctx.state.set_profile(LaunchProfile(model=str(demo_model), ctx_size=4096, parallel=1,
                                        spec_type=("draft-simple",), draft_model=str(demo_model)))
    qtbot.waitUntil(lambda: f"Draft model {demo_model.name} included" in panel.summary_label.text(),
                    timeout=10_000)
    assert panel.plan_state.draft_error is None and "could not be read" not in panel.summary_label.text()


def test_the_moe_solvers_placement_is_written_into_the_profile_and_launches(qtbot, ctx, panel, tmp_path,
                                                                           server_binary):
    from llm_tuner.core.cmdline import profile_to_argv
    from llm_tuner.core.memory_log import parse_memory_log
    from llm_tuner.services.binaries import measure_server_memory
    from tests.support.random_gguf import write_qwen3_moe

    path = write_qwen3_moe(tmp_path / "moe.gguf", n_layer=8, n_embd=256, n_ff_exp=512, n_expert=16, n_ctx_train=4096)
    ctx.state.set_profile(LaunchProfile(model=str(path), ctx_size=4096, threads=2))
    qtbot.waitUntil(lambda: panel.plan_state.model is not None, timeout=10_000)
    panel.plan_state.add_planned_device("CUDA0", "CUDA", 1285)  # room for the layers and the experts of 4 of 8 blocks
    panel.margin_spin.setValue(0)
    panel.solve_layers_button.click()
    assert "--n-cpu-moe 4" in panel.solve_label.text()
    profile = ctx.state.profile
    assert profile.gpu_layers == 9 and profile.n_cpu_moe == 4 and not profile.override_tensor
    # the profile as written plans exactly as the solver's answer, and fits
    written = plan_memory(panel.plan_state.model, args_from_profile(profile), panel.plan_state.gpus(), panel.plan_state.host(), apply_fit=False)
    assert written.fits and written.device("CUDA0").total_mib == pytest.approx(panel.recompute_now().device("CUDA0").total_mib)
    assert "Fits." in panel.summary_label.text()
    # and the real server takes it: it loads, and its loader reports the expert overrides it was given
    # (a CPU build here: no CUDA0 to fill, so "fits" is the plan's word above, the server's is that it starts)
    argv, _env = profile_to_argv(profile)
    assert "--n-cpu-moe" in argv and "4" in argv
    run = measure_server_memory(server_binary, argv)
    assert run.loaded, run.log[-2000:]
    assert "tensor overrides to CPU are used" in run.log
    assert parse_memory_log(run.log)


def test_the_ot_preview_says_mib_off_each_device_and_follows_devices_and_rules(qtbot, ctx, panel, tmp_path):
    from tests.support.random_gguf import write_qwen3_dense

    path = write_qwen3_dense(tmp_path / "dense.gguf", n_layer=8, n_embd=512, n_ff=1536, n_head=8, n_head_kv=2,
                             head_dim=64, n_ctx_train=4096, weight_type="Q8_0")
    ctx.state.set_profile(LaunchProfile(model=str(path), ctx_size=4096, gpu_layers=99))
    qtbot.waitUntil(lambda: panel.plan_state.model is not None, timeout=10_000)
    panel.recompute_now()
    panel.ot_mode.setCurrentIndex(0)
    panel.ot_a.setValue(1)  # the FFN of every block
    assert "moves nothing" in panel.ot_preview_label.text()  # no GPU: everything is on the host already
    panel.plan_state.add_planned_device("CUDA0", "CUDA", 24576)
    panel.recompute_now()
    text = panel.ot_preview_label.text()
    assert "MiB off CUDA0" in text and "to Host" in text  # refreshed for the new device, not left stale
    panel.plan_state.add_planned_device("Vulkan1", "Vulkan", 24576)
    panel.recompute_now()
    text = panel.ot_preview_label.text()
    assert "MiB off CUDA0" in text and "MiB off Vulkan1" in text
    # once the rule is set, the same rule moves nothing more
    panel.ot_add_button.click()
    panel.recompute_now()
    assert "moves nothing" in panel.ot_preview_label.text()
    assert [str(r) for r in ctx.state.profile.override_tensor] == [panel.ot_box.current_rule()]


def test_preview_rule_per_device_figures():
    from llm_tuner.core.memory import MIB, parse_server_args, preview_rule
    from tests.unit.test_memory import gpu, make_model

    m = make_model(n_layer=6)
    gpus = [gpu("CUDA0"), gpu("Vulkan1")]
    prev = preview_rule(m, parse_server_args("-m x -ngl 99 -ts 1,1"), r"blk\.(0|5)\.ffn_.*=CPU", gpus)
    b0 = sum(t.n_bytes for t in m.tensors if t.name.startswith("blk.0.ffn")) / MIB
    b5 = sum(t.n_bytes for t in m.tensors if t.name.startswith("blk.5.ffn")) / MIB
    assert prev.moved_off_mib == pytest.approx({"CUDA0": b0, "Vulkan1": b5})
    assert prev.moved_to == ("Host",) and prev.moved_mib == pytest.approx(b0 + b5)
