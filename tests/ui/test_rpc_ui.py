"""RPC workers in the window, on real parts: Settings starts a local ggml-rpc-server, checks it (its devices
from llama-server) and stops it; the Plan puts the profile's workers' devices first (llama.cpp's order)."""

from __future__ import annotations

import pytest

from llm_tuner.core import flags
from llm_tuner.core.settings import RpcWorker, Settings
from llm_tuner.qt.context import AppContext
from llm_tuner.store.db import open_engine

pytestmark = pytest.mark.server


@pytest.fixture
def ctx(tmp_path):
    c = AppContext(settings=Settings(), engine=open_engine(tmp_path / "db.sqlite"))
    yield c
    c.workers.stop_all()


def test_settings_start_check_stop_a_local_worker(qtbot, ctx, tmp_path):
    from llm_tuner.ui.dialogs.settings_dialog import SettingsDialog

    dialog = SettingsDialog(Settings(rpc_workers=[RpcWorker(endpoint="127.0.0.1:1")]), pool=ctx.workers)
    qtbot.addWidget(dialog)
    box = dialog.workers
    box.devices_edit.setText("CPU")
    box.cache_edit.setText(str(tmp_path / "cache"))
    box.start_button.click()
    qtbot.waitUntil(lambda: len(ctx.workers.workers) == 1 and box.start_button.isEnabled(), timeout=20_000)
    endpoint = ctx.workers.workers[0].endpoint
    assert box.endpoints() == ["127.0.0.1:1", endpoint]
    assert "listens on" in box.message.text()

    box.check()
    qtbot.waitUntil(lambda: box.check_button.isEnabled(), timeout=30_000)
    assert box.table.item(0, 2).text().startswith("connection refused")
    assert box.table.item(1, 2).text().startswith("RPC0: ")  # the worker's device, as llama-server numbers it

    box.table.selectRow(1)
    box.stop_button.click()
    assert box.table.item(1, 2).text() == "stopped" and not ctx.workers.workers
    assert [w.endpoint for w in dialog.result_settings().rpc_workers] == ["127.0.0.1:1", endpoint]

    box.bind_edit.setText("0.0.0.0")
    assert "Never expose the RPC server to an open network" in box.message.text()


def test_plan_puts_the_profiles_workers_first(qtbot, ctx, demo_model):
    from llm_tuner.core.devices import DeviceInventory, LlamaDevice
    from llm_tuner.core.profile import LaunchProfile
    from llm_tuner.services.rpc import WorkerSpec
    from llm_tuner.ui.panels.plan_panel import PlanPanel

    workers = [ctx.workers.start(WorkerSpec(devices=("CPU",), threads=1)) for _ in range(2)]
    ctx.settings = Settings(rpc_workers=[RpcWorker(endpoint=w.endpoint) for w in workers])
    # a local GPU as --list-devices prints it first: without -dev llama.cpp still puts the RPC devices first
    ctx.state.set_inventory(DeviceInventory(llama_devices=(LlamaDevice(
        name="Vulkan0", description="planned GPU", memory_total_mib=8192, memory_free_mib=8000),)))
    panel = PlanPanel(ctx)
    qtbot.addWidget(panel)
    panel.show()
    ctx.state.set_profile(LaunchProfile(model=str(demo_model), ctx_size=2048))
    qtbot.waitUntil(lambda: panel.plan_state.model is not None, timeout=10_000)
    panel.use_workers_button.click()
    assert ctx.state.profile.rpc == tuple(w.endpoint for w in workers)
    qtbot.waitUntil(lambda: len(panel.plan_state.rpc_devices) == 2, timeout=30_000)
    plan = panel.recompute_now()
    names = [d.name for d in plan.devices if d.name != "Host"]
    assert names == ["RPC0", "RPC1", "Vulkan0"]
    assert all(plan.device(n).model_mib > 0 for n in names)
    assert panel.split_bar.isVisible()
    assert f"RPC1 is the worker {workers[1].endpoint}" in panel.devices_label.text()
    assert panel.plan_state.check_argv()[:2] == flags.argv_for("rpc", ",".join(w.endpoint for w in workers))


