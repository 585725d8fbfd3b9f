"""The Tune view's plot: the objective's score over the trials, pruned and failed candidates marked apart.

Measured trials are dots on a line of the best score so far; the baseline's score is a dashed line; pruned
trials (never launched) are grey crosses and failed ones red triangles, both just below the lowest score (they
have none); flagged trials (busy machine, throttling) are hollow. `render_tune_plot` draws it into a PNG for
the Markdown report.
"""

from __future__ import annotations

from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from llm_tuner.core.tune import Trial
from llm_tuner.ui.plots import style_view

MEASURED, FINAL, PRUNED, FAILED = "#2e86de", "#27ae60", "#7f8c8d", "#c0392b"


class TrialChart(pg.PlotWidget):
    """Score (higher is better) against the trial's number."""

    def __init__(self, parent=None, background=None, foreground=None) -> None:
        super().__init__(parent, background=background or pg.getConfigOption("background"))
        if foreground is not None:
            style_view(self, pg.mkColor(background or pg.getConfigOption("background")), pg.mkColor(foreground))
        self.setMinimumHeight(160)
        self.showGrid(x=True, y=True, alpha=0.3)
        self.setMouseEnabled(x=False, y=False)
        self.legend = self.addLegend(offset=(10, 5))
        if foreground is not None:
            self.legend.setLabelTextColor(foreground)
        self.setLabel("bottom", "trial")
        self.points: dict[str, list[tuple[int, float]]] = {}  # what is drawn, by kind (tests read it)

    def set_trials(self, trials: list[Trial], y_label: str = "score") -> None:
        self.clear()
        self.legend.clear()
        scores = [t.score for t in trials if t.score is not None]
        span = (max(scores) - min(scores)) if scores else 0.0
        floor = (min(scores) - 0.05 * (span or abs(min(scores)) or 1.0)) if scores else 0.0  # below every score
        kinds: dict[str, list[tuple[int, float]]] = {"measured": [], "flagged": [], "final": [], "pruned": [],
                                                     "failed": []}
        best, best_line = None, []
        for i, t in enumerate(trials, start=1):
            if t.status in ("pruned", "failed"):
                kinds[t.status].append((i, floor))
                continue
            if t.score is None:
                continue
            kind = "final" if t.status == "final" else ("flagged" if t.flagged else "measured")
            kinds[kind].append((i, t.score))
            best = t.score if best is None else max(best, t.score)
            best_line.append((i, best))
        self.points = kinds
        if best_line:
            self.plot([x for x, _ in best_line], [y for _, y in best_line], pen=pg.mkPen(MEASURED, width=1,
                      style=Qt.PenStyle.DotLine), name="best so far")
        baseline = next((t.score for t in trials if t.knob is None and t.score is not None), None)
        if baseline is not None:
            self.addItem(pg.InfiniteLine(pos=baseline, angle=0, pen=pg.mkPen(FINAL, style=Qt.PenStyle.DashLine)))
        styles = {"measured": ("o", MEASURED, True), "flagged": ("o", MEASURED, False), "final": ("s", FINAL, True),
                  "pruned": ("x", PRUNED, True), "failed": ("t", FAILED, True)}
        for kind, pts in kinds.items():
            if not pts:
                continue
            symbol, colour, filled = styles[kind]
            self.addItem(pg.ScatterPlotItem(x=[x for x, _ in pts], y=[y for _, y in pts], symbol=symbol, size=10,
                                            brush=pg.mkBrush(colour) if filled else pg.mkBrush(None),
                                            pen=pg.mkPen(colour, width=1.5), name=f"{kind} ({len(pts)})"))
        self.setLabel("left", y_label)
        step = max(1, len(trials) // 10)  # trial numbers are whole: at most ~10 ticks
        self.getAxis("bottom").setTickSpacing(step, step)


def render_tune_plot(trials: list[Trial], out_dir: Path, name: str, y_label: str = "score") -> list[tuple[str, str]]:
    """Draw the trial chart into `out_dir/name` (a PNG, black on white); returns [(title, file name)]."""
    from pyqtgraph.exporters import ImageExporter

    assert QApplication.instance() is not None, "the GUI draws report images"
    chart = TrialChart(background="w", foreground="k")
    chart.resize(720, 380)
    title = "Objective over trials (pruned ×, failed ▲)"
    chart.setTitle(title)
    chart.set_trials(trials, y_label)
    chart.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen, True)
    chart.show()
    QApplication.processEvents()
    exporter = ImageExporter(chart.getPlotItem())
    exporter.parameters()["width"] = 720
    exporter.export(str(Path(out_dir) / name))
    chart.close()
    chart.deleteLater()
    return [(title, name)]
