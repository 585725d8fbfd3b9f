#!/usr/bin/env python3
"""How the speed at a thread count between two measured ones is interpolated, against the server's measurements:
from the runs of benchmarks/sessions/2026-12-07-cpu-space (the lent 16 cores), the predictions the tune recorded at
4 threads and at 16 (its baseline) and the speeds measured at 8 (the grid's f16 cell and the unpruned tune's `t=8`
trial). Linear in speed (the speed model before 2026-12-07) against linear in time per token over 1/threads
(Amdahl's form: core.speed.predict.rate_between, what predictions use since then).

    python3 benchmarks/thread_interpolation.py [--out benchmarks/results/speed_model/thread-interpolation.md]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llm_tuner.core.speed.predict import rate_between  # noqa: E402

RUNS = {"run-1 (MoE)": "run-1", "run-3 (dense)": "run-3"}


def recorded(text: str) -> dict[str, float]:
    """The first (unpruned) tune's predictions at 16 (baseline) and 4 threads, its t=8 and the grid's f16 t=8."""
    def first(pattern: str) -> float:
        return float(re.search(pattern, text).group(1))

    return {"p16": first(r"trial 1 baseline .*?predicted ([\d.]+)"),
            "p4": first(r"t \{'kv': None, 't': '4'\}: measured [\d.]+ .*?predicted ([\d.]+)"),
            "tune8": first(r"t \{'kv': None, 't': '8'\}: measured ([\d.]+)"),
            "grid8": first(r"grid \{'t': '8', 'kv': 'f16'\}: ([\d.]+)")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out")
    a = ap.parse_args()
    lines = ["# Speed at 8 threads from predictions at 4 and 16 (benchmarks/thread_interpolation.py)", "",
             "| run | predicted 4 | predicted 16 | linear in speed | Amdahl (time over 1/threads) | measured 8: "
             "grid | unpruned tune | linear vs measured | Amdahl vs measured |", "|---|---|---|---|---|---|---|---|---|"]
    for name, folder in RUNS.items():
        r = recorded((ROOT / "benchmarks" / "sessions" / "2026-12-07-cpu-space" / folder / "cpu_space.txt").read_text())
        linear = r["p4"] + (r["p16"] - r["p4"]) * (8 - 4) / (16 - 4)
        amdahl = rate_between(r["p4"], r["p16"], 8, 4, 16)  # the app's interpolation (core.speed.predict)
        vs = {p: ", ".join(f"{100 * (p / m - 1):+.0f} %" for m in (r["grid8"], r["tune8"])) for p in (linear, amdahl)}
        lines.append(f"| {name} | {r['p4']:g} | {r['p16']:g} | {linear:.0f} | {amdahl:.0f} | {r['grid8']:g} | "
                     f"{r['tune8']:g} | {vs[linear]} | {vs[amdahl]} |")
    print("\n".join(lines))
    if a.out:
        Path(a.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
