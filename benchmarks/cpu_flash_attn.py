#!/usr/bin/env python3
"""Flash attention on and off on the CPU: prefill and generation by depth (why the tune races `-fa` on a CPU too).

llama.cpp's `-fa auto` turns flash attention on wherever the backend supports it, the CPU included. Whether that is
the faster path on a CPU depends on the machine and the depth (llama.cpp issue 27086: off doubled prefill on Arm
Neoverse, on won on an Intel laptop). This runs llama-bench on issue 37's random CPU models
(benchmarks/tune_vs_grid.py's, f16 K/V: a quantized V cache needs flash attention) with `-fa 1,0` at each depth,
and prints what off does against on.

    python benchmarks/cpu_flash_attn.py --threads 2 --out benchmarks/results/cpu_flash_attn/local.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def bench(binary: str, model: str, threads: int, depths: str, prompt: int, gen: int, reps: int) -> list[dict]:
    """llama-bench's JSON lines for one model: f16 K/V, flash attention on then off, at each depth."""
    from llm_tuner.core import flags

    server = [*flags.argv_for("model", model), *flags.argv_for("threads", str(threads)),
              *flags.argv_for("flash_attn", "1,0"), *flags.argv_for("cache_type_k", "f16"),
              *flags.argv_for("cache_type_v", "f16")]
    argv = [binary, *flags.to_llama_bench(server)[0], flags.BENCH_DEPTH, depths, flags.BENCH_PROMPT, str(prompt),
            flags.BENCH_GEN, str(gen), flags.BENCH_REPS, str(reps), flags.BENCH_OUTPUT, "jsonl"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"llama-bench failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--depths", default="0,1024,2048")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--models-dir", type=Path, default=Path("/tmp/tune-vs-grid-models"))
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if not all(d.strip().isdigit() for d in args.depths.split(",")) or args.threads < 1 or args.reps < 1:
        sys.exit("usage: --depths takes whole numbers (0,1024,2048); --threads and --reps at least 1")

    from tune_vs_grid import _cpu_models

    from llm_tuner.services.binaries import embedded_bin_dir
    from llm_tuner.services.telemetry.host import host_info

    bin_dir = embedded_bin_dir()
    if bin_dir is None:
        sys.exit("no embedded llama.cpp build: make setup")
    models = _cpu_models(args.models_dir)
    cpu = host_info().cpu_model or platform.processor() or "?"
    lines = [f"# Flash attention on vs off on the CPU · {time.strftime('%Y-%m-%d %H:%M')} · {cpu} · "
             f"{os.cpu_count()} CPUs · {args.threads} threads", "",
             f"llama-bench `-fa 1,0 -ctk f16 -ctv f16 -d {args.depths} -p {args.prompt} -n {args.gen} "
             f"-r {args.reps}`; t/s as mean ± sd of the repetitions; load average before: "
             f"{os.getloadavg()[0]:.2f}", "",
             "| model | depth | test | fa on | fa off | off vs on |", "|---|---|---|---|---|---|"]
    for name, path in models.items():
        rows = bench(str(bin_dir / "llama-bench"), path, args.threads, args.depths, args.prompt, args.gen,
                     args.reps)
        by = {(r["n_depth"], r["n_prompt"] > 0, bool(r["flash_attn"])): r for r in rows}
        for depth, is_prefill in sorted({(k[0], k[1]) for k in by}, key=lambda k: (k[0], not k[1])):
            on, off = by.get((depth, is_prefill, True)), by.get((depth, is_prefill, False))
            if on is None or off is None:
                continue
            test = f"pp{args.prompt}" if is_prefill else f"tg{args.gen}"
            lines.append(f"| {name} | {depth} | {test} | {on['avg_ts']:.1f} ± {on['stddev_ts']:.1f} | "
                         f"{off['avg_ts']:.1f} ± {off['stddev_ts']:.1f} | "
                         f"{100 * (off['avg_ts'] / on['avg_ts'] - 1):+.1f} % |")
    lines.append(f"\nload average after: {os.getloadavg()[0]:.2f}")
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
