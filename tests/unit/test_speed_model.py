"""The speed model (core.speed): bytes and FLOPs per token from a plan, the prediction and the calibration fit.

Real GGUF headers (random-weight Qwen3 dense and MoE, the demo model's Gemma 3) and the real memory plan; the
predictions are checked for what a user relies on: more bytes in host memory is slower, a smaller K/V type reads
fewer bytes, a calibration fitted from measurements reproduces them, an unknown device is said, never guessed.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

from llm_tuner.core.memory import PlanDevice, parse_server_args, place_tensors, plan_memory
from llm_tuner.core.speed import SpeedCalibration, gpus_of_plan, predict, traffic
from llm_tuner.core.speed.calibrate import FLOOR, Measurement, determined, fit, nnls, refine
from llm_tuner.core.speed.predict import (
    PROBE_ONLY_NOTE,
    PROBE_ONLY_SPLIT_ERROR,
    calibration_from_json,
    calibration_to_json,
    nearest_pairs,
    resolve_cost,
    terms,
)
from llm_tuner.services.library import read_model
from tests.support.random_gguf import write_qwen3_dense, write_qwen3_moe

HOST = PlanDevice("Host", "CPU", 65536, 60000)


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    p = write_qwen3_dense(tmp_path_factory.mktemp("sp") / "dense.gguf", n_layer=6, n_embd=256, n_ff=512)
    return read_model(p)


@pytest.fixture(scope="module")
def moe(tmp_path_factory):
    p = write_qwen3_moe(tmp_path_factory.mktemp("sp") / "moe.gguf", n_layer=4, n_embd=256, n_ff_exp=128,
                        n_expert=8, n_expert_used=2)
    return read_model(p)


def _traffic(model, argv, gpus=()):
    plan = plan_memory(model, parse_server_args(["-m", "x", *argv]), list(gpus), HOST)
    return traffic(model, plan, list(gpus)), plan


def test_a_token_reads_every_block_weight_and_the_output_head_but_not_the_input_embedding(dense):
    t, _ = _traffic(dense, ["-c", "1024"])
    layers = sum(x.n_bytes for x in dense.tensors if x.name.startswith("blk."))
    head = sum(x.n_bytes for x in dense.tensors if x.name.startswith("output"))  # the head and its norm
    embd = next(x.n_bytes for x in dense.tensors if x.name == "token_embd.weight")
    host = t.device("Host")
    assert host.weight_bytes == pytest.approx(layers + head)
    assert host.weight_bytes < layers + head + embd


def test_moe_reads_only_the_used_share_of_its_experts(moe):
    t, _ = _traffic(moe, ["-c", "1024"])
    exps = sum(x.n_bytes for x in moe.tensors if "_exps" in x.name)
    rest = sum(x.n_bytes for x in moe.tensors if x.name.startswith("blk.") and "_exps" not in x.name)
    head = sum(x.n_bytes for x in moe.tensors if x.name.startswith("output"))
    assert t.device("Host").weight_bytes == pytest.approx(rest + head + exps * 2 / 8)


def test_kv_read_grows_with_depth_and_a_q8_0_cache_reads_about_half_of_f16(dense):
    f16, _ = _traffic(dense, ["-c", "4096"])
    q8, _ = _traffic(dense, ["-c", "4096", "-ctk", "q8_0", "-ctv", "q8_0"])
    h16, h8 = f16.device("Host"), q8.device("Host")
    assert h16.kv_bytes(0) == 0 and h16.kv_bytes(2048) == pytest.approx(2 * h16.kv_bytes(1024))
    assert h8.kv_bytes(2048) == pytest.approx(h16.kv_bytes(2048) * 34 / 64)  # q8_0: 34 bytes per 32 values
    assert f16.kv_pair == "f16/f16" and q8.kv_pair == "q8_0/q8_0"


def test_the_demo_models_sliding_window_layers_read_at_most_their_window(demo_model_header):
    t, _ = _traffic(demo_model_header, ["-c", "8192"])
    host = t.device("Host")
    assert host.swa_window == 512 and host.kv_swa_bytes_per_cell > 0
    swa_growth = host.kv_bytes(4096) - host.kv_bytes(2048)
    assert swa_growth == pytest.approx(host.kv_full_bytes_per_cell * 2048)  # only the full layers keep growing


def test_the_cpus_generation_attention_costs_per_kv_head_cell_whatever_the_head_shape(tmp_path):
    """The time depth adds to a CPU's token follows K/V heads x cells on five models of three head shapes
    (benchmarks/speed_model.py sessions 2-3), not attention FLOPs: 4 query heads of 128 over a K/V head cost what
    2 query heads of 64 do. Prompt attention stays per FLOP (compute-bound)."""
    small = read_model(write_qwen3_dense(tmp_path / "a.gguf", n_layer=4, n_embd=256, n_ff=512, n_head=4,
                                         n_head_kv=2, head_dim=64))
    wide = read_model(write_qwen3_dense(tmp_path / "b.gguf", n_layer=4, n_embd=256, n_ff=512, n_head=8,
                                        n_head_kv=2, head_dim=128))
    got = []
    for model in (small, wide):
        t, _ = _traffic(model, ["-c", "4096"])
        assert t.device("Host").kv_head_cells(2048) == 4 * 2 * 2048  # layers x K/V heads x cells
        gen, pre = terms(t, depth=2048, prompt_tokens=512)
        got.append((gen["attn_gen:Host:f16/f16"], pre["attn_prefill:Host:f16/f16"]))
    (gen_a, pre_a), (gen_b, pre_b) = got
    assert gen_a == pytest.approx(gen_b)
    assert pre_b == pytest.approx(4 * pre_a)  # twice the query heads, twice the head size


@pytest.fixture(scope="module")
def demo_model_header():
    from llm_tuner.services.demo_model import find_demo_model

    path = find_demo_model()
    if path is None:
        pytest.skip("demo model not assembled")
    return read_model(path)


def test_layers_on_a_gpu_move_their_bytes_off_the_host_and_make_generation_faster(dense):
    gpu = PlanDevice("CUDA0", "CUDA", 24576, 24000)
    cpu, _ = _traffic(dense, ["-c", "1024", "-ngl", "1"], [gpu])
    half, _ = _traffic(dense, ["-c", "1024", "-ngl", "5"], [gpu])
    total = cpu.device("Host").weight_bytes + cpu.device("CUDA0").weight_bytes
    assert half.device("Host").weight_bytes + half.device("CUDA0").weight_bytes == pytest.approx(total)
    assert half.device("CUDA0").weight_bytes > cpu.device("CUDA0").weight_bytes
    peaks = {"CUDA0": (1000.0, "published")}
    slow = predict(cpu, None, threads=8, peaks=peaks)
    fast = predict(half, None, threads=8, peaks=peaks)
    assert fast.gen_tps > slow.gen_tps
    assert "default" in fast.calibrated_on and fast.error >= 0.3  # uncalibrated: said, with a wider error


def test_a_split_placement_on_llama_bench_costs_alone_says_the_server_may_be_slower(dense):
    """On the lent H100 llama-server generated split placements 25-35 % slower than the llama-bench probe
    predicted (benchmarks/sessions/2026-12-07-gpu-speed): until a server run refines the costs, such a prediction
    says so and carries that error; K/V in host memory beside weights on the GPU (-nkvo) is split too. All on the
    GPU, or all on the host, is not affected."""
    gpu = PlanDevice("CUDA0", "CUDA", 24576, 24000)
    costs = {"read:Host@8": 1 / 50, "fixed:cpu@8": 0.002, "read:CUDA0": 1 / 2000, "fixed:gpu": 0.0017,
             "attn_gen:Host:f16/f16@8": 0.02, "attn_gen:CUDA0:f16/f16": 0.001, "compute:CUDA0": 1 / 40000,
             "compute:Host@8": 1 / 800, "link": 0.1, "pfixed:gpu": 0.005, "pfixed:cpu@8": 0.01,
             "attn_prefill:Host:f16/f16@8": 1 / 500}
    probe = SpeedCalibration(costs, threads=(8,), source="probe of a.gguf", error=0.05)
    split, _ = _traffic(dense, ["-c", "1024", "-ngl", "3"], [gpu])
    pr = predict(split, probe, threads=8)
    assert pr.error == pytest.approx(PROBE_ONLY_SPLIT_ERROR) and PROBE_ONLY_NOTE in pr.notes
    refined = predict(split, replace(probe, server_runs=2), threads=8)
    assert refined.error == pytest.approx(0.05) and PROBE_ONLY_NOTE not in refined.notes
    assert refined.gen_tps == pr.gen_tps  # the figure is the costs'; only what it claims changes
    for argv in (["-c", "1024", "-ngl", "99"], ["-c", "1024", "-ngl", "0"]):
        t, _ = _traffic(dense, argv, [gpu])
        assert predict(t, probe, threads=8).error == pytest.approx(0.05), argv
    nkvo, _ = _traffic(dense, ["-c", "1024", "-ngl", "99", "-nkvo"], [gpu])  # every weight on the GPU, K/V in host memory
    assert nkvo.device("Host").kv_full_bytes_per_cell > 0
    on_kvo = predict(nkvo, probe, threads=8)
    assert PROBE_ONLY_NOTE in on_kvo.notes and on_kvo.error == pytest.approx(PROBE_ONLY_SPLIT_ERROR)


def test_a_gpu_of_unknown_bandwidth_or_an_rpc_device_makes_the_prediction_unknown(dense):
    for name, backend in (("CUDA0", "CUDA"), ("RPC0", "RPC")):
        t, _ = _traffic(dense, ["-c", "1024", "-ngl", "99"], [PlanDevice(name, backend, 24576, 24000)])
        pr = predict(t, None, threads=4)
        assert pr.gen_tps is None and pr.unknown == (name,)
        assert "unknown" in pr.text()


def test_host_prefill_with_a_gpu_pays_the_copy_of_host_weights_per_ubatch(dense):
    gpu = PlanDevice("CUDA0", "CUDA", 24576, 24000)
    t, _ = _traffic(dense, ["-c", "1024", "-ngl", "2"], [gpu])
    assert t.host_copy_bytes > 0
    small, _ = _traffic(dense, ["-c", "1024", "-ngl", "2", "-ub", "16"], [gpu])
    assert small.host_copy_bytes == 0  # below GGML_OP_OFFLOAD_MIN_BATCH the CPU computes its own layers


def test_with_a_gpu_the_host_layers_prompt_attention_runs_on_the_gpu_and_their_kv_is_copied(dense):
    # ggml-backend's scheduler expands the offloaded Q/K/V matmuls' GPU to the attention (issue 42): the host's
    # attention costs no CPU time in a prompt batch, its K/V cells cross the link; with -nkvo it stays on the CPU
    gpu = PlanDevice("CUDA0", "CUDA", 24576, 24000)
    t, _ = _traffic(dense, ["-c", "4096", "-ngl", "2"], [gpu])
    assert t.host_attn_offloaded and t.device("Host").attn_full_flops_per_cell > 0
    _, pre = terms(t, depth=0, prompt_tokens=2048)
    _, deep = terms(t, depth=2048, prompt_tokens=2048)
    assert not any(k.startswith("attn_prefill:") for k in pre)
    assert deep["link"] > pre["link"] > t.host_copy_bytes / 1e9 / 512  # the K/V cells used so far, per ubatch
    assert deep["compute:CUDA0"] > pre["compute:CUDA0"]
    nkvo, _ = _traffic(dense, ["-c", "4096", "-ngl", "2", "-nkvo"], [gpu])
    assert not nkvo.host_attn_offloaded
    assert any(k.startswith("attn_prefill:Host") for k in terms(nkvo, depth=0, prompt_tokens=2048)[1])


def test_an_unprobed_quantized_kv_pair_takes_the_probed_pair_quantized_on_both_sides():
    probed = {"f16/f16", "f16/q8_0", "q8_0/f16", "q8_0/q8_0"}
    assert nearest_pairs("q4_0/q4_0", probed)[0] == "q8_0/q8_0"  # not the mixed f16/q8_0 (sorted first)
    assert nearest_pairs("f16/q4_0", probed)[0] == "f16/q8_0"
    assert nearest_pairs("bf16/bf16", probed) == ["f16/f16"]
    cal = SpeedCalibration({"attn_gen:Host:f16/q8_0@8": 0.04, "attn_gen:Host:q8_0/q8_0@8": 0.03}, threads=(8,))
    assert resolve_cost("attn_gen:Host:q4_0/q4_0", cal, 8, None) == (0.03, "as q8_0/q8_0 (calibrated)")


def test_flash_attention_off_is_said_to_rest_on_the_probes_on_with_a_wider_error(dense):
    """The probe measures attention with flash attention on; a command with it off is priced the same, and the
    prediction says so and widens its error (the tune does not prune on it)."""
    cal = SpeedCalibration({"read:Host@2": 0.05, "attn_gen:Host:f16/f16@2": 0.1, "fixed:cpu@2": 0.001,
                            "compute:Host@2": 0.01, "attn_prefill:Host:f16/f16@2": 0.01, "pfixed:cpu@2": 0.01},
                           threads=(2,), error=0.09, source="probe")
    on = predict(_traffic(dense, ["-c", "4096"])[0], cal, threads=2, depth=2048)
    off = predict(_traffic(dense, ["-c", "4096", "-fa", "off"])[0], cal, threads=2, depth=2048)
    assert on.error == 0.09 and not any("flash attention" in n for n in on.notes)
    assert off.error == pytest.approx(0.35) and any("flash attention off" in n for n in off.notes)
    assert off.gen_tps == pytest.approx(on.gen_tps, rel=0.01)  # priced as on (only its V layout differs)


def test_moe_fit_that_cannot_hold_even_the_dense_part_places_dense_only_layers_like_llama_cpp(moe):
    # common/fit.cpp step 3: with every expert in system memory and still no fit, it fills "dense-only" layers
    # back to front (their experts on the CPU) and leaves the others wholly on the CPU; never full layers with
    # their experts on a GPU that cannot hold even the dense part
    seen = {}
    for free in range(0, 256):  # MiB free: from nothing fits to every layer with some experts
        gpu = PlanDevice("CUDA0", "CUDA", 24576, free, free_includes_runtime=True)
        _, plan = _traffic(moe, ["-c", "1024", "-fitt", "0"], [gpu])
        changes = " ".join(plan.fit_changes)
        kind = ("dense-only" if "without their experts" in changes else
                "experts" if "experts of the first" in changes else "other")
        seen.setdefault(kind, plan)
    assert "dense-only" in seen and "experts" in seen
    plan = seen["dense-only"]
    gpu_layers = next(d.layers for d in plan.devices if d.name == "CUDA0")
    assert gpu_layers > 0
    assert all(p.device == "Host" for p in place_tensors(moe, plan.args, gpus_of_plan(plan)) if "_exps" in p.name)


def _synthetic(model_set, costs: dict[str, float]) -> list[Measurement]:
    """Measurements made by the model itself with known costs (what the fit must recover)."""
    cal = SpeedCalibration(costs, threads=(2, 8))
    out = []
    for t in model_set:
        for threads in (2, 8):
            for depth in (0, 1024):
                pr = predict(t, cal, threads=threads, depth=depth, prompt_tokens=256)
                out.append(Measurement(t, threads, depth, 256, pr.gen_tps, pr.prefill_tps, f"{threads} {depth}"))
    return out


def test_the_fit_recovers_known_costs_and_reproduces_the_measurements(dense, moe):
    costs = {"read:Host@2": 1 / 10, "read:Host@8": 1 / 30, "fixed:cpu@2": 0.002, "fixed:cpu@8": 0.001,
             "attn_gen:Host:f16/f16@2": 1 / 3, "attn_gen:Host:f16/f16@8": 1 / 9,
             "compute:Host@2": 1 / 40, "compute:Host@8": 1 / 150, "attn_prefill:Host:f16/f16@2": 1 / 20,
             "attn_prefill:Host:f16/f16@8": 1 / 70, "pfixed:cpu@2": 0.02, "pfixed:cpu@8": 0.01}
    ts = [_traffic(dense, ["-c", "2048"])[0], _traffic(moe, ["-c", "2048"])[0]]
    ms = _synthetic(ts, costs)
    cal = fit(ms)
    for k, v in costs.items():
        assert cal.costs.get(k) == pytest.approx(v, rel=1e-3), k
    for m in ms:
        pr = predict(m.traffic, cal, threads=m.threads, depth=m.depth, prompt_tokens=256)
        assert pr.gen_tps == pytest.approx(m.gen_tps, rel=1e-6)
        assert pr.prefill_tps == pytest.approx(m.prefill_tps, rel=1e-6)
    # four threads were not measured: interpolated between 2 and 8, so between their speeds
    mid = predict(ts[0], cal, threads=4).gen_tps
    assert predict(ts[0], cal, threads=2).gen_tps < mid < predict(ts[0], cal, threads=8).gen_tps


def test_a_thread_count_between_two_measured_ones_is_predicted_between_their_speeds(dense):
    """Per-cost interpolation let a fixed cost that grows with threads and a read cost that falls sum to a speed
    above both ends (the lent machine's MoE: 932 t/s predicted at 8 threads, 837 at 16, 470 at 4; 581-699
    measured). The time per token is interpolated in 1/threads between the two measured counts (Amdahl's
    form: linear in rate put 8 of 16 threads 11-27 % below the server on the lent 16 cores)."""
    t, _ = _traffic(dense, ["-c", "2048"])
    gb = t.device("Host").weight_bytes / 1e9
    cal = SpeedCalibration({"read:Host@4": 0.002 / gb, "read:Host@16": 0.0002 / gb, "fixed:cpu@4": 0.0002,
                            "fixed:cpu@16": 0.001}, threads=(4, 16))
    at = {n: predict(t, cal, threads=n) for n in (4, 8, 16)}
    assert at[4].gen_tps < at[8].gen_tps < at[16].gen_tps
    # 1/8 lies two thirds of the way from 1/4 to 1/16: two thirds of the way in time per token
    ms = {n: 1 / at[n].gen_tps for n in at}
    assert ms[8] == pytest.approx(ms[4] + (ms[16] - ms[4]) * 2 / 3)
    assert at[8].gen_tps > at[4].gen_tps + (at[16].gen_tps - at[4].gen_tps) / 3  # above the chord of the rates
    host = next(d for d in at[8].devices if d.name == "Host")
    assert host.source == "interpolated from 4 and 16 threads"
    assert sum(at[8].shares().values()) == pytest.approx(1.0)
    assert host.gen_ms + at[8].fixed_ms == pytest.approx(1000 / at[8].gen_tps)


def test_measurements_that_cannot_tell_the_costs_apart_are_not_a_calibration(dense, moe):
    """One configuration measured again and again gives one equation for generation's three costs: a fit would
    put the whole time on whichever cost it likes (seen: a run of the demo model "explained" by attention alone,
    read and compute 0, claimed ±5 %, and a model at an empty cache then had no generation time at all)."""
    costs = {"read:Host@2": 1 / 10, "fixed:cpu@2": 0.002, "attn_gen:Host:f16/f16@2": 1 / 3,
             "compute:Host@2": 1 / 40, "attn_prefill:Host:f16/f16@2": 1 / 20, "pfixed:cpu@2": 0.02}
    t = _traffic(dense, ["-c", "2048"])[0]
    pr = predict(t, SpeedCalibration(costs, threads=(2,)), threads=2, depth=0, prompt_tokens=128)
    same = [Measurement(t, 2, 0, 128, pr.gen_tps, pr.prefill_tps, f"run {i} prompt 128") for i in range(12)]
    ok, short = determined(same)
    assert not ok and "generation 1 of" in short and "prefill" in short
    full = _synthetic([_traffic(dense, ["-c", "2048"])[0], _traffic(moe, ["-c", "2048"])[0]],
                      {**costs, "read:Host@8": 1 / 30, "fixed:cpu@8": 0.001, "attn_gen:Host:f16/f16@8": 1 / 9,
                       "compute:Host@8": 1 / 150, "attn_prefill:Host:f16/f16@8": 1 / 70, "pfixed:cpu@8": 0.01})
    assert determined(full) == (True, "")


PRIOR = {"read:Host@2": 1 / 10, "fixed:cpu@2": 0.002, "attn_gen:Host:f16/f16@2": 1 / 3,
         "compute:Host@2": 1 / 40, "attn_prefill:Host:f16/f16@2": 1 / 20, "pfixed:cpu@2": 0.02}


def test_one_run_after_a_probe_refines_the_calibration_mostly_in_its_read_rate(dense):
    """A probe's calibration, then one benchmark run (one configuration: one equation each for generation and
    prefill) on a machine whose memory reads 25 % slower than the probe saw: the refined calibration meets the
    run within 1 % (PRIOR_WEIGHT keeps a little of the probe: a run is one start, with its noise), the read rate
    takes most of the change (reading weights is most of a token here), and a cost the run does not involve is
    left as it was."""
    slow = {**PRIOR, "read:Host@2": 1 / 2}  # 2 GB/s: reading the weights is three quarters of a token
    prior = SpeedCalibration({**slow, "read:Host@8": 1 / 30}, threads=(2, 8), source="probe of a.gguf")
    truth = SpeedCalibration({**slow, "read:Host@2": 1.25 / 2}, threads=(2,))
    t = _traffic(dense, ["-c", "2048"])[0]
    pr = predict(t, truth, threads=2, depth=0, prompt_tokens=128)
    run = [Measurement(t, 2, 0, 128, pr.gen_tps, pr.prefill_tps, "run 1 prompt 128")]
    assert not determined(run)[0]
    cal, keys = refine(prior, run, source="probe of a.gguf + 1 stored run")
    again = predict(t, cal, threads=2, depth=0, prompt_tokens=128)
    assert again.gen_tps == pytest.approx(pr.gen_tps, rel=0.01)
    assert again.prefill_tps == pytest.approx(pr.prefill_tps, rel=0.01)
    change = {k: cal.costs[k] / prior.costs[k] - 1 for k in keys}
    assert max(change, key=lambda k: abs(change[k])) == "read:Host@2" and change["read:Host@2"] > 0.1
    assert cal.costs["read:Host@8"] == prior.costs["read:Host@8"]
    assert cal.source == "probe of a.gguf + 1 stored run" and cal.threads == (2, 8)
    # refining again on the same run changes little: the refined calibration nearly explains it
    twice, _ = refine(cal, run)
    assert all(twice.costs[k] == pytest.approx(cal.costs[k], rel=0.01) for k in cal.costs)


def test_a_cost_the_probe_measured_as_zero_stays_zero_and_the_others_take_the_run(dense):
    """Seen on the lent H100 (benchmarks/sessions/2026-12-07-gpu-speed): the probe fitted the GPU's read cost to 0
    (its fixed cost explained those cells). A server run 25 % slower than predicted refined nothing, because the
    zero cost stopped the whole generation system; now the zero stays and the other costs meet the run."""
    prior = SpeedCalibration({**PRIOR, "fixed:cpu@2": 0.0}, threads=(2,), source="probe of a.gguf")
    t = _traffic(dense, ["-c", "2048"])[0]
    before = predict(t, prior, threads=2, depth=0, prompt_tokens=128)
    measured = before.gen_tps / 1.25
    cal, keys = refine(prior, [Measurement(t, 2, 0, 128, measured, None, "run 1 prompt 128 gen")])
    assert "read:Host@2" in keys and cal.costs["fixed:cpu@2"] == 0.0
    assert predict(t, cal, threads=2, depth=0, prompt_tokens=128).gen_tps == pytest.approx(measured, rel=0.01)


def test_a_zero_cost_that_the_runs_determine_alone_is_refined_from_its_default(dense, moe):
    """A probe's 0 stays where the runs cannot tell it apart, but where they determine it alone it is refined
    (from its default: a zero has no scale of its own), so no cost measured as 0 is frozen for good."""
    costs = {**PRIOR, "read:Host@8": 1 / 30, "fixed:cpu@8": 0.001, "attn_gen:Host:f16/f16@8": 1 / 9,
             "compute:Host@8": 1 / 150, "attn_prefill:Host:f16/f16@8": 1 / 70, "pfixed:cpu@8": 0.01}
    ms = _synthetic([_traffic(dense, ["-c", "2048"])[0], _traffic(moe, ["-c", "2048"])[0]], costs)
    prior = SpeedCalibration({**costs, "fixed:cpu@2": 0.0}, threads=(2, 8))
    cal, keys = refine(prior, ms)
    assert "fixed:cpu@2" in keys and cal.costs["fixed:cpu@2"] > 0


def test_a_run_much_faster_than_the_prior_keeps_every_cost_positive_and_is_reproduced(dense):
    """Seen with the real server: a tiny model's prefill 5.7x faster than the prior said. The smallest change
    would take the per-ubatch cost below zero; it is held at FLOOR of its prior and the others give instead."""
    prior = SpeedCalibration({**PRIOR, "pfixed:cpu@2": 1.0}, threads=(2,))  # the per-ubatch cost: most of it
    t = _traffic(dense, ["-c", "2048"])[0]
    pr = predict(t, SpeedCalibration(PRIOR, threads=(2,)), threads=2, depth=0, prompt_tokens=128)
    slow = predict(t, prior, threads=2, depth=0, prompt_tokens=128)
    assert pr.prefill_tps > 3 * slow.prefill_tps
    cal, keys = refine(prior, [Measurement(t, 2, 0, 128, pr.gen_tps, pr.prefill_tps, "run 1")])
    assert cal.costs["pfixed:cpu@2"] == pytest.approx(FLOOR * 1.0)
    assert all(cal.costs[k] >= FLOOR * prior.costs[k] * (1 - 1e-9) for k in keys)
    assert predict(t, cal, threads=2, depth=0, prompt_tokens=128).prefill_tps == pytest.approx(pr.prefill_tps,
                                                                                               rel=0.01)


def test_a_run_refines_no_default_it_cannot_determine_alone(dense):
    """Without a calibration every prior is a default: one run determines none of its costs alone, so none is
    fitted (a default is never dressed up as measured)."""
    t = _traffic(dense, ["-c", "2048"])[0]
    pr = predict(t, SpeedCalibration(PRIOR, threads=(2,)), threads=2, depth=0, prompt_tokens=128)
    cal, keys = refine(SpeedCalibration(), [Measurement(t, 2, 0, 128, pr.gen_tps, pr.prefill_tps, "run 1")])
    assert keys == [] and cal.costs == {}


def test_measurements_that_determine_every_cost_refine_towards_the_fit(dense, moe):
    """Exact measurements of two models at two thread counts and depths, from a prior 0.6x or 1.5x off on every
    cost: the refined calibration meets every measurement within 3 % and the generation attention and compute
    costs within 5 % of the truth. The read and fixed costs of these tiny models are nearly interchangeable in
    their runs: there the prior weighs (PRIOR_WEIGHT) and a read cost may even end further from the truth than
    it started (1.5x -> 1.6x), as the price of not trading costs where real runs, with their noise, cannot tell
    them apart."""
    costs = {**PRIOR, "read:Host@8": 1 / 30, "fixed:cpu@8": 0.001, "attn_gen:Host:f16/f16@8": 1 / 9,
             "compute:Host@8": 1 / 150, "attn_prefill:Host:f16/f16@8": 1 / 70, "pfixed:cpu@8": 0.01}
    ms = _synthetic([_traffic(dense, ["-c", "2048"])[0], _traffic(moe, ["-c", "2048"])[0]], costs)
    prior = SpeedCalibration({k: v * (0.6 if i % 2 else 1.5) for i, (k, v) in enumerate(costs.items())},
                             threads=(2, 8))
    cal, keys = refine(prior, ms)
    assert sorted(keys) == sorted(costs)
    for k, v in costs.items():
        if k.startswith(("attn_gen", "compute")):
            assert cal.costs[k] == pytest.approx(v, rel=0.05), k
    for m in ms:
        got = predict(m.traffic, cal, threads=m.threads, depth=m.depth, prompt_tokens=m.prompt_tokens)
        assert got.gen_tps == pytest.approx(m.gen_tps, rel=0.03) and got.prefill_tps == pytest.approx(
            m.prefill_tps, rel=0.03)


def test_nnls_keeps_costs_non_negative():
    # y = 2a exactly from the first two; the third equation would pull b negative
    sol = nnls([{"a": 1.0}, {"a": 1.0, "b": 1.0}, {"b": 1.0}], [2.0, 2.0, 0.001])
    assert all(v >= 0 for v in sol.values())
    assert sol["a"] == pytest.approx(2.0, rel=0.05)


def test_a_calibration_survives_json_and_a_bad_record_is_refused():
    cal = SpeedCalibration({"read:Host@4": 0.05}, {"Host": 30.0}, "f:1 h:2 p:3", "580.1", "probe of a", 0.12, (4,),
                           server_runs=3)
    assert calibration_from_json(calibration_to_json(cal)) == cal
    before = {k: v for k, v in calibration_to_json(cal).items() if k != "server_runs"}  # stored before the field
    assert calibration_from_json(before).server_runs == 0
    with pytest.raises(ValueError):
        calibration_from_json({**calibration_to_json(cal), "costs": {"read:Host@4": "fast"}})
    old = {k: v for k, v in calibration_to_json(cal).items() if k != "model"}  # stored before versions
    with pytest.raises(ValueError, match="model version 1"):  # its costs meant other terms: not read
        calibration_from_json(old)


ROOT = Path(__file__).resolve().parents[2] / "llm_tuner"


# Modules that may name the experts a token uses for another reason than bytes per token: reading the header,
# the compute buffers' size, and showing it to the user.
EXPERT_SHARE_ALLOWED = {"core/memory/model_view.py": "builds the model view from the header",
                        "core/memory/sizing.py": "compute buffers (activations of the used experts)",
                        "state/models.py": "the Models view's details: 'k of n experts'", "cli/models.py": "prints it",
                        "cli/model_json.py": "a key of the model JSON",
                        "qt/model_table.py": "the Models table's column"}
EXPERT_NAMES = {"expert_used_count", "n_expert_used"}


def expert_share_offenders(sources: dict[str, str]) -> list[str]:
    out = []
    for rel, text in sources.items():
        if rel.startswith(("core/speed/", "core/gguf_info/")) or rel in EXPERT_SHARE_ALLOWED:
            continue
        for node in ast.walk(ast.parse(text)):
            name = node.attr if isinstance(node, ast.Attribute) else (
                node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None)
            if name in EXPERT_NAMES:
                out.append(f"{rel}:{node.lineno}")
    return out


def test_bytes_per_token_have_one_home():
    """Only core/speed turns the experts a token uses into bytes per token: the tune's frontier and its
    bandwidth figure ask it (they had two formulas that disagreed: one left out the output head, the other
    applied the expert share to a device's whole weights)."""
    sources = {p.relative_to(ROOT).as_posix(): p.read_text() for p in ROOT.rglob("*.py")}
    offenders = expert_share_offenders(sources)
    assert not offenders, "a second formula for the experts a token reads (ask core.speed):\n" + "\n".join(offenders)


def test_the_one_home_check_catches_a_second_formula():
    old_frontier = "share = getattr(self.model, 'expert_used_count', 0) / n_exp"
    old_checks = "moe = (model.expert_used_count / model.expert_count) if model.expert_count else 1.0"
    assert expert_share_offenders({"core/tune/frontier.py": old_frontier, "services/tune/checks.py": old_checks})


def test_a_calibration_that_gives_a_model_no_time_says_calibrate_again(dense):
    """A calibration fitted before `determined` existed could hold only an attention cost: a model at an empty
    cache then costs nothing, and the views said "no rate for" and nothing more."""
    from llm_tuner.state.speed import speed_figures

    cal = SpeedCalibration({"read:Host@2": 0.0, "compute:Host@2": 0.0, "fixed:cpu@2": 0.0,
                            "attn_gen:Host:f16/f16@2": 2.7, "attn_prefill:Host:f16/f16@2": 0.9,
                            "pfixed:cpu@2": 0.0}, threads=(2,))
    pr = predict(_traffic(dense, ["-c", "2048"])[0], cal, threads=2, depth=0)
    assert pr.gen_tps is None and pr.unknown == ()
    assert "calibrate again" in pr.text() and "calibrate again" in speed_figures(pr)
