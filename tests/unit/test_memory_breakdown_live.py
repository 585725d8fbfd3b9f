"""Live memory by owner: the server's own parts (recorded real log) stacked with telemetry totals."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_tuner.services.logparse import BufferSize, MemoryBreakdown, MemoryRow, parse_lines
from llm_tuner.services.telemetry.breakdown import app_device_name, gpu_segments, live_segments, server_parts

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


def test_a_hybrid_models_recurrent_state_shows_in_the_live_kv_part():
    """The recorded qwen35 hybrid (tests/data/logs/README.md): KV 0.25 MiB + RS 0.79 MiB, read as the server
    session reads its log (LogParser events), stacked by the Live memory bars' function."""
    evs = parse_lines((LOGS / "hybrid_lv4.log").read_text().splitlines())
    bufs = [e for e in evs if isinstance(e, BufferSize)]
    assert [(b.kind, b.buffer, b.mib) for b in bufs if b.kind in ("kv", "rs")] == [("kv", "CPU", 0.25),
                                                                                   ("rs", "CPU", 0.79)]
    mb = next(e for e in evs if isinstance(e, MemoryBreakdown))
    latest = {"host": {"ram_used_mib": 20000.0, "ram_total_mib": 24000.0, "server_rss_mib": 200.0},
              "server": {"prompt_tokens_per_s": float("nan")}}
    (seg,) = live_segments(latest, breakdown=mb, buffers=bufs)
    assert seg.device == "host RAM"
    assert seg.kv_mib == pytest.approx(0.25 + 0.79)
    assert dict(seg.stacked())["KV cache"] == pytest.approx(1.04)
    # weights: the mapped file and the AMX repack buffer (host memory); compute + output
    assert seg.weights_mib == pytest.approx(24.0 + 39.04) and seg.compute_mib == pytest.approx(9.02 + 0.12)
    assert seg.rest_of_process_mib == pytest.approx(200.0 - 24.0 - 39.04 - 1.04 - 9.14)
    # from the breakdown table alone (no -lv 4 lines) the KV part is its "context" column, RS included
    (from_table,) = live_segments(latest, breakdown=mb, buffers=None)
    assert from_table.kv_mib == 1 and from_table.weights_mib == 39 + 24


def test_live_shows_gpus_and_not_the_host_when_there_are_gpus():
    mb = MemoryBreakdown((MemoryRow("device", "CUDA0", "H200", 143771, 1000, 140000, 120000, 18000, 2000, 2771),
                          MemoryRow("host", "Host", None, None, None, 300, 250, 0, 50)), "jsonl")
    latest = {"host": {"ram_used_mib": 1.0}, "nvidia:0": {"vram_used_mib": 141500.0, "vram_total_mib": 143771.0},
              "nvidia:1": None}
    (seg,) = live_segments(latest, breakdown=mb, buffers=None)
    assert (seg.device, seg.weights_mib, seg.kv_mib) == ("nvidia:0", 120000, 18000)
