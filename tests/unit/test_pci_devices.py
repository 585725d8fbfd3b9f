"""One physical GPU under two backends (CUDA0 and Vulkan0 of one H200) is one GPU: by its PCI address.

Recorded on the lent H200 with a CUDA+Vulkan build (tests/data/logs/README.md, "One H200 under CUDA and
Vulkan"): `--list-devices` (no PCI address), a load without `-dev` (llama.cpp skips Vulkan0: same id as CUDA0)
and one with `-dev CUDA0,Vulkan0 -ts 40,60`. NVML's side is what that card reported (bus id 00000000:00:06.0).
"""

from __future__ import annotations

import os
from pathlib import Path

from llm_tuner.cli.system import devices_text
from llm_tuner.core.devices import (
    DeviceInventory,
    GpuInfo,
    LlamaDevice,
    map_llama_devices,
    normalize_pci,
    parse_device_line,
    parse_list_devices,
    pci_ids_from_log,
    with_pci_ids,
)
from llm_tuner.core.memory import PlanDevice, parse_server_args, plan_gpus, plan_memory
from llm_tuner.core.memory.constants import SHARED_POOL_EXTRA_MIB
from llm_tuner.core.memory_log import parse_memory_log
from llm_tuner.services import device_ids, logparse
from llm_tuner.services.telemetry.breakdown import live_segments
from tests.unit.test_memory import make_model

LOGS = Path(__file__).parents[1] / "data" / "logs"
LIST = (LOGS / "h200-vulkan-list-devices.txt").read_text()
NODEV = (LOGS / "h200-vulkan-nodev.log").read_text()
BOTH = (LOGS / "h200-vulkan-both-ts40-60.log").read_text()
PCI = "0000:00:06.0"


def _h200(index: int = 0, bus: str = "00000000:00:06.0") -> GpuInfo:
    """What NVML said of the lent card (telemetry.nvml.nvidia_gpus)."""
    return GpuInfo(name=f"nvidia:{index}", backend="CUDA", vendor="nvidia", index=index, model="NVIDIA H200",
                   pci_bus_id=bus, memory_total_mib=143771, memory_free_mib=143155)


def _inventory(ids: dict[str, str] | None) -> DeviceInventory:
    llama = with_pci_ids(parse_list_devices(LIST), ids)
    return DeviceInventory(devices=tuple(map_llama_devices([_h200()], llama)), llama_devices=tuple(llama))


# -- the parser ---------------------------------------------------------------------------------------

def test_pci_addresses_are_spelled_one_way():
    assert normalize_pci("00000000:00:06.0") == PCI  # NVML: 8-digit domain
    assert normalize_pci("0000:0A:00.0") == "0000:0a:00.0"  # lower case
    assert normalize_pci("03:00.0") == "0000:03:00.0"  # no domain
    assert normalize_pci("unknown id") is None and normalize_pci(None) is None


def test_the_recorded_using_and_skipping_lines_give_each_device_its_card():
    skip = next(ln for ln in NODEV.splitlines() if "skipping device" in ln)
    d = parse_device_line(skip)
    assert (d.name, d.description, d.pci_bus_id, d.same_as) == ("Vulkan0", "NVIDIA H200", PCI, "CUDA0")
    using = parse_device_line("llama_model_load_from_file_impl: using device CUDA0 (NVIDIA H200) (0000:00:06.0) - "
                              "142105 MiB free")
    assert (using.name, using.pci_bus_id, using.free_mib) == ("CUDA0", PCI, 142105)
    rpc = parse_device_line("I llama_prepare_model_devices: using device RPC0 (127.0.0.1:50052) (unknown id) - "
                            "141988 MiB free")
    assert rpc.name == "RPC0" and rpc.pci_bus_id is None
    assert pci_ids_from_log(NODEV) == {"CUDA0": PCI, "Vulkan0": PCI}
    assert pci_ids_from_log(BOTH) == {"CUDA0": PCI, "Vulkan0": PCI}


def test_the_live_log_parser_hands_out_the_device_lines():
    events = [ev for ev in logparse.parse_lines(NODEV.splitlines()) if isinstance(ev, logparse.DeviceIdLine)]
    assert [(e.name, e.pci_bus_id, e.same_as) for e in events] == [("Vulkan0", PCI, "CUDA0"), ("CUDA0", PCI, None)]


