"""Benchmark plots: bars (median) with error bars (IQR) and per-repetition points; sweep lines.

`ErrorBarChart` is a pyqtgraph PlotWidget used by the Benchmarks and Compare panels;
`render_run_plots` draws a run's charts into PNG files for the Markdown report.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from llm_tuner.core.bench_report import metric_samples
from llm_tuner.core.bench_spec import BenchRun
from llm_tuner.core.stats import summarize
from llm_tuner.ui.plots import style_view

COLORS = ("#2e86de", "#e67e22", "#27ae60", "#8e44ad", "#c0392b", "#16a085")


class ErrorBarChart(pg.PlotWidget):
    """Grouped bars: one group per category, one bar per series; whiskers = IQR; dots = repetitions."""

    def __init__(self, parent=None, background=None, foreground=None) -> None:
        """Colours default to the palette's (see `follow_palette`); a report image passes "w" and "k"."""
        super().__init__(parent, background=background or pg.getConfigOption("background"))
        if foreground is not None:
            style_view(self, pg.mkColor(background or pg.getConfigOption("background")), pg.mkColor(foreground))
        self._ink = foreground
        self.setMinimumHeight(180)
        self.showGrid(y=True, alpha=0.3)
        self.setMouseEnabled(x=False, y=False)
        self.legend = self.addLegend(offset=(10, 5))
        self._series: list[tuple[str, list[list[float]]]] = []

    def set_data(self, categories: list[str], series: list[tuple[str, list[list[float]]]], y_label: str = "") -> None:
        """series: (name, values per category) - each value list holds the repetitions."""
        self.clear()
        if self.legend is not None:
            self.legend.clear()
        self._series = series
        n = max(1, len(series))
        width = 0.8 / n
        ink = self._ink or pg.getConfigOption("foreground")
        for si, (name, per_cat) in enumerate(series):
            color = COLORS[si % len(COLORS)]
            xs, heights, tops, bottoms, px, py = [], [], [], [], [], []
            for ci, values in enumerate(per_cat):
                s = summarize(values)
                if s is None:
                    continue
                x = ci - 0.4 + width * (si + 0.5)
                xs.append(x)
                heights.append(s.median)
                tops.append(s.q3 - s.median)
                bottoms.append(s.median - s.q1)
                px += [x] * len(values)
                py += list(values)
            if not xs:
                continue
            self.addItem(pg.BarGraphItem(x=xs, height=heights, width=width * 0.9, brush=pg.mkBrush(color + "b0"),
                                         pen=pg.mkPen(color), name=name))
            self.addItem(pg.ErrorBarItem(x=np.array(xs), y=np.array(heights), top=np.array(tops),
                                         bottom=np.array(bottoms), beam=width * 0.3, pen=pg.mkPen(ink, width=1.5)))
            self.addItem(pg.ScatterPlotItem(x=px, y=py, size=6, brush=pg.mkBrush(ink), pen=None))
        self.getAxis("bottom").setTicks([list(enumerate(categories))])
        self.setLabel("left", y_label)
        self.setXRange(-0.6, max(0.6, len(categories) - 0.4), padding=0)
        self.enableAutoRange(axis="y")


class SweepChart(pg.PlotWidget):
    """A metric's median against the swept values, with IQR error bars."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setMinimumHeight(180)
        self.showGrid(x=True, y=True, alpha=0.3)
        self.addLegend(offset=(10, 5))

    def set_data(self, values: list[str], series: list[tuple[str, list[list[float]]]], y_label: str = "") -> None:
        self.clear()
        for si, (name, per_value) in enumerate(series):
            color = COLORS[si % len(COLORS)]
            xs, ys, tops, bottoms = [], [], [], []
            for i, vals in enumerate(per_value):
                s = summarize(vals)
                if s is not None:
                    xs.append(i)
                    ys.append(s.median)
                    tops.append(s.q3 - s.median)
                    bottoms.append(s.median - s.q1)
            if xs:
                self.plot(xs, ys, pen=pg.mkPen(color, width=2), symbol="o", symbolBrush=color, name=name)
                self.addItem(pg.ErrorBarItem(x=np.array(xs), y=np.array(ys), top=np.array(tops),
                                             bottom=np.array(bottoms), beam=0.1, pen=pg.mkPen(color)))
        self.getAxis("bottom").setTicks([list(enumerate(values))])
        self.setLabel("left", y_label)


def run_chart_groups(runs: list[BenchRun]) -> list[tuple[str, str, list[str], list[tuple[str, list[list[float]]]]]]:
    """Chart contents for one or more runs: (title, unit, categories, series) for prefill, generation, TTFT."""
    samples = [metric_samples(r) for r in runs]
    out = []
    for prefix, title, unit in (("prefill_tps@", "Prefill", "t/s"), ("gen_tps@", "Generation", "t/s"),
                                ("ttft_ms@", "Time to first token", "ms")):
        cats = sorted({int(k.split("@")[1]) for s in samples for k in s if k.startswith(prefix)})
        if not cats:
            continue
        series = [(f"{r.id}: {r.label}", [list(s[f'{prefix}{c}'].values) if f"{prefix}{c}" in s else []
                                          for c in cats]) for r, s in zip(runs, samples, strict=True)]
        out.append((title, unit, [f"{c} tok" for c in cats], series))
    return out


def render_run_plots(run: BenchRun, out_dir: Path) -> list[tuple[str, str]]:
    """Draw a run's charts to PNG files in `out_dir`; returns (title, file name) pairs."""
    if QApplication.instance() is None:
        if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
            os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        render_run_plots._app = QApplication([])  # type: ignore[attr-defined]
    from pyqtgraph.exporters import ImageExporter

    out = []
    for title, unit, cats, series in run_chart_groups([run]):
        chart = ErrorBarChart(background="w", foreground="k")  # a file: black on white whatever the desktop
        chart.resize(640, 360)
        chart.setTitle(f"{title} ({unit}) - median, IQR, repetitions")
        chart.set_data(cats, series, unit)
        chart.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen, True)
        chart.show()
        QApplication.processEvents()
        name = f"run-{run.id}-{title.lower().replace(' ', '-')}.png"
        exporter = ImageExporter(chart.getPlotItem())
        exporter.parameters()["width"] = 640
        exporter.export(str(Path(out_dir) / name))
        chart.close()
        chart.deleteLater()
        out.append((title, name))
    return out
