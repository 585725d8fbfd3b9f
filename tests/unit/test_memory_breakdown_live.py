"""Live memory by owner: the server's own parts (recorded real log) stacked with telemetry totals."""

from __future__ import annotations

from pathlib import Path

from llm_tuner.services.logparse import BufferSize, MemoryBreakdown, MemoryRow, parse_lines
from llm_tuner.services.telemetry.breakdown import app_device_name, gpu_segments, server_parts

LOGS = Path(__file__).parents[1] / "data" / "logs"


def test_parts_from_the_recorded_jsonl_breakdown_and_lv4_buffers():
    evs = parse_lines((LOGS / "jsonl_default.log").read_text().splitlines())
    mb = next(e for e in evs if isinstance(e, MemoryBreakdown))
    assert server_parts(mb)["host"] == {"weights": 234.0, "kv": 18.0, "compute": 20.0}  # Host + CPU_REPACK
    bufs = [e for e in parse_lines((LOGS / "plain_lv4.log").read_text().splitlines()) if isinstance(e, BufferSize)]
    parts = server_parts(None, bufs)["host"]
    assert round(parts["weights"], 2) == 247.82 and parts["kv"] == 18.0 and round(parts["compute"], 2) == 21.28


def test_gpu_stack_adds_up_to_capacity():
    mb = MemoryBreakdown((MemoryRow("device", "CUDA1", "H200", 143771, 1000, 140000, 120000, 18000, 2000, 2771),), "jsonl")
    parts = server_parts(mb)
    assert set(parts) == {"nvidia:1"}
    seg = gpu_segments("nvidia:1", parts["nvidia:1"], used_mib=141500, total_mib=143771, process_mib=140600,
                       reserved_mib=500)
    assert (seg.weights_mib, seg.kv_mib, seg.compute_mib) == (120000, 18000, 2000)
    assert seg.rest_of_process_mib == 600 and seg.other_processes_mib == 900 and seg.free_mib == 1771
    assert sum(v for _k, v in seg.stacked()) + 500 == 143771


def test_inventory_names_win_over_the_default_mapping():
    assert app_device_name("CUDA0") == "nvidia:0" and app_device_name("Host") == "host"
    assert app_device_name("Vulkan0", {"Vulkan0": "amd:1"}) == "amd:1"
