"""The predicted generation speed against the depth already in the cache (the Plan's small curve)."""

from __future__ import annotations

import pyqtgraph as pg

CURVE_COLOR = "#2e86de"


class SpeedCurve(pg.PlotWidget):
    """Generation t/s (y) against the tokens already in the cache (x), with the expected error as a band."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setMinimumHeight(120)
        self.setMaximumHeight(170)
        self.showGrid(x=True, y=True, alpha=0.3)
        self.setMouseEnabled(x=False, y=False)
        self.hideButtons()
        self.setLabel("left", "gen t/s")
        self.setLabel("bottom", "tokens in the cache")
        self.points: list[tuple[int, float]] = []

    def set_curve(self, points: list[tuple[int, float]], error: float | None = None) -> None:
        self.clear()
        self.points = list(points)
        if not points:
            return
        xs = [float(x) for x, _ in points]
        ys = [y for _, y in points]
        if error:
            lo = self.plot(xs, [y * (1 - error) for y in ys], pen=None)
            hi = self.plot(xs, [y * (1 + error) for y in ys], pen=None)
            self.addItem(pg.FillBetweenItem(lo, hi, brush=pg.mkBrush(46, 134, 222, 40)))
        self.plot(xs, ys, pen=pg.mkPen(CURVE_COLOR, width=2))
        self.setYRange(0, max(ys) * (1 + (error or 0)) * 1.05, padding=0)
        self.setXRange(0, max(xs), padding=0.02)
