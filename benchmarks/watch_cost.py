"""What watching costs: generation t/s of the real llama-server with our samplers on vs off.

    .venv/bin/python benchmarks/watch_cost.py [--server PATH] [--model PATH] [--ngl N] [--reps 8]
                                              [--n-predict 128] [--label cpu]

One server stays up; requests alternate samplers on / off (ABBA order per pair, so drift cancels),
`--reps` pairs. "On" = every sampler the app runs at its default rate (GPUs via NVML/AMD where present,
host via psutil, server /metrics + /slots). Also measures the samplers' own CPU time (thread CPU) at
default rates over an idle window: target < 2 % of one core. Appends to
benchmarks/results/watch_cost/watch_cost_<label>.txt.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--server")
    ap.add_argument("--model")
    ap.add_argument("--ngl", default=None, help="-ngl for the server (GPU runs: 99)")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--reps", type=int, default=8, help="on/off pairs")
    ap.add_argument("--n-predict", type=int, default=128)
    ap.add_argument("--idle-s", type=float, default=20.0, help="window for the samplers' CPU use")
    ap.add_argument("--label", default="cpu")
    ap.add_argument("--no-record", action="store_true")
    args = ap.parse_args()

    from llm_tuner.services.binaries import SERVER, locate
    from llm_tuner.services.client import LlamaClient
    from llm_tuner.services.demo_model import find_demo_model
    from llm_tuner.services.launch import plan_launch
    from llm_tuner.services.server import ServerProcess
    from llm_tuner.services.telemetry.host import HostReader
    from llm_tuner.services.telemetry.readers import default_gpu_readers
    from llm_tuner.services.telemetry.sampler import DEFAULT_RATES_S, Telemetry
    from llm_tuner.services.telemetry.server_metrics import ServerReader

    server = args.server or str(locate(SERVER).path)
    model = args.model or str(find_demo_model())
    user = ["-m", model, "-c", "2048", "-np", "1", "-t", args.threads]
    if args.ngl is not None:
        user += ["-ngl", str(args.ngl)]
    plan = plan_launch(server, user)  # adds --metrics (the server reader needs it)
    proc = ServerProcess(plan.argv, plan.env)
    proc.start()
    client = LlamaClient(plan.url, timeout=600)
    h = client.wait_ready(600, alive=proc.alive)
    if not h.ready:
        print("\n".join(list(proc.lines)[-30:]))
        return 1

    def telemetry() -> Telemetry:
        pid = proc.pid
        readers, _notes = default_gpu_readers(lambda: frozenset({pid}))
        readers["host"] = HostReader(lambda: pid)
        readers["server"] = ServerReader(LlamaClient(plan.url, timeout=5))
        return Telemetry(readers)

    def one_request() -> float:
        r = client.completion("Write a story about a lighthouse keeper.", n_predict=args.n_predict,
                              ignore_eos=True, cache_prompt=False)
        return float(r["timings"]["predicted_per_second"])

    try:
        one_request()  # warm-up
        on: list[float] = []
        off: list[float] = []
        pair_diff: list[float] = []
        for rep in range(args.reps):
            order = ("on", "off") if rep % 2 == 0 else ("off", "on")
            got = {}
            for mode in order:
                tel = telemetry().start() if mode == "on" else None
                time.sleep(0.3)
                got[mode] = one_request()
                if tel is not None:
                    tel.stop()
            on.append(got["on"])
            off.append(got["off"])
            pair_diff.append(100.0 * (got["on"] - got["off"]) / got["off"])
            print(f"pair {rep + 1}: on {got['on']:.2f} t/s, off {got['off']:.2f} t/s ({pair_diff[-1]:+.2f} %)", flush=True)
        # Samplers' own CPU at default rates, server idle.
        tel = telemetry().start()
        time.sleep(args.idle_s)
        tel.stop()
        cpu_pct = 100.0 * tel.cpu_seconds() / args.idle_s
        per = {s.name: 100.0 * s.cpu_s / args.idle_s for s in tel.samplers}
    finally:
        client.close()
        proc.stop()

    def ms(xs):
        return f"{statistics.mean(xs):.2f} ± {statistics.stdev(xs):.2f}" if len(xs) > 1 else f"{xs[0]:.2f}"

    mean_diff = statistics.mean(pair_diff)
    sd_diff = statistics.stdev(pair_diff) if len(pair_diff) > 1 else 0.0
    block = (f"## {time.strftime('%Y-%m-%d %H:%M:%S')} {platform.node()} ({os.cpu_count()} cores, load average "
             f"{os.getloadavg()[0]:.2f}) label={args.label}\n"
             f"server: {Path(server).name} -m {Path(model).name} -t {args.threads}"
             f"{' -ngl ' + str(args.ngl) if args.ngl is not None else ''}; {args.n_predict} tokens per request, "
             f"{args.reps} on/off pairs (alternating order); default rates {DEFAULT_RATES_S}\n"
             f"generation t/s with samplers ON : {ms(on)}\n"
             f"generation t/s with samplers OFF: {ms(off)}\n"
             f"paired difference (on - off)/off: {mean_diff:+.2f} % ± {sd_diff:.2f} % (sd over pairs; "
             f"target |diff| < 1 % on the GPU)\n"
             f"samplers' own CPU at default rates over {args.idle_s:.0f} s: {cpu_pct:.2f} % of one core "
             f"(target < 2 %: {'PASS' if cpu_pct < 2 else 'FAIL'}); per sampler: "
             + ", ".join(f"{k} {v:.2f} %" for k, v in per.items()) + "\n")
    print(block)
    if not args.no_record:
        with open(ROOT / "benchmarks" / "results" / "watch_cost" / f"watch_cost_{args.label}.txt", "a") as f:
            f.write(block + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
