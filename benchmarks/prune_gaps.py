#!/usr/bin/env python3
"""How well the speed model predicts the gap between two candidates of a tune (what its pruning acts on).

Reads recorded `tune_vs_grid.py --cpu-space` outputs; in each unpruned tune ("tune without pruning") every measured
candidate is set against the same tune's baseline: predicted gap = 1 − predicted / baseline's predicted, measured
gap = 1 − measured / baseline's measured. The predicted gap is given twice: as the model said, and with the server's
per-token cost that a tune learns from its measured baseline (core.tune.prune.per_token_cost: 1/measured −
1/predicted of the baseline, added to every generation prediction) - what the pruning acts on. A candidate the
pruning drops (predicted, with that cost, more than MIN_PRUNE behind) whose measured gap is under 25 % is marked:
the model overstated a real but small gap. The summary counts, per threshold, the candidates it would drop and how
many of them measured under 25 % behind; then, per recorded unpruned tune, what today's rule (MIN_PRUNE with the
server's cost) would not start and whether the file's grid measured any of those within noise of its best (a tune's
absent K/V type is the grid's f16, absent threads its largest thread count: llama.cpp's default, the physical
cores, in these runs).

    python benchmarks/prune_gaps.py FILE... > benchmarks/results/tune_vs_grid/prune_gaps.txt
"""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

COMBO = re.compile(r"## (\w+) · depth (\d+)")
GRID = re.compile(r"grid (\{.*?\}): [\d.]+( \(within noise of the best\))?")
TRIAL = re.compile(r"  trial \d+ (\S+) (\{.*?\}): measured ([\d.]+) \(n=\d+\) · predicted ([\d.]+)")


def gaps(path: Path, with_tune: bool = False) -> list[tuple]:
    """(model · depth, candidate, predicted gap, predicted gap with the server's cost, measured gap) of every
    unpruned tune's measured candidate; `with_tune`: the tune's number within its combination after the first
    field."""
    from llm_tuner.core.tune.prune import per_token_cost, with_per_token_cost

    out: list[tuple] = []
    combo, free, base, tune = "", False, None, 0
    for line in path.read_text().splitlines():
        if m := COMBO.match(line):
            combo, tune = f"{m.group(1)} · {m.group(2)}", 0
        elif line.startswith("tune "):
            free, base = "without pruning" in line, None
            tune += free
        elif (m := TRIAL.match(line)) and free:
            measured, predicted = float(m.group(3)), float(m.group(4))
            if m.group(1) == "baseline":
                base = (measured, predicted)
            elif base is not None:
                cost = per_token_cost(base[1], base[0])
                costed = (with_per_token_cost(predicted, cost) or 0.0) / (with_per_token_cost(base[1], cost) or 1.0)
                row = (m.group(2), 1 - predicted / base[1], 1 - costed, 1 - measured / base[0])
                out.append((combo, tune, *row) if with_tune else (combo, *row))
    return out


def replay(path: Path, threshold: float) -> list[str]:
    """Per unpruned tune of the file: the candidates pruned beyond `threshold` with the server's cost, and those of
    them the grid measured within noise of its best."""
    import ast

    tunes: dict[tuple[str, int], list[tuple[str, float]]] = {}
    for c, tune, cand, _pred, costed, _meas in gaps(path, with_tune=True):
        tunes.setdefault((c, tune), []).append((cand, costed))
    cells: dict[str, tuple[set, list]] = {}
    combo = ""
    for line in path.read_text().splitlines():
        if m := COMBO.match(line):
            combo = f"{m.group(1)} · {m.group(2)}"
            cells[combo] = (set(), [])
        elif (m := GRID.match(line)) and combo:
            values = ast.literal_eval(m.group(1))
            cells[combo][1].append(int(values.get("t", 0) or 0))
            if m.group(2):
                cells[combo][0].add(tuple(sorted(values.items())))
    out = []
    for (c, tune), rows in tunes.items():
        within, threads = cells.get(c, (set(), []))
        default_t = str(max(threads)) if threads else None
        pruned = [cand for cand, costed in rows if costed > threshold]
        cell = {cand: ast.literal_eval(cand) for cand in pruned}  # the grid cell that runs the same command
        wrong = [cand for cand, v in cell.items()
                 if tuple(sorted({"kv": v.get("kv") or "f16", "t": v.get("t") or default_t}.items())) in within]
        said = (", ".join(wrong) or "none") if threads else "(no grid in this file)"
        out.append(f"{c:12} tune {tune}: not started {len(pruned)} of {len(rows)}: {', '.join(pruned) or 'none'}; "
                   f"of them within the grid's noise of its best: {said}")
    return out


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from llm_tuner.core.tune.prune import MIN_PRUNE

    missing = [n for n in sys.argv[1:] if not Path(n).is_file()]
    if missing or len(sys.argv) < 2:
        sys.exit("usage: prune_gaps.py FILE... (tune_vs_grid.py --cpu-space outputs)"
                 + (f"; not a file: {', '.join(missing)}" if missing else ""))
    rows = []
    for name in sys.argv[1:]:
        print(f"## {name}")
        for combo, cand, pred, costed, meas in gaps(Path(name)):
            mark = "  <- pruned, measured under 25 %" if costed > MIN_PRUNE and meas < 0.25 else ""
            print(f"{combo:12} {cand:30} predicted {100 * pred:+4.0f} % (with the server's cost {100 * costed:+4.0f} %)"
                  f"  measured {100 * meas:+4.0f} %{mark}")
            rows.append((pred, costed, meas))
    if rows:
        print()
        for label, k in (("as the model said", 0), ("with the server's cost", 1)):
            errors = sorted(r[k] - r[2] for r in rows)
            print(f"gap error (predicted − measured), {label}, {len(errors)} pairs: median "
                  f"{100 * statistics.median(errors):+.0f} points, median |error| "
                  f"{100 * statistics.median(map(abs, errors)):.0f}, 90th percentile "
                  f"{100 * errors[int(0.9 * (len(errors) - 1))]:+.0f}, max {100 * errors[-1]:+.0f}")
        for threshold in (0.20, 0.25, MIN_PRUNE):
            for label, k in (("as the model said", 0), ("with the server's cost", 1)):
                dropped = [r for r in rows if r[k] > threshold]
                print(f"pruned beyond {100 * threshold:.0f} % ({label}): {len(dropped)} of {len(rows)}; measured under "
                      f"25 % behind: {sum(1 for r in dropped if r[2] < 0.25)}")
        print(f"\n## today's rule (beyond {100 * MIN_PRUNE:.0f} % with the server's cost) on each recorded unpruned tune")
        for name in sys.argv[1:]:
            print(f"# {name}")
            print("\n".join(replay(Path(name), MIN_PRUNE)))


if __name__ == "__main__":
    main()
