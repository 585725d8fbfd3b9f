"""Plot a sweep recorded by `llm-tuner sweep --json` (e.g. on the GPU machine, which has no Qt) as a PNG.

    .venv/bin/python benchmarks/plot_sweep.py benchmarks/sessions/2026-11-29-h200/sweep-ts.json \
        --out benchmarks/results/plot_sweep/sweep-ts.png

Uses the app's own SweepChart (median per value, IQR error bars), one panel per metric.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep_json", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication, QVBoxLayout, QWidget

    from llm_tuner.ui.plots.bench_plots import SweepChart

    app = QApplication.instance() or QApplication([])
    data = json.loads(args.sweep_json.read_text())
    values = [str(v) for v in data["values"]]
    runs = {str(r["sweep_value"]): r for r in data["runs"]}
    panel = QWidget()
    layout = QVBoxLayout(panel)
    for key, title, unit in (("predicted_per_second", "Generation", "t/s"), ("prompt_per_second", "Prefill", "t/s"),
                             ("ttft_ms", "Time to first token", "ms")):
        prompt_lens = sorted({rep["prompt_tokens"] for r in data["runs"] for rep in r["reps"]})
        series = [(f"prompt {n} tok", [[rep[key] for rep in runs[v]["reps"] if rep["prompt_tokens"] == n
                                        and rep.get(key) is not None] if v in runs else [] for v in values])
                  for n in prompt_lens]
        chart = SweepChart()
        chart.setTitle(f"{title} ({unit}) vs {data['param']}: median and IQR, {len(runs[values[0]]['reps'])} reps")
        chart.set_data(values, series, unit)
        layout.addWidget(chart)
    panel.resize(900, 900)
    panel.show()
    app.processEvents()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    panel.grab().save(str(args.out))
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