# -- mapping to physical GPUs ---------------------------------------------------------------------------

def test_the_recorded_h200_lists_vulkan0_as_the_same_card_as_cuda0():
    (card,) = _inventory(pci_ids_from_log(NODEV)).devices
    assert card.llama_names == ("CUDA0", "Vulkan0") and card.guessed_names == ()
    assert card.label == "CUDA0 + Vulkan0" and card.pool == PCI
    assert card.public_dict()["pci_bus_id"] == PCI


def test_without_an_address_the_name_and_memory_match_is_marked_a_guess():
    (card,) = _inventory(None).devices
    assert card.llama_names == ("CUDA0", "Vulkan0")
    assert card.guessed_names == ("Vulkan0",)  # CUDA0 is by CUDA index order (PCI bus order), not a guess


def test_pci_wins_over_a_name_and_memory_match_with_another_card():
    # Two identical H200s; llama.cpp's Vulkan0 is the SECOND card (Vulkan enumerates in its own order). By name
    # and memory it would be taken for the first card; its PCI address says otherwise.
    gpus = [_h200(0, "00000000:00:06.0"), _h200(1, "00000000:00:07.0")]
    llama = [LlamaDevice(name="CUDA0", description="NVIDIA H200", memory_total_mib=143155, memory_free_mib=1),
             LlamaDevice(name="CUDA1", description="NVIDIA H200", memory_total_mib=143155, memory_free_mib=1),
             LlamaDevice(name="Vulkan0", description="NVIDIA H200", memory_total_mib=143771, memory_free_mib=1),
             LlamaDevice(name="Vulkan1", description="NVIDIA H200", memory_total_mib=143771, memory_free_mib=1)]
    ids = {"CUDA0": "0000:00:06.0", "CUDA1": "0000:00:07.0", "Vulkan0": "0000:00:07.0", "Vulkan1": "0000:00:06.0"}
    by_bus = {g.pool: g for g in map_llama_devices(gpus, with_pci_ids(llama, ids))}
    assert by_bus["0000:00:06.0"].llama_names == ("CUDA0", "Vulkan1")
    assert by_bus["0000:00:07.0"].llama_names == ("CUDA1", "Vulkan0")
    assert all(g.guessed_names == () for g in by_bus.values())
    guessed = {g.pool: g for g in map_llama_devices(gpus, llama)}  # no addresses: the guess takes card one
    assert guessed["0000:00:06.0"].llama_names == ("CUDA0", "Vulkan0")
    assert guessed["0000:00:06.0"].guessed_names == ("Vulkan0",)


def test_llm_tuner_devices_says_one_card_and_marks_guesses():
    data = _inventory(pci_ids_from_log(NODEV)).to_json()
    (dev,) = data["devices"]
    assert dev["llama_names"] == ["CUDA0", "Vulkan0"] and dev["guessed_names"] == [] and dev["pci_bus_id"] == PCI
    lines = devices_text({**data, "host": {"cpu_model": "x", "cores_physical": 1, "cores_logical": 2,
                                           "memory_total_mib": 1, "memory_available_mib": 1}})
    assert lines[1].startswith("CUDA0 = Vulkan0, one card: NVIDIA H200 · 143771 MiB")
    assert lines[1].endswith(PCI)
    guess = devices_text({**_inventory(None).to_json(), "host": {"cpu_model": "x", "cores_physical": 1,
                                                                "cores_logical": 2, "memory_total_mib": 1,
                                                                "memory_available_mib": 1}})
    assert "Vulkan0: matched by model name and memory only (a guess" in guess[1]


# -- the learned addresses are kept per binary ---------------------------------------------------------

def test_addresses_from_a_server_log_are_kept_per_binary_until_it_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_TUNER_DATA_DIR", str(tmp_path / "data"))
    binary = tmp_path / "llama-server"
    binary.write_text("v1")
    assert device_ids.cached_ids(binary) == {}
    assert device_ids.remember_from_log(binary, NODEV) == {"CUDA0": PCI, "Vulkan0": PCI}
    assert device_ids.cached_ids(binary) == {"CUDA0": PCI, "Vulkan0": PCI}
    llama = parse_list_devices(LIST)
    assert device_ids.needs_learning(llama, n_physical=1)  # two GPU devices, one card, no address
    assert not device_ids.needs_learning(with_pci_ids(llama, device_ids.cached_ids(binary)), n_physical=1)
    assert not device_ids.needs_learning(llama, n_physical=2)
    binary.write_text("v2, rebuilt")
    os.utime(binary, ns=(1, 1))
    assert device_ids.cached_ids(binary) == {}  # another build: learned again


