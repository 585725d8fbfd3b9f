"""Issue 22 items 4 and 12 in the Plan panel: no fit verdict for devices of unknown size (and a way to plan them),
and profile values the controls cannot show are left alone, said, and never written back by another control."""

from __future__ import annotations

import pytest

from llm_tuner.core.devices import DeviceInventory, HostInfo
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.core.settings import Settings
from llm_tuner.qt.context import AppContext
from llm_tuner.store.db import open_engine
from llm_tuner.ui.panels.plan_panel import PlanPanel

CPU_ONLY = DeviceInventory(host=HostInfo(memory_total_mib=24576, memory_available_mib=21000))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """Read only (the plan reads its header): one file for the module, zero weights (no values are computed)."""
    from tests.support.random_gguf import write_qwen3_dense, zero_weights

    with zero_weights():
        return write_qwen3_dense(tmp_path_factory.mktemp("model") / "dense.gguf", n_layer=8, n_embd=512, n_ff=1536,
                                 n_head=8, n_head_kv=2, head_dim=64, n_ctx_train=32768, weight_type="Q4_0")


@pytest.fixture
def ctx(tmp_path):
    c = AppContext(settings=Settings(), engine=open_engine(tmp_path / "plan.sqlite"))
    yield c
    c.engine.dispose()


@pytest.fixture
def panel(qtbot, ctx):
    ctx.state.set_inventory(CPU_ONLY)
    w = PlanPanel(ctx)
    qtbot.addWidget(w)
    w.resize(1100, 900)
    w.show()
    return w


def _plan(qtbot, ctx, panel, profile: LaunchProfile):
    ctx.state.set_profile(profile)
    qtbot.waitUntil(lambda: panel.plan_state.model is not None, timeout=10_000)
    return panel.recompute_now()


def test_devices_not_on_this_machine_get_no_fit_verdict_until_planned(qtbot, ctx, panel, model):
    """Seed 1's `-dev CUDA0,Vulkan2` on a CPU-only machine: the bars read "of ? (size unknown)", so the summary
    must not say "Fits."; the offered button plans both with the size set beside it, and then there is a verdict."""
    plan = _plan(qtbot, ctx, panel, LaunchProfile(model=str(model), ctx_size=4096, devices=("CUDA0", "Vulkan2")))
    assert [d.name for d in plan.devices] == ["CUDA0", "Vulkan2", "Host"]
    assert plan.fits is None
    text = panel.summary_label.text()
    assert "Fits." not in text and "No fit verdict" in text and "CUDA0, Vulkan2" in text
    assert panel.add_unknown_button.isVisible() and "CUDA0, Vulkan2" in panel.add_unknown_button.text()
    panel.planned_mib.setValue(8192)
    assert "8.00 GiB each" in panel.add_unknown_button.text()
    panel.add_unknown_button.click()
    plan = panel.recompute_now()
    assert [(d.name, d.capacity_mib, d.hypothetical) for d in plan.devices[:2]] == [("CUDA0", 8192, True),
                                                                                   ("Vulkan2", 8192, True)]
    assert plan.fits is True and "Fits." in panel.summary_label.text()
    assert not panel.add_unknown_button.isVisible()


def test_a_machine_not_yet_read_gives_no_verdict_either(qtbot, ctx, model):
    w = PlanPanel(ctx)  # no inventory yet: the host's memory is unknown
    qtbot.addWidget(w)
    plan = _plan(qtbot, ctx, w, LaunchProfile(model=str(model), ctx_size=4096))
    assert plan.fits is None and "memory is not read yet" in w.summary_label.text()
    assert "Fits." not in w.summary_label.text()


def test_a_context_beyond_the_spin_box_is_kept_said_and_planned(qtbot, ctx, panel, model):
    """`-c 99999999999` raised OverflowError in _sync_controls on every profile change and the plan went stale."""
    plan = _plan(qtbot, ctx, panel, LaunchProfile(model=str(model), ctx_size=99_999_999_999))
    assert plan is not None and plan.n_ctx > 10_000_000 and plan.fits is False  # planned with the real value
    assert panel.controls_note.isVisible() and "-c 99999999999" in panel.controls_note.text()
    assert "-c 99999999999" in panel.ctx_spin.toolTip()
    ctx.state.set_profile(ctx.state.profile.model_copy(update={"cache_type_k": "q8_0"}))  # another change: no error
    assert ctx.state.profile.ctx_size == 99_999_999_999
    panel.ctx_spin.setValue(8192)  # the user sets it here: now it is replaced, and the note goes
    assert ctx.state.profile.ctx_size == 8192 and not panel.controls_note.isVisible()
    assert "99999999999" not in panel.ctx_spin.toolTip()
    assert panel.settings_box.label_of("ctx").text() == "Context (-c)"  # the ⚠ goes with it


def test_changing_the_k_cache_writes_only_the_k_cache(qtbot, ctx, panel, model):
    """`-c 20000000 -ngl 1000` came back as `-c 10000000 -ngl 999` after a K cache change; `-ngl -5` and
    `-ngl all` were removed; a -ub the list lacks became 512."""
    _plan(qtbot, ctx, panel, LaunchProfile(model=str(model), ctx_size=20_000_000, gpu_layers=1000,
                                           ubatch_size=300))
    panel.ctk_combo.setCurrentText("q8_0")
    p = ctx.state.profile
    assert (p.ctx_size, p.gpu_layers, p.ubatch_size, p.cache_type_k) == (20_000_000, 1000, 300, "q8_0")
    note = panel.controls_note.text()
    assert "-c 20000000" in note and "-ngl 1000" in note and "-ub 300" in note
    for layers in (-5, "all"):
        ctx.state.set_profile(p.model_copy(update={"gpu_layers": layers}))
        panel.ctv_combo.setCurrentText("q4_0" if panel.ctv_combo.currentText() != "q4_0" else "q8_0")
        assert ctx.state.profile.gpu_layers == layers
        assert f"-ngl {layers}" in panel.controls_note.text()
        assert panel.settings_box.label_of("ngl").text().startswith("⚠")


def test_out_of_range_numbers_are_advice_errors():
    from llm_tuner.core.advice import advise

    found = {a.id: a for a in advise(LaunchProfile(model="m.gguf", ctx_size=99_999_999_999))}
    assert found["value-out-of-range"].severity == "error" and "99999999999" in found["value-out-of-range"].message
    assert "value-out-of-range" not in {a.id for a in advise(LaunchProfile(model="m.gguf", ctx_size=20_000_000,
                                                                           seed=4294967295))}
