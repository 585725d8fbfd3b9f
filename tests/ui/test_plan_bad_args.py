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
