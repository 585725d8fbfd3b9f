#!/usr/bin/env python3
"""How well the speed model predicts the gap between two candidates of a tune (what its pruning acts on).

Reads recorded `tune_vs_grid.py --cpu-space` outputs; in each unpruned tune ("tune without pruning") every measured
candidate is set against the same tune's baseline: predicted gap = 1 − predicted / baseline's predicted, measured
gap = 1 − measured / baseline's measured. A candidate the pruning would drop (predicted more than MIN_PRUNE behind)
whose measured gap is under 25 % is marked: the model overstated a real but small gap.

    python benchmarks/prune_gaps.py FILE... > benchmarks/results/tune_vs_grid/prune_gaps.txt
"""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

TRIAL = re.compile(r"  trial \d+ (\S+) (\{.*?\}): measured ([\d.]+) \(n=\d+\) · predicted ([\d.]+)")


def gaps(path: Path) -> list[tuple[str, str, float, float]]:
    """(model · depth, candidate, predicted gap, measured gap) of every unpruned tune's measured candidate."""
    out = []
    combo, free, base = "", False, None
    for line in path.read_text().splitlines():
        if m := re.match(r"## (\w+) · depth (\d+)", line):
            combo = f"{m.group(1)} · {m.group(2)}"
        elif line.startswith("tune "):
            free, base = "without pruning" in line, None
        elif (m := TRIAL.match(line)) and free:
            measured, predicted = float(m.group(3)), float(m.group(4))
            if m.group(1) == "baseline":
                base = (measured, predicted)
            elif base is not None:
                out.append((combo, m.group(2), 1 - predicted / base[1], 1 - measured / base[0]))
    return out


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from llm_tuner.core.tune.prune import MIN_PRUNE

    missing = [n for n in sys.argv[1:] if not Path(n).is_file()]
    if missing or len(sys.argv) < 2:
        sys.exit("usage: prune_gaps.py FILE... (tune_vs_grid.py --cpu-space outputs)"
                 + (f"; not a file: {', '.join(missing)}" if missing else ""))
    errors = []
    for name in sys.argv[1:]:
        rows = gaps(Path(name))
        print(f"## {name}")
        for combo, cand, pred, meas in rows:
            mark = "  <- pruned, measured under 25 %" if pred > MIN_PRUNE and meas < 0.25 else ""
            print(f"{combo:12} {cand:30} predicted {100 * pred:+4.0f} %  measured {100 * meas:+4.0f} %{mark}")
            errors.append(pred - meas)
    if errors:
        over = sorted(errors)
        print(f"\ngap error (predicted − measured), {len(errors)} pairs: median {100 * statistics.median(errors):+.0f} "
              f"points, median |error| {100 * statistics.median(map(abs, errors)):.0f}, 90th percentile "
              f"{100 * over[int(0.9 * (len(over) - 1))]:+.0f}, max {100 * over[-1]:+.0f}")


if __name__ == "__main__":
    main()
