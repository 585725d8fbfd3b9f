"""The Profile editor's All flags section: how long building its fields keeps the window from answering.

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/all_flags_build.py [--runs 5]

Opens the section in a real ProfilePanel (1400x900) as a user's click does and measures, per run: the whole
build (click to `built`), its longest slice, and the longest gap of a 5 ms timer over the build (the longest the
event loop did not answer: the slices plus the layout of each group as it is shown). Target: no gap over
~100 ms. Appends one block to benchmarks/results/all_flags_build/all_flags_build.txt.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from llm_tuner.core.settings import Settings
    from llm_tuner.qt.context import AppContext
    from llm_tuner.store.db import open_engine
    from llm_tuner.ui.panels.profile_panel import ProfilePanel

    app = QApplication.instance() or QApplication(sys.argv[:1])
    rows = []
    for _ in range(args.runs):
        ctx = AppContext(settings=Settings(), engine=open_engine(Path(tempfile.mkdtemp()) / "b.sqlite"))
        panel = ProfilePanel(ctx)
        panel.resize(1400, 900)
        panel.show()
        for _ in range(20):
            app.processEvents()
        section = panel.all_flags
        gaps: list[float] = []
        last = [time.perf_counter()]

        def tick(gaps=gaps, last=last) -> None:
            now = time.perf_counter()
            gaps.append((now - last[0]) * 1000)
            last[0] = now

        timer = QTimer()
        timer.setInterval(5)
        timer.timeout.connect(tick)
        done: list[bool] = []
        section.built.connect(lambda done=done: done.append(True))
        timer.start()
        last[0] = time.perf_counter()
        section.toggle_button.click()
        while not done:
            app.processEvents()
        end = time.perf_counter() + 0.3  # the layout of the last group shown
        while time.perf_counter() < end:
            app.processEvents()
        timer.stop()
        rows.append((section.build_ms, section.build_slice_ms, max(gaps), len(section.editors)))
        panel.close()
        panel.deleteLater()
        app.processEvents()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")  # shared machines: say how busy
    lines = [f"# {time.strftime('%Y-%m-%d %H:%M')} {platform.node()} {os.cpu_count()} cores (load {load:.1f}), "
             f"{os.environ['QT_QPA_PLATFORM']}, {args.runs} runs, {rows[0][3]} generated fields",
             "build_ms  longest_slice_ms  longest_gap_ms"]
    lines += [f"{b:8.0f}  {s:16.0f}  {g:14.0f}" for b, s, g, _n in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    out = ROOT / "benchmarks" / "results" / "all_flags_build" / "all_flags_build.txt"
    with out.open("a", encoding="utf-8") as fh:
        fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
