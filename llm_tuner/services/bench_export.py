"""Export a benchmark run: JSON (everything), CSV (one row per repetition), Markdown report with PNGs.

The PNG plots come from a renderer the caller passes (ui/plots draws them; services never import Qt).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llm_tuner.core.bench_report import (
    REP_CSV_FIELDS,
    compare_report_markdown,
    rep_rows,
    report_markdown,
    run_to_json,
)
from llm_tuner.core.bench_spec import BenchRun

PlotRenderer = Callable[[BenchRun, Path], list[tuple[str, str]]]


def export_run(run: BenchRun, out_dir: Path, fmt: str, plots: PlotRenderer | None = None) -> Path:
    """Write run `run` to `out_dir` as `run-<id>.<md|csv|json>` (plus PNGs for md); returns the file."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"run-{run.id}"
    if fmt == "json":
        path = out_dir / f"{stem}.json"
        path.write_text(json.dumps(run_to_json(run), indent=2, default=str), encoding="utf-8")
    elif fmt == "csv":
        path = out_dir / f"{stem}.csv"
        with path.open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=REP_CSV_FIELDS)
            w.writeheader()
            w.writerows(rep_rows(run))
    elif fmt == "md":
        images = []
        if plots is not None:
            try:
                images = plots(run, out_dir)
            except Exception as exc:  # noqa: BLE001 - the report is still useful without plots
                images = []
                note = f"(plots could not be drawn: {exc})"
            else:
                note = ""
        else:
            note = ""
        path = out_dir / f"{stem}.md"
        path.write_text(report_markdown(run, images) + (f"\n{note}\n" if note else ""), encoding="utf-8")
    else:
        raise ValueError(f"unknown export format {fmt!r}: use md, csv or json")
    return path


def export_comparison(a: BenchRun, b: BenchRun, data: dict[str, Any], out_dir: Path, fmt: str = "md") -> Path:
    """Write the comparison of B against A (`data`: as `runs compare --json` prints it) to `out_dir` as
    `compare-<a>-<b>.md` (core.bench_report.compare_report_markdown, the hardware included) or `.json`."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"compare-{a.id}-{b.id}"
    if fmt == "json":
        path = out_dir / f"{stem}.json"
        path.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    elif fmt == "md":
        path = out_dir / f"{stem}.md"
        path.write_text(compare_report_markdown(a, b, data) + "\n", encoding="utf-8")
    else:
        raise ValueError(f"unknown comparison format {fmt!r}: use md or json")
    return path
