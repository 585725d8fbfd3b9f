"""The Tune view's plot: the objective's score over the trials, pruned and failed candidates marked apart.

What is drawn where is core.tune.trial_points (the report's SVG draws the same points): measured trials are
dots on a line of the best score so far, the baseline's score a dashed line, pruned trials grey crosses and
failed ones red triangles just below the lowest score, flagged trials hollow.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt

from llm_tuner.core.tune import Trial, trial_points
from llm_tuner.core.tune.trial_plot import FAILED, FINAL, MEASURED, PRUNED
from llm_tuner.ui.plots import style_view


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
        pts = trial_points(trials)
        self.points = pts.kinds
        if pts.best_line:
            self.plot([x for x, _ in pts.best_line], [y for _, y in pts.best_line],
                      pen=pg.mkPen(MEASURED, width=1, style=Qt.PenStyle.DotLine), name="best so far")
        if pts.baseline is not None:
            self.addItem(pg.InfiniteLine(pos=pts.baseline, angle=0, pen=pg.mkPen(FINAL, style=Qt.PenStyle.DashLine)))
        styles = {"measured": ("o", MEASURED, True), "flagged": ("o", MEASURED, False), "final": ("s", FINAL, True),
                  "pruned": ("x", PRUNED, True), "failed": ("t", FAILED, True)}
        for kind, points in pts.kinds.items():
            if not points:
                continue
            symbol, colour, filled = styles[kind]
            self.addItem(pg.ScatterPlotItem(x=[x for x, _ in points], y=[y for _, y in points], symbol=symbol,
                                            size=10, brush=pg.mkBrush(colour) if filled else pg.mkBrush(None),
                                            pen=pg.mkPen(colour, width=1.5), name=f"{kind} ({len(points)})"))
        self.setLabel("left", y_label)
        step = max(1, len(trials) // 10)  # trial numbers are whole: at most ~10 ticks
        self.getAxis("bottom").setTickSpacing(step, step)
