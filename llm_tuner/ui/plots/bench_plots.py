"""Benchmark plots: bars (median) with error bars (IQR) and per-repetition points; sweep lines.

`ErrorBarChart` is a pyqtgraph PlotWidget used by the Benchmarks and Compare panels, shown through a
`HintStack` (a centred hint until there is data); `render_run_plots` draws a run's charts into PNG files
for the Markdown report.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from pyqtgraph.exporters import ImageExporter
from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication, QLabel, QStackedWidget, QVBoxLayout, QWidget

from llm_tuner.core.bench_report import metric_samples
from llm_tuner.core.bench_spec import BenchRun
from llm_tuner.core.stats import summarize
from llm_tuner.ui.plots import style_view

COLORS = ("#2e86de", "#e67e22", "#27ae60", "#8e44ad", "#c0392b", "#16a085")


class HintStack(QStackedWidget):
    """`content` once there is something to show; before that (or when there is nothing) a centred hint
    instead of empty axes."""

    def __init__(self, content: QWidget, hint: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.hint = QLabel(hint)
        self.hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.hint.setWordWrap(True)
        self.hint.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.content = content
        self.addWidget(self.hint)
        self.addWidget(content)

    def show_content(self, shown: bool, hint: str | None = None) -> None:
        if hint is not None:
            self.hint.setText(hint)
        self.setCurrentWidget(self.content if shown else self.hint)

    def showing_content(self) -> bool:
        return self.currentWidget() is self.content

    @classmethod
    def chart_with_picker(cls, picker: QWidget, chart: QWidget, hint: str) -> HintStack:
        """A chart under the drop-down that picks what it shows, behind `hint` until there is data."""
        box = QWidget()
        lay = QVBoxLayout(box)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(picker)
        lay.addWidget(chart, 1)
        return cls(box, hint)


class ErrorBarChart(pg.PlotWidget):
    """Grouped bars: one group per category, one bar per series; whiskers = IQR; dots = repetitions."""

    def __init__(self, parent=None, background=None, foreground=None) -> None:
        """Colours default to the palette's (see `follow_palette`); a report image passes "w" and "k"."""
        super().__init__(parent, background=background or pg.getConfigOption("background"))
        if foreground is not None:
            style_view(self, pg.mkColor(background or pg.getConfigOption("background")), pg.mkColor(foreground))
        self._ink = foreground
        self.setMinimumHeight(120)  # on a 768-pixel screen the tables above it come first
        self.showGrid(y=True, alpha=0.3)
        self.setMouseEnabled(x=False, y=False)
        self.legend = self.addLegend(offset=(10, 5))  # top left, in room kept free above the data
        if foreground is not None:
            self.legend.setLabelTextColor(foreground)
        self._series: list[tuple[str, list[list[float]]]] = []
        self._y_max = 0.0
        self.getViewBox().sigResized.connect(self._fit_y_range)

    def set_data(self, categories: list[str], series: list[tuple[str, list[list[float]]]], y_label: str = "") -> None:
        """series: (name, values per category) - each value list holds the repetitions."""
        self.clear()
        self.legend.clear()
        self._series = series
        width = 0.8 / max(1, len(series))
        ink = self._ink or pg.getConfigOption("foreground")
        y_max = 0.0
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
                y_max = max(y_max, s.q3, *values)
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
        self._y_max = y_max
        self._fit_y_range()

    def _fit_y_range(self, *_args) -> None:
        """Bars start at 0; above the highest bar, whisker or dot the range keeps room for the legend (one row
        when it fits the width), so the legend never covers data. Again on every resize."""
        vb, legend = self.getViewBox(), self.legend
        legend.setColumnCount(max(1, len(legend.items)))
        if legend.width() > vb.width() - 20:
            legend.setColumnCount(1)
        need = legend.height() + 10 if legend.items else 0.0  # pixels: the offset above, a gap below
        share = 1.0 - need / vb.height() if vb.height() > 0 else 0.75  # of the height left to the data
        top = 1.05 * (self._y_max or 1.0) / max(share, 0.4)
        below = 8.0 / vb.height() if vb.height() > 0 else 0.03  # 8 pixels below 0: room for the axis's "0"
        self.setYRange(-below * top, top, padding=0)


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


def run_chart_groups(runs: list[BenchRun], names: list[str] | None = None,
                     ) -> list[tuple[str, str, list[str], list[tuple[str, list[list[float]]]]]]:
    """Chart contents for one or more runs: (title, unit, categories, series) for prefill, generation,
    TTFT. A series is named by `names` (one per run), else "id: label"."""
    names = names or [f"{r.id}: {r.label}" for r in runs]
    samples = [metric_samples(r) for r in runs]
    out = []
    for prefix, title, unit in (("prefill_tps@", "Prefill", "t/s"), ("gen_tps@", "Generation", "t/s"),
                                ("ttft_ms@", "Time to first token", "ms")):
        cats = sorted({int(k.split("@")[1]) for s in samples for k in s if k.startswith(prefix)})
        if not cats:
            continue
        series = [(name, [list(s[f'{prefix}{c}'].values) if f"{prefix}{c}" in s else [] for c in cats])
                  for name, s in zip(names, samples, strict=True)]
        out.append((title, unit, [f"{c} tok" for c in cats], series))
    return out


def render_run_plots(run: BenchRun, out_dir: Path) -> list[tuple[str, str]]:
    """Draw a run's charts to PNG files in `out_dir`; returns (title, file name) pairs."""
    if QApplication.instance() is None:
        if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
            os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        render_run_plots._app = QApplication([])  # type: ignore[attr-defined]

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
