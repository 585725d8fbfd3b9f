"""pyqtgraph plots and painted charts used by the panels.

Plots take their colours from the application palette (`follow_palette`), so they match a light or a
dark desktop and change with it; report images drawn for files stay black on white.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QWidget


def plot_colours() -> tuple[QColor, QColor]:
    """(background, foreground) for plots: the palette's Base and Text colours."""
    pal = QApplication.palette()
    return pal.color(QPalette.ColorRole.Base), pal.color(QPalette.ColorRole.Text)


def style_view(view: pg.GraphicsView, background: QColor, foreground: QColor) -> None:
    """Give one plot widget (PlotWidget or GraphicsLayoutWidget) these colours, axes and titles included."""
    view.setBackground(background)
    items = view.scene().items() if view.scene() is not None else []
    for item in items:
        if isinstance(item, pg.AxisItem):
            item.setPen(foreground)
            item.setTextPen(foreground)
        elif isinstance(item, pg.LabelItem):
            item.setText(item.text, color=foreground)


def follow_palette(root: QWidget | None = None) -> None:
    """Make new plots use the palette's colours and restyle the existing ones under `root`."""
    background, foreground = plot_colours()
    pg.setConfigOptions(background=background, foreground=foreground)
    if root is not None:
        for view in root.findChildren(pg.GraphicsView):
            style_view(view, background, foreground)
