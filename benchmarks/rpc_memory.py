"""The memory plan per RPC device beside llama.cpp's own buffers (issue 14: within 3%).

Two sources of llama.cpp's figures, compared the same way (core.memory_check on the buffer lines, devices from
the log's own device list, so `RPC0[host:port]` of each worker lands on RPC0 / RPC1):

- live (default): start two `ggml-rpc-server -d CPU` here on loopback (services.rpc), run llama-server with
  each configuration (`-lv 4`, stopped once it listens) and compare;
- recorded: `--log FILE --args "..."` (repeatable, in pairs): a log recorded elsewhere, e.g. the lent H200's
  GPU worker (benchmarks/sessions/2026-12-01-h200-vulkan/logs/rpc-*.log, args from rpc.sh), with the model it ran.

    python benchmarks/rpc_memory.py --model demo --out benchmarks/results/rpc_memory/cpu-workers.json
    python benchmarks/rpc_memory.py --model /tmp/m/qwen3-1b-q4_k_m.gguf --out benchmarks/results/rpc_memory/h200.json \
        --log .../rpc-rpc0.log --args "-ngl 99 -c 4096 -fa on -np 1 -dev RPC0" ...
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llm_tuner.core import flags
from llm_tuner.core.memory import PlanDevice, parse_server_args, plan_memory
from llm_tuner.core.memory_check import compare
from llm_tuner.core.memory_log import parse_memory_log
from llm_tuner.services.logparse import DeviceListed, LogParser

LIVE_CONFIGS = ("-dev RPC0,RPC1 -ts 1,1", "-dev RPC0,RPC1 -ts 3,1 -ctk q8_0 -ctv q8_0 -fa on", "-dev RPC0",
                "-ngl 10 -dev RPC0,RPC1")


def logged_devices(text: str):
    parser = LogParser()
    return [ev.device for line in text.splitlines() for ev in parser.feed(line) if isinstance(ev, DeviceListed)]


def compare_log(model, text: str, args: list[str], cpu_flags: tuple[str, ...] = ()) -> dict:
    devices = logged_devices(text)
    gpus = [PlanDevice(d.name, d.backend, d.memory_total_mib, d.memory_free_mib, d.description,
                       free_includes_runtime=True) for d in devices]
    plan = plan_memory(model, parse_server_args(args), gpus, PlanDevice("Host", "CPU", None), cpu_flags=cpu_flags)
    rows = compare(parse_memory_log(text), plan, devices)
    per_device: dict[str, dict] = {}
    for r in rows:
        d = per_device.setdefault(r.device, {"plan_mib": 0.0, "llama_cpp_mib": 0.0, "kinds": {}})
        d["plan_mib"] += r.estimate_mib or 0.0
        d["llama_cpp_mib"] += r.measured_mib
        d["kinds"][r.kind] = {"plan_mib": round(r.estimate_mib or 0.0, 2), "llama_cpp_mib": round(r.measured_mib, 2)}
    for d in per_device.values():
        d["diff_pct"] = round((d["plan_mib"] / d["llama_cpp_mib"] - 1) * 100, 2) if d["llama_cpp_mib"] else None
        d["plan_mib"], d["llama_cpp_mib"] = round(d["plan_mib"], 2), round(d["llama_cpp_mib"], 2)
    endpoints = {d.name: d.description for d in devices if d.name.startswith("RPC")}
    return {"args": " ".join(args), "endpoints": endpoints, "devices": per_device}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="GGUF file, or 'demo' for the demo model")
    ap.add_argument("--log", action="append", default=[], help="a recorded llama-server -lv 4 log")
    ap.add_argument("--args", action="append", default=[], help="the arguments that log ran with")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    from llm_tuner.services.library import read_model
    from llm_tuner.services.telemetry.host import host_info

    model_path = a.model
    if model_path == "demo":
        from llm_tuner.services.demo_model import find_demo_model

        model_path = str(find_demo_model())
    model = read_model(Path(model_path))
    results = []
    if a.log:
        for log, args in zip(a.log, a.args, strict=True):
            results.append({"log": log, **compare_log(model, Path(log).read_text(), shlex.split(args))})
    else:
        import tempfile

        from llm_tuner.services.binaries import SERVER, locate, measure_server_memory
        from llm_tuner.services.rpc import WorkerPool, WorkerSpec

        server = locate(SERVER).path
        cpu_flags = tuple(host_info().cpu_flags)
        pool = WorkerPool()
        try:
            with tempfile.TemporaryDirectory() as cache:
                eps = [pool.start(WorkerSpec(devices=("CPU",), threads=1, cache_dir=f"{cache}/{i}")).endpoint
                       for i in range(2)]
                for cfg in LIVE_CONFIGS:
                    args = [*flags.argv_for("model", model_path), *flags.argv_for("fit", "off"),
                            *flags.argv_for("threads", "2"), *flags.argv_for("ctx_size", "4096"),
                            *flags.argv_for("parallel", "1"), *flags.argv_for("rpc", ",".join(eps)), *shlex.split(cfg)]
                    run = measure_server_memory(server, args, timeout=180)
                    if not run.loaded:
                        results.append({"args": cfg, "error": run.log[-500:]})
                        continue
                    results.append(compare_log(model, run.log, args, cpu_flags))
        finally:
            pool.stop_all()
    worst = max((abs(d["diff_pct"]) for r in results for n, d in r.get("devices", {}).items()
                 if n.startswith("RPC") and d["diff_pct"] is not None), default=None)
    out = {"model": Path(model_path).name, "worst_rpc_device_diff_pct": worst, "runs": results}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    for r in results:
        print(r["args"], {n: d["diff_pct"] for n, d in r.get("devices", {}).items()}, r.get("error", ""))
    print(f"worst RPC device: {worst}%")
    return 0 if worst is not None and worst <= 3 else 1


if __name__ == "__main__":
    raise SystemExit(main())
