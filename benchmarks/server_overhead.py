#!/usr/bin/env python3
"""What a generated token costs in llama-server beyond llama-bench's (the speed model's probe) on the same model.

The speed model is calibrated with llama-bench; the tune and the Benchmarks tab measure the server. On the lent
16 cores the server generated 13-25 % slower than the probe predicted at 500-700 t/s (issue 37's run-4): a cost
per token that llama-bench does not pay (sampling, detokenising, the server loop). This script measures it: for
each model and thread count, llama-bench's generation (`-p 0 -n GEN`) and the server's own generation timing
(`timings.predicted_per_second`, what the app's benchmarks keep), alternated over `--rounds`, with the server's
default sampling and with greedy sampling (`top_k` 1 alone). The per-token surplus is 1/server − 1/bench.

    python benchmarks/server_overhead.py --dir /tmp/so --threads 2 --rounds 3 --out benchmarks/results/server_overhead/local.md
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GEN = 64
# name -> (writer, shape): a vocabulary of 32,000 tokens for the random ones (tests/support/random_gguf.py), the
# demo model's 262,144
MODELS = {
    "tiny": ("qwen3_dense", dict(n_layer=2, n_embd=256)),
    "dense-s": ("qwen3_dense", dict(n_layer=12, n_embd=768, n_ff=2048, n_head=12, n_head_kv=4, head_dim=64)),
    "moe-s": ("qwen3_moe", dict(n_layer=8, n_embd=512, n_ff=1024, n_ff_exp=256, n_expert=32, n_expert_used=4,
                                n_head=8, n_head_kv=4, head_dim=64)),
    "demo": ("demo", {}),
}
SAMPLING = {"default": {}, "greedy": {"samplers": ["top_k"], "top_k": 1}}


def _bin(name: str) -> str:
    from llm_tuner.services.binaries import embedded_bin_dir

    d = embedded_bin_dir()
    if d is None:
        sys.exit("no embedded llama.cpp build: make setup")
    return str(d / name)


def write_models(d: Path, names: list[str]) -> dict[str, Path]:
    from tests.support.random_gguf import write_qwen3_dense, write_qwen3_moe

    d.mkdir(parents=True, exist_ok=True)
    out = {}
    for name in names:
        kind, shape = MODELS[name]
        if kind == "demo":
            from llm_tuner.services.demo_model import find_demo_model

            found = find_demo_model()
            if found is None:
                sys.exit("the demo model is missing: python -m llm_tuner.services.demo_model")
            out[name] = found
            continue
        path = d / f"{name}.gguf"
        if not path.exists():
            writer = write_qwen3_dense if kind == "qwen3_dense" else write_qwen3_moe
            writer(path, weight_type="Q8_0", embd_type="Q8_0", name=f"server-overhead {name}", seed=1, **shape)
        out[name] = path
    return out


def bench_tps(model: Path, threads: int, reps: int) -> list[float]:
    argv = [_bin("llama-bench"), "-m", str(model), "-t", str(threads), "-p", "0", "-n", str(GEN), "-r", str(reps),
            "-o", "json"]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=True)
    rows = json.loads(res.stdout)
    return [float(x) for x in rows[0]["samples_ts"]]


def server_tps(model: Path, threads: int, reps: int) -> dict[str, list[float]]:
    from llm_tuner.services.client import LlamaClient
    from llm_tuner.services.launch import free_port

    port = free_port()
    argv = [_bin("llama-server"), "-m", str(model), "-t", str(threads), "-c", "1024", "-np", "1",
            "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = LlamaClient(f"http://127.0.0.1:{port}")
        client.wait_ready(timeout=60.0, alive=lambda: proc.poll() is None)
        prompt = [1] + [100 + i for i in range(15)]
        client.completion(prompt, n_predict=8, ignore_eos=True)  # warm-up
        out: dict[str, list[float]] = {k: [] for k in SAMPLING}
        for _ in range(reps):
            for name, extra in SAMPLING.items():
                answer = client.completion(prompt, n_predict=GEN, ignore_eos=True, cache_prompt=False, seed=1234,
                                           **extra)
                out[name].append(float(answer["timings"]["predicted_per_second"]))
        return out
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="/tmp/server-overhead")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--threads", default="2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--host-note", default="")
    ap.add_argument("--out")
    a = ap.parse_args()
    unknown = [m for m in a.models.split(",") if m not in MODELS]
    if unknown:
        ap.error(f"--models: unknown {', '.join(unknown)} (known: {', '.join(MODELS)})")
    if not all(x.isdigit() and int(x) > 0 for x in a.threads.split(",")):
        ap.error(f"--threads: positive whole numbers separated by commas, not {a.threads!r}")
    models = write_models(Path(a.dir), a.models.split(","))
    lines = [f"# llama-server's cost per generated token beyond llama-bench's ({GEN} tokens, depth 0)", "",
             f"Host: {a.host_note or os.uname().nodename}, {os.cpu_count()} CPUs; load average before "
             f"{os.getloadavg()[0]:.2f}. {a.rounds} rounds, each llama-bench (-r {a.reps}) then one server start "
             f"({a.reps} requests per sampling); medians over every sample.", "",
             "| model | threads | llama-bench t/s | server default t/s | server greedy t/s | surplus default ms | "
             "surplus greedy ms |", "|---|---|---|---|---|---|---|"]
    for name, path in models.items():
        for t in (int(x) for x in a.threads.split(",")):
            bench: list[float] = []
            serv: dict[str, list[float]] = {k: [] for k in SAMPLING}
            for _ in range(a.rounds):
                bench += bench_tps(path, t, a.reps)
                for k, v in server_tps(path, t, a.reps).items():
                    serv[k] += v
            b = statistics.median(bench)
            s = {k: statistics.median(v) for k, v in serv.items()}
            row = (f"| {name} | {t} | {b:.1f} ({min(bench):.0f}-{max(bench):.0f}) | "
                   + " | ".join(f"{s[k]:.1f} ({min(serv[k]):.0f}-{max(serv[k]):.0f})" for k in SAMPLING) + " | "
                   + " | ".join(f"{1000 / s[k] - 1000 / b:+.3f}" for k in SAMPLING) + " |")
            print(row, flush=True)
            lines.append(row)
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