# -- the plan ------------------------------------------------------------------------------------------

def _plan(argv: str, free_mib: int, ids: dict[str, str] | None = None):
    inv = _inventory(pci_ids_from_log(NODEV) if ids is None else ids)
    gpus = [PlanDevice(g.name, g.backend, g.capacity_mib, free_mib, g.description, free_includes_runtime=True,
                       pool=g.pool) for g in plan_gpus(inv)]
    model = make_model(n_layer=16, n_embd=2048, n_ff=8192, wtype="Q8_0")
    return plan_memory(model, parse_server_args(argv), gpus, PlanDevice("Host", "CPU", 65536, 60000))


def test_without_dev_the_plan_skips_the_second_backend_of_one_card_as_llama_cpp_does():
    plan = _plan("-m x.gguf -c 4096 -ngl 99", 142612)
    assert [d.name for d in plan.devices] == ["CUDA0", "Host"]
    assert plan.pools == ()


def test_with_both_backends_of_one_card_the_fit_is_one_pool():
    model_alone = _plan("-m x.gguf -c 4096 -ngl 99 -dev CUDA0,Vulkan0 -ts 40,60", 142612)
    assert [d.name for d in model_alone.devices] == ["CUDA0", "Vulkan0", "Host"]
    (pool,) = model_alone.pools
    cuda, vulkan = model_alone.devices[:2]
    buffers = cuda.resident_mib - cuda.overhead_mib + vulkan.resident_mib - vulkan.overhead_mib
    assert pool.names == ("CUDA0", "Vulkan0")
    assert pool.used_mib == buffers + max(cuda.overhead_mib, vulkan.overhead_mib) + SHARED_POOL_EXTRA_MIB  # one runtime
    assert pool.fits and model_alone.fits
    assert any(w.startswith("CUDA0 + Vulkan0 share one NVIDIA H200: ") for w in model_alone.warnings)
    # Free memory where each device's share fits alone but not both together: the card is short.
    tight = int(max(cuda.resident_mib - cuda.overhead_mib, vulkan.resident_mib - vulkan.overhead_mib) + 100)
    short = _plan("-m x.gguf -c 4096 -ngl 99 -dev CUDA0,Vulkan0 -ts 40,60 -fit off", tight)
    assert all(d.fits for d in short.devices if d.name != "Host")
    assert short.pools[0].fits is False and short.fits is False
    assert any("MiB short)" in w and "share one NVIDIA H200" in w for w in short.warnings)


# -- Live ----------------------------------------------------------------------------------------------

def test_live_shows_one_stack_per_card_with_both_backends_buffers():
    inv = _inventory(pci_ids_from_log(BOTH))
    buffers = parse_memory_log(BOTH).buffers
    latest = {"CUDA0": {"vram_used_mib": 4000.0, "vram_total_mib": 143771.0, "process_vram_mib": 3300.0,
                        "vram_reserved_mib": 615.0}}
    (seg,) = live_segments(latest, breakdown=None, buffers=buffers, inventory=inv)
    assert seg.device == "CUDA0 + Vulkan0"
    assert abs(seg.weights_mib - (257.51 + 411.79)) < 0.01  # the model buffers of both backends
    assert abs(seg.kv_mib - (80.0 + 112.0)) < 0.01
    assert abs(seg.rest_of_process_mib - (3300.0 - seg.weights_mib - seg.kv_mib - seg.compute_mib)) < 0.01


def test_the_breakdowns_unaccounted_is_per_card():
    tables = [ev for ev in logparse.parse_lines(BOTH.splitlines()) if isinstance(ev, logparse.MemoryBreakdown)]
    last = tables[-1]  # the table at exit (the first is the fit step's, before the model was loaded)
    per_device = {r.name: r.unaccounted_mib for r in last.rows if r.kind == "device"}
    assert per_device == {"CUDA0": 1273, "Vulkan0": 1741}  # each counts the other's buffers
    (card,) = last.pooled(pci_ids_from_log(BOTH).get)
    assert card.devices == ("CUDA0", "Vulkan0")
    assert card.unaccounted_mib == 143155 - 141432 - (450 + 596) == 677


