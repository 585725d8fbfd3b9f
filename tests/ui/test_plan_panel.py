"""The Plan panel: live bars per device, profile round trip, split dragging, override builder, llama.cpp check."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt

from llm_tuner.core.devices import DeviceInventory, HostInfo, LlamaDevice
from llm_tuner.core.settings import Settings
from llm_tuner.qt.context import AppContext
from llm_tuner.store.db import open_engine
from llm_tuner.ui.panels.plan_panel import PlanPanel


@pytest.fixture
def ctx(tmp_path):
    return AppContext(settings=Settings(), engine=open_engine(tmp_path / "plan.sqlite"))


@pytest.fixture
def panel(qtbot, ctx):
    # this machine as the app's probe reads it (a CPU-only host): without the host's memory there is no verdict
    ctx.state.set_inventory(DeviceInventory(host=HostInfo(memory_total_mib=65536, memory_available_mib=60000)))
    w = PlanPanel(ctx)
    qtbot.addWidget(w)
    w.resize(1100, 900)
    w.show()
    return w


def _load(qtbot, panel, path):
    panel.ctx.state.select_model(path)
    qtbot.waitUntil(lambda: panel.plan_state.model is not None, timeout=10_000)
    return panel.recompute_now()


def test_empty_state_says_what_to_do(panel):
    assert "No model selected" in panel.model_label.text()
    assert panel.bars.devices() == ()


def test_bars_follow_context_and_kv_type(qtbot, panel, demo_model):
    plan = _load(qtbot, panel, demo_model)
    assert [d.name for d in panel.bars.devices()] == ["Host"]
    kv_full = plan.device("Host").kv_mib
    panel.ctx_spin.setValue(4096)
    small = panel.recompute_now().device("Host").kv_mib
    assert small < kv_full
    panel.fa_combo.setCurrentText("on")
    panel.ctk_combo.setCurrentText("q8_0")
    panel.ctv_combo.setCurrentText("q8_0")
    q8 = panel.recompute_now().device("Host").kv_mib
    assert q8 == pytest.approx(small * 34 / 64, rel=0.01)
    panel.np_spin.setValue(1)
    assert panel.recompute_now().n_seq_max == 1
    assert "n_ctx 4096" in panel.summary_label.text()


def test_profile_round_trip(qtbot, ctx, panel, demo_model):
    from llm_tuner.core.profile import LaunchProfile

    ctx.state.set_profile(LaunchProfile(model=str(demo_model), ctx_size=8192, cache_type_k="q8_0",
                                        cache_type_v="q8_0", flash_attn="on"))
    qtbot.waitUntil(lambda: panel.plan_state.model is not None, timeout=10_000)
    assert panel.ctx_spin.value() == 8192 and panel.ctk_combo.currentText() == "q8_0"
    panel.ctx_spin.setValue(16384)
    assert ctx.state.profile.ctx_size == 16384  # written back into the profile being edited
    assert panel.recompute_now().n_ctx == 16384


def test_a_profile_whose_model_is_missing_gets_no_plan_of_another_model(qtbot, ctx, panel, demo_model, tmp_path):
    """The plan follows the profile's model: a wrong path must not leave the previous model's "Fits"."""
    from llm_tuner.core.profile import LaunchProfile

    ctx.state.set_profile(LaunchProfile(model=str(demo_model), ctx_size=4096, gpu_layers=99))
    qtbot.waitUntil(lambda: panel.plan_state.model is not None, timeout=10_000)
    panel.recompute_now()
    assert "Fits" in panel.summary_label.text()
    assert panel.ngl_spin.value() == 99  # shown as written, not clamped to the layer count
    missing = tmp_path / "typo.gguf"
    ctx.state.set_profile(LaunchProfile(model=str(missing), ctx_size=4096))
    assert panel.plan_state.model is None and panel.recompute_now() is None
    assert f"{missing} does not exist" in panel.model_label.text()
    assert panel.summary_label.text() == "" and panel.bars.devices() == ()
    assert panel.ot_matches.count() == 0 and "Select a model" in panel.ot_preview_label.text()  # no stale tensors


def test_planned_devices_split_dragging_and_solver(qtbot, ctx, panel, tmp_path):
    from tests.support.random_gguf import write_qwen3_dense

    path = write_qwen3_dense(tmp_path / "dense.gguf", n_layer=8, n_embd=512, n_ff=1536, n_head=8, n_head_kv=2,
                             head_dim=64, n_ctx_train=32768, weight_type="Q4_0")
    ctx.state.set_inventory(DeviceInventory(host=HostInfo(memory_total_mib=65536, memory_available_mib=60000,
                                                          cpu_flags=("avx2",)),
                                            llama_devices=(LlamaDevice(name="CUDA0", description="RTX 4090 Laptop",
                                                                       memory_total_mib=16384,
                                                                       memory_free_mib=15000),)))
    _load(qtbot, panel, path)
    panel.plan_state.add_planned_device("Vulkan1", "Vulkan", 24576)
    plan = panel.recompute_now()
    assert [d.name for d in plan.devices] == ["CUDA0", "Vulkan1", "Host"]
    assert panel.split_bar.isVisible()
    # issue 38: the Plan says pipeline parallelism is on and what it costs; the -ot preview, that a rule ends it
    assert panel.pipeline_label.isVisible() and panel.pipeline_label.text().startswith("Pipeline parallelism: on")
    panel.ot_mode.setCurrentIndex(0)
    panel.ot_a.setValue(3)
    assert "turns pipeline parallelism off" in panel.ot_preview_label.text()
    assert "MiB on CUDA0" in panel.ot_preview_label.text()
    before = plan.device("CUDA0").layers
    # drag the boundary between CUDA0 and Vulkan1 to the right: CUDA0 gets more layers
    bx = int(panel.split_bar.boundary_x(0))
    y = 18
    qtbot.mousePress(panel.split_bar, Qt.MouseButton.LeftButton, pos=QPoint(bx, y))
    qtbot.mouseMove(panel.split_bar, QPoint(int(panel.split_bar.width() * 0.85), y))
    qtbot.mouseRelease(panel.split_bar, Qt.MouseButton.LeftButton, pos=QPoint(int(panel.split_bar.width() * 0.85), y))
    assert panel.plan_state.args.tensor_split[0] > panel.plan_state.args.tensor_split[1]
    after = panel.recompute_now().device("CUDA0").layers
    assert after > before
    panel.margin_spin.setValue(2048)
    panel.solve_ctx_button.click()
    assert "largest context" in panel.solve_label.text()
    assert panel.ctx_spin.value() > 0


def test_override_builder_previews_and_writes_the_rule(qtbot, ctx, panel, demo_model):
    from llm_tuner.core.profile import LaunchProfile

    ctx.state.set_profile(LaunchProfile(model=str(demo_model), ctx_size=4096))
    qtbot.waitUntil(lambda: panel.plan_state.model is not None, timeout=10_000)
    panel.ot_mode.setCurrentIndex(0)
    panel.ot_a.setValue(6)
    panel.ot_b.setValue(0)
    assert panel.ot_box.current_rule() == r"blk\.(0|6|12)\.ffn_.*=CPU"
    assert "matches 12 tensors" in panel.ot_preview_label.text()  # ffn_norm, gate, up, down x 3 blocks
    assert panel.ot_matches.count() == 12
    panel.ot_add_button.click()
    rules = ctx.state.profile.override_tensor
    assert [str(r) for r in rules] == [r"blk\.(0|6|12)\.ffn_.*=CPU"]
    panel.ot_mode.setCurrentIndex(2)
    panel.ot_regex.setText("blk\\.(=CPU")
    assert "not a valid regular expression" in panel.ot_preview_label.text()


@pytest.mark.server
def test_check_with_llamacpp_shows_both(qtbot, panel, demo_model):
    _load(qtbot, panel, demo_model)
    panel.ctx_spin.setValue(4096)
    panel.recompute_now()
    panel.check_button.click()
    qtbot.waitUntil(lambda: panel.check_button.isEnabled(), timeout=120_000)
    assert panel.check_table.rowCount() >= 4, panel.check_label.text()
    cells = {(panel.check_table.item(r, 0).text(), panel.check_table.item(r, 1).text()):
             panel.check_table.item(r, 4).text() for r in range(panel.check_table.rowCount())}
    assert ("Host", "KV cache") in cells and cells[("Host", "KV cache")] == "0.0 MiB (0.0%)"  # exact, and never "-0.0"
    # the check calibrates this model's compute estimate: now it matches llama.cpp's figure
    real = float(next(panel.check_table.item(r, 3).text().split()[0] for r in range(panel.check_table.rowCount())
                      if panel.check_table.item(r, 1).text() == "compute"))
    assert panel.recompute_now().device("Host").compute_mib == pytest.approx(real, rel=0.001)
    assert "calibrated" in panel.summary_label.text()


def test_the_mouse_wheel_scrolls_the_page_and_leaves_an_unclicked_field_alone(qtbot, panel):
    from PySide6.QtCore import QPointF
    from PySide6.QtGui import QWheelEvent
    from PySide6.QtWidgets import QApplication

    def wheel(widget):
        pos = QPointF(widget.rect().center())
        ev = QWheelEvent(pos, QPointF(widget.mapToGlobal(pos.toPoint())), QPoint(0, 0), QPoint(0, -120),
                         Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
        QApplication.sendEvent(widget, ev)

    before = panel.ctv_combo.currentText()
    panel.ctv_combo.clearFocus()
    wheel(panel.ctv_combo)
    assert panel.ctv_combo.currentText() == before
    panel.ctv_combo.setFocus()
    qtbot.waitUntil(panel.ctv_combo.hasFocus, timeout=2000)
    wheel(panel.ctv_combo)
    assert panel.ctv_combo.currentText() != before  # clicked into: the wheel picks values as usual


def test_one_card_under_two_backends_is_planned_as_llama_cpp_uses_it(qtbot, ctx, panel, tmp_path):
    """The H200 of a CUDA+Vulkan build (recorded list and device lines): without -dev only CUDA0 is planned;
    with -dev CUDA0,Vulkan0 both take buffers and the panel says they share one card."""
    from pathlib import Path

    from llm_tuner.core.devices import (
        GpuInfo,
        map_llama_devices,
        parse_list_devices,
        pci_ids_from_log,
        with_pci_ids,
    )
    from llm_tuner.core.profile import LaunchProfile
    from tests.support.random_gguf import write_qwen3_dense

    logs = Path(__file__).parents[1] / "data" / "logs"
    llama = with_pci_ids(parse_list_devices((logs / "h200-vulkan-list-devices.txt").read_text()),
                         pci_ids_from_log((logs / "h200-vulkan-nodev.log").read_text()))
    nvml = GpuInfo(name="nvidia:0", vendor="nvidia", index=0, model="NVIDIA H200", pci_bus_id="00000000:00:06.0",
                   memory_total_mib=143771)
    ctx.state.set_inventory(DeviceInventory(host=HostInfo(memory_total_mib=65536, memory_available_mib=60000),
                                            devices=tuple(map_llama_devices([nvml], llama)), llama_devices=tuple(llama)))
    path = write_qwen3_dense(tmp_path / "dense.gguf", n_layer=8, n_embd=512, n_ff=1536, n_head=8, n_head_kv=2,
                             head_dim=64, n_ctx_train=32768, weight_type="Q4_0")
    ctx.state.set_profile(LaunchProfile(model=str(path), ctx_size=4096))
    qtbot.waitUntil(lambda: panel.plan_state.model is not None, timeout=10_000)
    assert [d.name for d in panel.recompute_now().devices] == ["CUDA0", "Host"]
    ctx.state.set_profile(LaunchProfile(model=str(path), ctx_size=4096, devices=("CUDA0", "Vulkan0"),
                                        tensor_split=(40.0, 60.0)))
    qtbot.waitUntil(lambda: panel.plan_state.args.devices == ("CUDA0", "Vulkan0"), timeout=10_000)
    plan = panel.recompute_now()
    assert [d.name for d in plan.devices] == ["CUDA0", "Vulkan0", "Host"]
    assert "CUDA0 + Vulkan0 share one NVIDIA H200: " in panel.warnings_label.text()
