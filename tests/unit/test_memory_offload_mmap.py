"""core.memory (issue 12): the GPU's compute buffer at -ngl 0 (op offload) and mapped versus resident host memory.

Model shapes are synthetic tables (tests/unit/test_memory.make_model); the figures they are checked against are
measured ones, named where they are used.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from llm_tuner.core.memory import PlanDevice, parse_server_args, plan_memory, solve
from tests.unit.test_memory import HOST, gpu, make_model

H200 = PlanDevice("CUDA0", "CUDA", 143771, 143155)


def _llama_8b():
    # Llama-3.1-8B's shape (32 layers, n_embd 4096, n_ff 14336, 32/8 heads of 128, vocab 128256), Q4_K weights
    return make_model(n_layer=32, n_embd=4096, n_ff=14336, n_head=32, n_head_kv=8, head_dim=128, n_vocab=128256,
                      wtype="Q4_K", arch="llama")


def test_ngl_0_with_a_gpu_still_gets_a_compute_buffer_from_op_offload():
    """llama.cpp at -ngl 0 runs big-batch matmuls of the CPU layers on the GPU (op offload): 124 MiB of CUDA0
    compute buffer measured on the H200 for an 8B model at -c 8192 (issue 12). The plan showed 0."""
    m = _llama_8b()
    p = plan_memory(m, parse_server_args("-m x -c 8192 -ngl 0"), [H200], HOST)
    cuda = p.device("CUDA0")
    assert cuda.model_mib == 0 and cuda.kv_mib == 0
    assert cuda.compute_mib == pytest.approx(124, rel=0.10)
    # below op offload's 32-token batch, or with it off, nothing runs there: the host computes instead
    small = plan_memory(m, parse_server_args("-m x -c 8192 -ngl 0 -ub 16"), [H200], HOST)
    assert small.device("CUDA0").compute_mib == 0
    off = plan_memory(m, parse_server_args("-m x -c 8192 -ngl 0 --no-op-offload"), [H200], HOST)
    assert off.device("CUDA0").compute_mib == 0
    assert off.device("Host").compute_mib > p.device("Host").compute_mib
    # without a GPU nothing changes
    assert [d.name for d in plan_memory(m, parse_server_args("-m x -c 8192 -ngl 0"), [], HOST).devices] == ["Host"]


def _qwen_27b():
    # a 27B dense shape (64 layers, n_embd 5120, n_ff 17408, 64/8 heads of 128, vocab 151936), Q8_0 weights
    return make_model(n_layer=64, n_embd=5120, n_ff=17408, n_head=64, n_head_kv=8, head_dim=128, n_vocab=151936,
                      wtype="Q8_0", arch="qwen3")


FFN_ON_CPU = r"-m x -c 32768 -ngl 99 -ot \.ffn_(up|down|gate)\.=CPU"
HOST_16G = PlanDevice("Host", "CPU", 16384, 15000)


def test_mapped_weights_are_apart_from_what_must_be_resident():
    """A 27B model with its FFN on the CPU on a 16 GiB host runs from the page cache under mmap: the mapped
    weights are shown apart and are not "short"; --load-mode mmap+mlock / none makes them resident."""
    m = _qwen_27b()
    gpus = [gpu("CUDA0", 24576, 23000)]
    p = plan_memory(m, parse_server_args(FFN_ON_CPU), gpus, HOST_16G)
    host = p.device("Host")
    assert host.mapped_mib > 16384  # more weights than RAM, in the file mapping
    assert host.resident_mib == pytest.approx(host.total_mib - host.mapped_mib - host.prompt_cache_mib)
    assert host.resident_mib < 15000 and host.fits and p.fits
    assert not any("short" in w for w in p.warnings)
    assert any("mapped from the model file" in w and "read again from disk" in w for w in p.warnings)
    js = host.to_json()
    assert js["mapped_mib"] == round(host.mapped_mib, 1) and js["resident_mib"] == round(host.resident_mib, 1)
    # the solver does not call the host short either
    ans = solve(m, parse_server_args(FFN_ON_CPU), gpus, HOST_16G, goal="context")
    assert ans.args is not None and "Host is the limit" not in ans.reason
    for mode in ("mmap+mlock", "none"):
        locked = plan_memory(m, parse_server_args(FFN_ON_CPU + f" -lm {mode}"), gpus, HOST_16G).device("Host")
        assert locked.mapped_mib == 0 and locked.fits is False
        assert locked.resident_mib > 16384


def test_estimate_json_has_mapped_and_resident(demo_model):
    out = subprocess.run([sys.executable, "-m", "llm_tuner", "estimate", "--json", "--devices", "Host=8192", "--",
                          "-m", str(demo_model), "-c", "4096"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    host = json.loads(out.stdout)["devices"][0]
    assert host["mapped_mib"] > 200  # the demo model's weights are in the file mapping by default
    assert host["resident_mib"] == pytest.approx(host["total_mib"] - host["mapped_mib"] - host["prompt_cache_mib"], abs=0.2)