def test_device_plots_name_one_card_with_all_its_names(qtbot):
    import time

    from llm_tuner.services.telemetry.ring import SeriesRing
    from llm_tuner.ui.panels.live_devices import DevicesView

    view = DevicesView()  # the Live panel's Devices tab
    qtbot.addWidget(view)
    plots = view.device_plots
    ring = SeriesRing(("util_pct", "vram_used_mib", "temp_c", "power_w", "sm_clock_mhz", "mem_clock_mhz",
                       "throttled"), capacity=10)
    now = time.time()
    ring.append(now, {"util_pct": 5, "vram_used_mib": 100, "temp_c": 40})
    plots.refresh({"CUDA0": ring}, now=now, force=True)
    view.set_inventory(_inventory(pci_ids_from_log(NODEV)))  # the probe's inventory arrives
    plots.refresh({"CUDA0": ring}, now=now, force=True)
    names = {c.name() for c in plots.curves.values()}
    assert "CUDA0 + Vulkan0" in names and "CUDA0" not in names
    assert len(plots.plots["Utilisation"].listDataItems()) == 1  # one card: one curve, the old one removed


def test_a_launched_servers_log_teaches_the_inventory_its_cards(tmp_path, monkeypatch):
    # The Live launch path: ServerSession reads each log line through the one parser and keeps the addresses
    # for its binary, so the next inventory knows Vulkan0 is CUDA0's card without a learning run.
    from llm_tuner.services.launch import plan_launch
    from llm_tuner.services.server import ServerSession

    monkeypatch.setenv("LLM_TUNER_DATA_DIR", str(tmp_path / "data"))
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\n")
    session = ServerSession(plan_launch(binary, ["-m", "x.gguf"], watch=False), lambda ev: None)
    for line in NODEV.splitlines():
        session._on_line(line)
    assert device_ids.cached_ids(binary) == {"CUDA0": PCI, "Vulkan0": PCI}


def test_llm_tuner_run_reports_the_unaccounted_memory_per_card():
    from llm_tuner.cli.run import _event_json

    table = [ev for ev in logparse.parse_lines(BOTH.splitlines()) if isinstance(ev, logparse.MemoryBreakdown)][-1]
    event = _event_json(table, pci_ids_from_log(BOTH))
    assert event["event"] == "memory"
    assert event["pools"] == [{"devices": ["CUDA0", "Vulkan0"], "total_mib": 143155, "free_mib": 141432,
                               "self_mib": 1046, "unaccounted_mib": 677}]
    unknown = _event_json(table, {})  # no addresses known: each device is its own card
    assert [p["devices"] for p in unknown["pools"]] == [["CUDA0"], ["Vulkan0"]]


def test_a_card_listed_twice_is_learned_once_with_a_model_load(tmp_path, monkeypatch):
    # No CUDA+Vulkan build can run here: a script stands in for it, answering --list-devices and a model load
    # with what the real build printed on the H200; the learning run, the cache and the mapping are the app's.
    from llm_tuner.services.telemetry import amd, inventory, nvml

    monkeypatch.setenv("LLM_TUNER_DATA_DIR", str(tmp_path / "data"))
    for mod in (nvml, inventory):
        monkeypatch.setattr(mod, "nvidia_gpus", lambda: ([_h200()], None))
    for mod in (amd, inventory):
        monkeypatch.setattr(mod, "amd_gpus", lambda: ([], None))
    loads = tmp_path / "loads"
    binary = tmp_path / "llama-server"
    binary.write_text(f"""#!/bin/sh
case "$*" in *--list-devices*) cat '{LOGS / "h200-vulkan-list-devices.txt"}'; exit 0;; esac
echo load >> '{loads}'
cat '{LOGS / "h200-vulkan-nodev.log"}'
echo '0.00.900.000 I srv  llama_server: listening on http://127.0.0.1:8080'
exec sleep 30
""")
    binary.chmod(0o755)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    (card,) = inventory.inventory_for(binary, learn_with=model).devices
    assert card.llama_names == ("CUDA0", "Vulkan0") and card.guessed_names == () and card.pool == PCI
    assert inventory.inventory_for(binary, learn_with=model).devices == (card,)
    assert loads.read_text().count("load") == 1  # the second inventory came from the cache
