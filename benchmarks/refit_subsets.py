#!/usr/bin/env python3
"""How the refit over stored runs (services.speed.calibrate_on_runs) predicts the runs it did not see, on the lent
GPU sessions' recorded runs, for subsets of runs a user might have stored: the tune's first round, one model's
grid, its first four cells, ... - each refined into the session's probe, then every other run of both models
predicted (generation and prefill |error|, median / max). Run once per core.speed.calibrate.PRIOR_WEIGHT given.

    python3 benchmarks/refit_subsets.py [--prior-weights 0,0.01] [--out benchmarks/results/speed_model/refit-subsets.md]

The sessions' runs are one server start each: a subset of a few runs carries their noise into the costs."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

SESSIONS = ("2026-12-06-gpu-speed", "2026-12-07-gpu-speed")
SUBSETS = {
    "probe only (no run)": lambda m, r: False,
    "tune trials, both models": lambda m, r: r["label"].startswith("tune"),
    "tune trials, MoE": lambda m, r: m == "moe" and r["label"].startswith("tune"),
    "tune trials, dense": lambda m, r: m == "dense" and r["label"].startswith("tune"),
    "grid, MoE": lambda m, r: m == "moe" and r["label"] == "grid",
    "grid, dense": lambda m, r: m == "dense" and r["label"] == "grid",
    "first 4 grid cells of each": lambda m, r: r["label"] == "grid" and r["n"] <= 4,
    "first 4 grid cells, dense": lambda m, r: m == "dense" and r["label"] == "grid" and r["n"] <= 4,
    "first 4 grid cells, MoE": lambda m, r: m == "moe" and r["label"] == "grid" and r["n"] <= 4,
}


def session_rows(session: str) -> list[str]:
    import replay_gpu_speed as rp

    from llm_tuner.core.tune import Objective
    from llm_tuner.services.speed import calibrate_on_runs
    from llm_tuner.services.tune.speed import SpeedOracle

    rp.SESSION = ROOT / "benchmarks" / "sessions" / session
    probe = rp.calibration()
    objective = Objective(kind="gen_tps", prompt_tokens=rp.PROMPT, gen_tokens=rp.GEN)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = rp.restore(Path(tmp))
        runs = []
        for model in ("moe", "dense"):
            dev = rp.devices(model)
            for line in (rp.SESSION / "logs" / model / "runs.jsonl").read_text().splitlines():
                r = json.loads(line)
                if r["gen"] and r["prefill"]:
                    runs.append((model, r, [str(paths.get(a, a)) for a in r["argv"]], dev))
        for name, sel in SUBSETS.items():
            chosen = [x for x in runs if sel(x[0], x[1])]
            ms = [m for model, r, argv, dev in chosen for m in rp.measurement(argv, r, *dev, f"{model} {r['n']}")]
            cal = (calibrate_on_runs(probe, ms, build=probe.build, driver=probe.driver)[0] if ms else None) or probe
            seen = {tuple(x[1]["argv"]) for x in chosen}
            cells = []
            for model in ("moe", "dense"):
                gpus, host, flags = rp.devices(model)
                oracle = SpeedOracle(objective, cal, gpus, host, flags, rp.DEFAULT_THREADS)
                eg, ep = [], []
                for m, r, argv, _ in runs:
                    if m != model or tuple(r["argv"]) in seen:
                        continue
                    g = oracle.guess(argv)
                    eg.append(abs(g.gen_tps / statistics.median(r["gen"]) - 1))
                    ep.append(abs(g.prefill_tps / statistics.median(r["prefill"]) - 1))
                cells.append(f"{100 * statistics.median(eg):.1f} / {100 * max(eg):.0f} | "
                             f"{100 * statistics.median(ep):.1f} / {100 * max(ep):.0f}")
            out.append(f"| {session} | {name} | {len(chosen)} | {' | '.join(cells)} |")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prior-weights", default="0,0.01")
    ap.add_argument("--out")
    a = ap.parse_args()
    from llm_tuner.core.speed import calibrate

    text = ["# The refit over a subset of stored runs, predicting the others (benchmarks/refit_subsets.py)", "",
            "Each subset of a session's recorded server runs refined into that session's probe "
            "(services.speed.calibrate_on_runs), then every run of both models not in it predicted; |error| median / "
            "max in %, generation | prefill.", ""]
    for w in (float(x) for x in a.prior_weights.split(",")):
        calibrate.PRIOR_WEIGHT = w
        text += [f"## PRIOR_WEIGHT = {w}", "",
                 "| session | runs refined in | n | MoE gen | MoE prefill | dense gen | dense prefill |",
                 "|---|---|---|---|---|---|---|"]
        for s in SESSIONS:
            text += session_rows(s)
        text.append("")
    print("\n".join(text))
    if a.out:
        Path(a.out).write_text("\n".join(text) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
