"""Issue 35 items 1 and 2: a pasted command with a value llama-server refuses (`-ctk q9_0`, `-c abc -t two`) is
said in the Plan, in plain words, and no plan is shown (neither a crash nor the previous profile's plan)."""

from __future__ import annotations

import pytest

from llm_tuner.core.cmdline import import_command
from llm_tuner.core.devices import DeviceInventory, HostInfo
from llm_tuner.core.settings import Settings
from llm_tuner.qt.context import AppContext
from llm_tuner.store.db import open_engine
from llm_tuner.ui.panels.plan_panel import PlanPanel

CPU_ONLY = DeviceInventory(host=HostInfo(memory_total_mib=24576, memory_available_mib=21000))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from tests.support.random_gguf import write_qwen3_dense, zero_weights

    with zero_weights():
        return write_qwen3_dense(tmp_path_factory.mktemp("model") / "dense.gguf", n_layer=4, n_embd=256, n_ff=512,
                                 n_head=4, n_head_kv=2, head_dim=64, n_ctx_train=8192, weight_type="Q4_0")


@pytest.fixture
def panel(qtbot, tmp_path):
    c = AppContext(settings=Settings(), engine=open_engine(tmp_path / "plan.sqlite"))
    c.state.set_inventory(CPU_ONLY)
    w = PlanPanel(c)
    qtbot.addWidget(w)
    w.show()
    yield w
    c.engine.dispose()


@pytest.mark.parametrize(("tail", "words"), [
    ("-ctk q9_0", "q9_0: not a K/V cache type of llama-server"),
    ("-c abc -t two", "-c needs a whole number, got 'abc'"),
    ("-fa maybe", "-fa takes on, off or auto, got 'maybe'"),
    ("-ts a,b", "-ts needs numbers separated by commas"),
])
def test_a_pasted_bad_value_is_said_in_the_plan_and_no_plan_is_kept(qtbot, panel, model, tail, words):
    state = panel.ctx.state
    state.set_profile(import_command(f"llama-server -m {model} -c 4096").profile)
    qtbot.waitUntil(lambda: panel.plan_state.model is not None, timeout=10_000)
    assert panel.recompute_now() is not None and panel.bars.devices()  # a plan of the good command
    state.set_profile(import_command(f"llama-server -m {model} {tail}").profile)  # the paste's import
    assert panel.recompute_now() is None
    text = panel.model_label.text()
    assert words in text and "Profile tab" in text
    assert "invalid literal" not in text and "KeyError" not in text
    assert not panel.bars.devices() and not panel.summary_label.text()  # not the previous profile's plan
    assert panel.plan_state.solve("context") == panel.plan_state.args_error
    state.set_profile(import_command(f"llama-server -m {model} -c 2048").profile)  # corrected: planned again
    assert panel.recompute_now() is not None and panel.plan_state.args_error is None


def test_a_planned_gpu_smaller_than_its_driver_reserve_reads_true_and_the_solver_uses_the_cpu(qtbot, panel, model):
    """Issue 35 item 3: a planned GPU of 256 MiB read "… of -359 MiB total"; the solver said "nothing fits, even on
    the CPU" although the model fits on the CPU, and left the profile not fitting."""
    from llm_tuner.core.profile import LaunchProfile
    from llm_tuner.ui.plots.memory_bars import bar_text

    state = panel.ctx.state
    state.set_profile(LaunchProfile(model=str(model), ctx_size=4096))
    qtbot.waitUntil(lambda: panel.plan_state.model is not None, timeout=10_000)
    panel.plan_state.add_planned_device("CUDA0", "CUDA", 256)
    plan = panel.recompute_now()
    cuda = plan.device("CUDA0")
    assert cuda.budget_mib == 0 and plan.fits is False
    assert "-359" not in bar_text(cuda) and "256 MiB total, all reserved by the CUDA driver" in bar_text(cuda)
    assert any("less than the CUDA driver reserves" in w for w in plan.warnings)
    assert not any("-359" in w for w in plan.warnings)
    answer = panel.plan_state.solve("layers")
    assert "fits on the CPU alone (-dev none)" in answer and "nothing fits" not in answer
    assert state.profile.devices == ("none",)
    plan = panel.recompute_now()
    assert plan.fits is True and [d.name for d in plan.devices] == ["Host"]