def test_plan_and_advice_agree_on_cpu_workers(qtbot, ctx, demo_model):
    """Issue 22 item 9: on a machine without a GPU, -ngl 99 with two CPU workers puts the layers on RPC0/RPC1:
    the Plan names those devices (not "GPUs") and the advice does not say the layers stay on the CPU."""
    from llm_tuner.core.devices import DeviceInventory
    from llm_tuner.core.profile import LaunchProfile
    from llm_tuner.services.rpc import WorkerSpec
    from llm_tuner.ui.panels.plan_panel import PlanPanel
    from llm_tuner.ui.panels.profile_panel import ProfilePanel

    workers = [ctx.workers.start(WorkerSpec(devices=("CPU",), threads=1)) for _ in range(2)]
    ctx.state.set_inventory(DeviceInventory())  # no GPU here
    profile_panel = ProfilePanel(ctx)
    qtbot.addWidget(profile_panel)
    panel = PlanPanel(ctx)
    qtbot.addWidget(panel)
    panel.show()
    profile_panel.set_profile(LaunchProfile(model=str(demo_model), ctx_size=2048, gpu_layers=99,
                                            rpc=tuple(w.endpoint for w in workers)))
    qtbot.waitUntil(lambda: panel.plan_state.model is not None and len(panel.plan_state.rpc_devices) == 2, timeout=30_000)
    plan = panel.recompute_now()
    assert plan.n_gpu_layers > 0
    text = panel.summary_label.text()
    assert "GPUs" not in text and "layers offloaded (to RPC0, RPC1)" in text
    assert "no-gpu-for-layers" not in {a.id for a in profile_panel.advice}


def test_live_runs_over_two_workers_with_their_memory_and_an_agents_gpus(qtbot, ctx, tiny_model):
    """The issue's flow in the window: two local workers, `-dev RPC0,RPC1 -ts 1,1`, a request; Live shows each
    RPC device's memory with its endpoint and plots the GPUs an agent serves beside the local ones."""
    from llm_tuner.services.agent import AgentServer
    from llm_tuner.services.binaries import SERVER, probe
    from llm_tuner.services.rpc import WorkerSpec
    from llm_tuner.services.telemetry.sampler import GpuReader
    from llm_tuner.ui.panels.live_panel import LivePanel
    from tests.integration.test_rpc_workers import TINY_SPLIT, block_mib
    from tests.support.scripted_gpu import ScriptedNvml

    workers = [ctx.workers.start(WorkerSpec(devices=("CPU",), threads=1)) for _ in range(2)]
    agent = AgentServer("127.0.0.1", 0, readers={"gpu:nvidia": GpuReader(ScriptedNvml(1), "nvidia",
                                                                         labels={"nvidia:0": "CUDA0"})}).start()
    try:
        ctx.settings = Settings(rpc_workers=[RpcWorker(endpoint=workers[0].endpoint, agent_url=agent.url),
                                             RpcWorker(endpoint=workers[1].endpoint)])
        ctx.state.set_binaries({SERVER: probe(SERVER, with_devices=False)})
        panel = LivePanel(ctx)
        qtbot.addWidget(panel)
        panel.show()
        rpc = ",".join(w.endpoint for w in workers)
        panel.args_edit.setText(f"-m {tiny_model} -c 1024 -np 1 -t 2 --rpc {rpc} -dev RPC0,RPC1 -ts {TINY_SPLIT}")
        assert panel.start()
        qtbot.waitUntil(lambda: "ready" in panel.state_label.text(), timeout=90_000)
        panel.test_button.click()
        qtbot.waitUntil(lambda: panel.request_model.rowCount() == 1, timeout=60_000)
        gpu = f"{workers[0].endpoint} CUDA0"  # the worker's GPU, named by the worker
        qtbot.waitUntil(lambda: (gpu, "util_pct") in panel.device_plots.curves, timeout=10_000)
        qtbot.waitUntil(lambda: any(s.device.startswith("RPC1 (") for s in panel.memory_bars.last), timeout=10_000)
        rpc_bars = {s.device: s for s in panel.memory_bars.last if s.device.startswith("RPC")}
        assert set(rpc_bars) == {f"RPC0 ({workers[0].endpoint})", f"RPC1 ({workers[1].endpoint})"}
        assert all(s.weights_mib >= 0.99 * block_mib(tiny_model) and s.kv_mib > 0 for s in rpc_bars.values()), rpc_bars
        panel.stop_button.click()
        qtbot.waitUntil(lambda: "exited" in panel.state_label.text(), timeout=30_000)
    finally:
        agent.stop()


def test_the_profile_editor_has_the_rpc_field_and_checks_each_address(qtbot, ctx):
    from llm_tuner.ui.panels.profile_panel import ProfilePanel

    panel = ProfilePanel(ctx)
    qtbot.addWidget(panel)
    panel.show()
    edit = panel.editors["rpc"].widget
    qtbot.keyClicks(edit, "10.0.0.2:50052,10.0.0.3")
    assert "not a worker address" in panel.error_label.text()
    qtbot.keyClicks(edit, ":50052")
    assert ctx.state.profile.rpc == ("10.0.0.2:50052", "10.0.0.3:50052")
    words = panel.preview.toPlainText().replace("\\\n", " ").split()
    assert words[words.index(flags.spelling("rpc")) + 1] == "10.0.0.2:50052,10.0.0.3:50052"
    assert {"rpc-network", "rpc-ubatch", "rpc-worker-cache"} <= {a.id for a in panel.advice}
