"""The instant estimate against the real llama-server's own buffers (CPU build, demo + random qwen3 models).

Each case starts the real server once (`-lv 4 -fit off`, stopped once it listens; ~1-3 s) through
services.binaries.measure_server_memory and compares per kind with the issue's targets. The full
matrix (24 configurations) is benchmarks/memory_accuracy.py.
"""

from __future__ import annotations

import pytest

from llm_tuner.core.memory import PlanDevice, parse_server_args, plan_memory
from llm_tuner.core.memory_log import parse_fit_print, parse_memory_log
from llm_tuner.services.binaries import FIT_PARAMS, locate, measure_server_memory, run_fit_params
from llm_tuner.services.library import read_model

HOST = PlanDevice("Host", "CPU", None)


def _flags() -> tuple[str, ...]:
    for line in open("/proc/cpuinfo").read().splitlines():
        if line.startswith(("flags", "Features")):
            return tuple(line.split(":", 1)[1].split())
    return ()


def _compare(server_binary, model_path, extra):
    argv = ["-m", str(model_path), "-fit", "off", "-t", "2", *extra]
    run = measure_server_memory(server_binary, argv, timeout=120)
    assert run.loaded, run.log[-2000:]
    log = parse_memory_log(run.log)
    plan = plan_memory(read_model(model_path), parse_server_args(argv), [], HOST, cpu_flags=_flags())
    host = plan.device("Host")
    real = {k: log.total(k) for k in ("model", "kv", "compute", "output")}
    assert host.model_mib == pytest.approx(real["model"], rel=0.01, abs=4)
    assert host.kv_mib == pytest.approx(real["kv"], rel=0.01, abs=4)
    assert host.compute_mib == pytest.approx(real["compute"], rel=0.10)
    assert host.output_mib == pytest.approx(real["output"], abs=0.1)
    ours = host.model_mib + host.kv_mib + host.compute_mib + host.output_mib
    assert ours == pytest.approx(sum(real.values()), rel=0.02)
    assert host.buffers.keys() == log.by_buffer("model").keys()  # same buffers (mapped / repacked)
    return plan, log


def test_demo_model_default_and_swa_full(server_binary, demo_model):
    plan, log = _compare(server_binary, demo_model, ["-c", "8192"])
    assert [(c[1], c[2]) for c in plan.kv_cells] == [(k["cells"], k["layers"]) for k in log.kv_caches]
    _compare(server_binary, demo_model, ["-c", "4096", "-np", "2", "--swa-full", "-fa", "off", "-ub", "256"])


@pytest.fixture(scope="module")
def random_models(tmp_path_factory):
    from tests.support.random_gguf import write_qwen3_dense, write_qwen3_moe

    d = tmp_path_factory.mktemp("models")
    return {
        "dense": write_qwen3_dense(d / "dense.gguf", n_layer=4, n_embd=512, n_ff=1536, n_head=8, n_head_kv=2,
                                   head_dim=64, n_ctx_train=8192, weight_type="Q4_0"),
        "moe": write_qwen3_moe(d / "moe.gguf", n_layer=3, n_embd=256, n_ff_exp=128, n_expert=8, n_expert_used=2,
                               n_ctx_train=8192, weight_type="Q4_0"),
    }


def test_random_dense_and_moe(server_binary, random_models):
    _compare(server_binary, random_models["dense"], ["-c", "4096", "-ctk", "q8_0", "-ctv", "q8_0", "-ngl", "2"])
    _compare(server_binary, random_models["moe"], ["-c", "2048", "--cpu-moe", "-np", "1"])


@pytest.mark.server
def test_fit_params_print_runs(demo_model):
    loc = locate(FIT_PARAMS)
    assert loc is not None, "llama-fit-params is built with llama-server (make setup)"
    run = run_fit_params(loc.path, ["-m", str(demo_model), "-t", "2", "-c", "4096"], fit_print=True)
    rows = parse_fit_print(run.stdout)
    assert run.returncode == 0 and rows and rows[-1].name == "Host" and rows[-1].model_mib > 200


def test_fit_shrinks_context_like_llamacpp(server_binary, demo_model):
    """CPU only: fit compares host use with total RAM minus -fitt; a margin that leaves ~400 MiB shrinks -c."""
    from llm_tuner.services.telemetry.host import host_info

    h = host_info()
    margin = h.memory_total_mib - 405  # the demo needs ~410 MiB at its trained 32k context
    argv = ["-m", str(demo_model), "-t", "2", "-fitt", str(margin)]
    run = measure_server_memory(server_binary, argv, timeout=120)
    assert run.loaded, run.log[-2000:]
    real_ctx = parse_memory_log(run.log).context["n_ctx"]
    plan = plan_memory(read_model(demo_model), parse_server_args(argv), [],
                       PlanDevice("Host", "CPU", h.memory_total_mib, h.memory_available_mib), cpu_flags=_flags())
    assert real_ctx < 32768 and plan.n_ctx < 32768
    assert abs(plan.n_ctx - real_ctx) <= 2048  # llama.cpp interpolates linearly, we search exactly
    assert any(w.startswith("fit: context reduced") for w in plan.warnings)
