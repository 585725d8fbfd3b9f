#!/usr/bin/env python3
"""How stable is the speed probe's attention cost from one probe to the next, and do more repetitions help?

Issue 33: two probes an hour apart on the 2-core VM put the dense model's f16 generation at depth 2048 at 36.9 and
51.9 t/s (`benchmarks/results/tune_vs_grid/cpu_space_pruning_servercost*.txt`). The probe fits the CPU's attention
from llama-bench generation at depth 0 and PROBE_DEPTH; the cost per token is 1/t/s(depth) - 1/t/s(0). This runs
the probe's own llama-bench cells (services.speed: PROBE_GEN tokens, flash attention on, depth 0 and PROBE_DEPTH)
on issue 37's random dense CPU model, `--rounds` times, alternating `--reps` counts within each round (so drift
over time hits every count alike), and prints per K/V type and repetition count the attention cost of each round
and its spread. If more repetitions narrow the spread, the noise is within a run; if not, it drifts between runs
and only probing at other times (or the server's own runs) averages it out.

    python benchmarks/probe_stability.py --threads 2 --rounds 8 --reps 2,6 --out benchmarks/results/probe_stability/epyc-2core.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def cells(binary: str, model: str, threads: int, kv: str, reps: int) -> dict[int, float]:
    """{depth: generation t/s} of one llama-bench run: the probe's generation cells for one K/V type."""
    from llm_tuner.core import flags
    from llm_tuner.services.speed import PROBE_DEPTH, PROBE_GEN

    server = [*flags.argv_for("model", model), *flags.argv_for("threads", str(threads)),
              *flags.argv_for("flash_attn", "on"), *flags.argv_for("cache_type_k", kv),
              *flags.argv_for("cache_type_v", kv)]
    argv = [binary, *flags.to_llama_bench(server)[0], flags.BENCH_DEPTH, f"0,{PROBE_DEPTH}", flags.BENCH_PROMPT, "0",
            flags.BENCH_GEN, str(PROBE_GEN), flags.BENCH_REPS, str(reps), flags.BENCH_OUTPUT, "jsonl"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"llama-bench failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {int(r["n_depth"]): float(r["avg_ts"]) for r in rows}


def cv(xs: list[float]) -> str:
    return f"{100 * statistics.stdev(xs) / statistics.mean(xs):.0f} %" if len(xs) > 1 else "–"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", default="2,6", help="repetition counts to compare (llama-bench -r)")
    ap.add_argument("--kv", default="f16,q8_0")
    ap.add_argument("--models-dir", type=Path, default=Path("/tmp/tune-vs-grid-models"))
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    try:
        reps = [int(r) for r in args.reps.split(",")]
    except ValueError:
        reps = []
    if not reps or min(reps) < 1 or args.rounds < 1 or args.threads < 1:
        sys.exit("usage: --reps takes whole numbers from 1 (2,6); --rounds and --threads at least 1")

    from tune_vs_grid import _cpu_models

    from llm_tuner.services.binaries import embedded_bin_dir
    from llm_tuner.services.speed import PROBE_DEPTH, PROBE_GEN

    binary = str((embedded_bin_dir() or Path()) / "llama-bench")
    model = _cpu_models(args.models_dir, False)["dense"]
    kvs = args.kv.split(",")
    load0 = os.getloadavg()[0]
    t0 = time.time()
    cost: dict[tuple[str, int], list[float]] = {}  # ms per token the depth adds
    gen0: dict[tuple[str, int], list[float]] = {}
    for rnd in range(args.rounds):
        order = reps if rnd % 2 == 0 else reps[::-1]
        for kv in kvs:
            for r in order:
                tps = cells(binary, model, args.threads, kv, r)
                cost.setdefault((kv, r), []).append(1000 / tps[PROBE_DEPTH] - 1000 / tps[0])
                gen0.setdefault((kv, r), []).append(tps[0])
                print(f"round {rnd + 1} {kv} -r {r}: {tps[0]:.1f} t/s at depth 0, {tps[PROBE_DEPTH]:.1f} at "
                      f"{PROBE_DEPTH}", file=sys.stderr, flush=True)
    out = [f"# The probe's attention cost from run to run ({platform.processor() or platform.machine()}, "
           f"{os.cpu_count()} CPUs, {args.threads} threads)", "",
           f"{Path(model).name}; llama-bench generation of {PROBE_GEN} tokens at depth 0 and {PROBE_DEPTH}, flash "
           f"attention on (the probe's cells); {args.rounds} rounds, the repetition counts alternated within each; "
           f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(t0))}, {time.time() - t0:.0f} s, load average "
           f"{load0:.2f} -> {os.getloadavg()[0]:.2f}.", "",
           "Attention cost = 1000/t/s(depth) - 1000/t/s(0), in ms per generated token; spread = (max - min) / "
           "median over the rounds; cv = standard deviation / mean.", "",
           "| K/V | -r | cost per round (ms) | median | spread | cv | depth-0 t/s per round | spread | cv |",
           "|---|---|---|---|---|---|---|---|---|"]
    for kv in kvs:
        for r in reps:
            c, g = cost[(kv, r)], gen0[(kv, r)]
            med, gmed = statistics.median(c), statistics.median(g)
            out.append(f"| {kv} | {r} | {', '.join(f'{x:.2f}' for x in c)} | {med:.2f} | "
                       f"{100 * (max(c) - min(c)) / med:.0f} % | {cv(c)} | {', '.join(f'{x:.0f}' for x in g)} | "
                       f"{100 * (max(g) - min(g)) / gmed:.0f} % | {cv(g)} |")
    text = "\n".join(out) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
