"""Pipeline parallelism as the real llama-server turns it on, against the plan and the advice (issue 38): two real
ggml-rpc-server workers on loopback (CPU, as tests/integration/test_rpc_workers.py starts them), the tiny model
split over RPC0 and RPC1. Its own log says "pipeline parallelism enabled" only without a tensor override and with
the output layer offloaded; the plan's MemoryPlan.pipeline_parallel, the Plan's line and the advice
pipeline-parallel-off must say the same in each case."""

from __future__ import annotations

import pytest

from llm_tuner.core import flags
from llm_tuner.core.advice import advise
from llm_tuner.core.cmdline import import_command
from llm_tuner.core.memory import PlanDevice, args_from_profile, pipeline, plan_memory
from llm_tuner.services.binaries import default_catalog, measure_server_memory
from llm_tuner.services.library import read_model
from llm_tuner.services.rpc import worker_devices
from tests.integration.test_rpc_workers import TINY_SPLIT, _args, workers  # noqa: F401 - the workers fixture

pytestmark = pytest.mark.server

LOGGED = "pipeline parallelism enabled"


def test_pipeline_parallelism_on_and_off_as_the_server_logs_it(workers, server_binary, tiny_model):
    _pool, started = workers
    endpoints = [w.endpoint for w in started]
    devices = worker_devices(endpoints)
    gpus = [PlanDevice(d.name, d.backend, d.memory_total_mib, d.memory_free_mib, d.description,
                       free_includes_runtime=True) for d in devices]
    host = PlanDevice("Host", "CPU", None)
    model = read_model(tiny_model)
    n_layer = model.block_count
    cases = {  # extra arguments -> whether llama.cpp turns it on
        "no override, every layer": ([], True),
        "an -ot rule": ([*flags.argv_for("override_tensor", r"blk\.0\.ffn_.*=CPU")], False),
        "-ngl = the layer count": ([*flags.argv_for("gpu_layers", str(n_layer))], False),
        "-ngl above it": ([*flags.argv_for("gpu_layers", str(n_layer + 1))], True),
    }
    seen = {}
    for name, (extra, on) in cases.items():
        argv = [*_args(tiny_model, endpoints, TINY_SPLIT), *extra]
        run = measure_server_memory(server_binary, argv, timeout=120)
        assert run.loaded, run.log[-2000:]
        logged = LOGGED in run.log
        profile = import_command(argv, default_catalog()).profile
        plan = plan_memory(model, args_from_profile(profile), gpus, host)
        pipe = pipeline(model, plan, gpus, host, user_args=args_from_profile(profile))
        ids = {a.id for a in advise(profile, default_catalog(), model, plan=plan, pipeline=pipe)}
        without_plan = {a.id for a in advise(profile, default_catalog(), model)}
        seen[name] = (logged, plan.pipeline_parallel, pipe.on, "pipeline-parallel-off" in ids,
                      "pipeline-parallel-off" in without_plan)
        assert seen[name] == (on, on, on, not on, not on), (name, seen[name])
        assert pipe.text().startswith(f"Pipeline parallelism: {'on' if on else 'off'}")
        why = {"an -ot rule": "a tensor override is set (-ot blk", "-ngl = the layer count": "equals the model's"}
        assert why.get(name, "") in pipe.why
