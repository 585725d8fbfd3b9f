"""core.memory_check: the plan beside a recorded real llama-server -lv 4 run, and the compute calibration."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_tuner.core.memory import PlanDevice, parse_server_args, plan_memory
from llm_tuner.core.memory_check import calibrate, check_json, compare, measured_parts
from llm_tuner.core.memory_log import parse_memory_log

DATA = Path(__file__).parents[1] / "data"
HOST = PlanDevice("Host", "CPU", None)
# the recorded run's CPU (AVX2: Q4_K rows repacked into CPU_REPACK), so the plan has the same buffers
FLAGS = ("avx", "avx2", "fma", "f16c")


@pytest.fixture
def demo_plan_and_log(demo_model):
    from llm_tuner.services.library import read_model

    # tests/data/memory/README.md: `llama-server -m gemma-3-270m-q4_k_m.gguf -fit off -t 2 -lv 4`
    log = parse_memory_log((DATA / "memory" / "llama-server-lv4-demo.log").read_text())
    args = parse_server_args(["-m", str(demo_model), "-fit", "off", "-t", "2"])
    model = read_model(demo_model)
    return model, args, log


def test_check_rows_and_calibration(demo_plan_and_log):
    model, args, log = demo_plan_and_log
    plan = plan_memory(model, args, [], HOST, cpu_flags=FLAGS)
    rows = {(r.device, r.label): r for r in compare(log, plan)}
    assert set(rows) == {("Host", "weights"), ("Host", "KV cache"), ("Host", "compute"), ("Host", "output")}
    assert rows[("Host", "KV cache")].measured_mib == 133.5
    assert rows[("Host", "KV cache")].diff_text() == "0.0 MiB (0.0%)"  # exact, and never "-0.0"
    assert rows[("Host", "compute")].measured_mib == pytest.approx(52.78)
    cal = calibrate(plan, rows.values())
    again = plan_memory(model, args, [], HOST, cpu_flags=FLAGS, calibration=cal)
    assert again.device("Host").compute_mib == pytest.approx(52.78, rel=0.001)
    # calibrating again from the calibrated plan keeps the ratio (the old one is divided out first)
    twice = calibrate(again, compare(log, again), cal)
    assert twice.compute_scale["CPU"] == pytest.approx(cal.compute_scale["CPU"], rel=1e-6)
    (entry,) = check_json(log, plan)
    assert entry["name"] == "Host" and entry["kv_mib"] == 133.5 and entry["diff_mib"]["kv_mib"] == 0.0


def test_a_buffer_on_a_device_the_plan_lacks_has_no_estimate(demo_plan_and_log):
    model, args, log = demo_plan_and_log
    plan = plan_memory(model, args, [], HOST, cpu_flags=FLAGS)
    log.buffers[0] = type(log.buffers[0])("model", "CUDA0", 100.0)
    row = next(r for r in compare(log, plan) if r.device == "CUDA0")
    assert row.estimate_mib is None and row.diff_text() == ""


def test_recurrent_state_counts_as_kv():
    # the recorded qwen35 hybrid (tests/data/memory/README.md): KV 8 MiB + RS 3.28 MiB in the main context,
    # KV 4 MiB in the MTP context
    log = parse_memory_log((DATA / "memory" / "llama-server-lv4-qwen35-mtp.log").read_text())
    assert measured_parts(log)[("Host", "kv")] == pytest.approx(8.0 + 3.28 + 4.0)
