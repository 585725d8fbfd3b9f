"""Live's memory by owner: one labelled row per device (the host, each GPU, each RPC worker's device), its bar
scaled to what THAT device holds, stacked weights / KV / compute / rest of server / other processes / free.

QPainter only: a few rectangles a second. A host of 24 GiB beside an RPC worker of 4 GiB must not make the
worker's bar a sliver on the host's scale, and each row names its device (pyqtgraph's category axis dropped
labels that did not fit and squeezed the bars into one row on a short panel).
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QSizePolicy, QToolTip, QVBoxLayout, QWidget

from llm_tuner.core.units import format_mib
from llm_tuner.services.telemetry.breakdown import MemorySegments

NO_FIGURES = "No memory figures yet"
SEGMENT_COLOURS = {"weights": "#1f77b4", "KV cache": "#2ca02c", "compute": "#ff7f0e", "rest of server": "#9467bd",
                   "other processes": "#7f7f7f", "free": "#b0b0b0"}


def row_text(s: MemorySegments) -> str:
    """The label above a device's bar: 'RPC1 (127.0.0.1:50052) — 3.10 GiB used of 4.00 GiB'."""
    used = sum(v for k, v in s.stacked() if k != "free")
    of = f" of {format_mib(s.capacity_mib)}" if s.capacity_mib else " (capacity unknown)"
    return f"{s.device} — {format_mib(used)} used{of}"


def row_tooltip(s: MemorySegments) -> str:
    return "\n".join([s.device, *(f"{k}: {format_mib(v)}" for k, v in s.stacked())])


class _Rows(QWidget):
    """The painted rows (inside MemoryBars' scroll area)."""

    LABEL_PX = 18
    BAR_PX = 16
    GAP_PX = 8

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.segments: list[MemorySegments] = []
        self.empty_text = NO_FIGURES  # what the rows say while there are none
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def row_px(self) -> int:
        return self.LABEL_PX + self.BAR_PX + self.GAP_PX

    def set_segments(self, segments: list[MemorySegments]) -> None:
        self.segments = list(segments)
        self.setFixedHeight(max(1, len(self.segments)) * self.row_px() + 4)
        self.update()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return QSize(400, max(1, len(self.segments)) * self.row_px() + 4)

    def rows(self) -> list[tuple[MemorySegments, QRectF, QRectF, float]]:
        """(segments, label rect, bar rect, MiB the full bar stands for) per device, top to bottom: each bar
        is scaled to its own device (its capacity, else the sum of its parts)."""
        out = []
        w = max(60.0, self.width() - 8.0)
        for i, s in enumerate(self.segments):
            y = 2 + i * self.row_px()
            scale = max(float(s.capacity_mib or 0), sum(v for _k, v in s.stacked()), 1.0)
            out.append((s, QRectF(4, y, w, self.LABEL_PX), QRectF(4, y + self.LABEL_PX, w, self.BAR_PX), scale))
        return out

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt override
        p = QPainter(self)
        pal = self.palette()
        fm = p.fontMetrics()
        if not self.segments:
            p.setPen(pal.mid().color())
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, self.empty_text)
        for s, label, bar, scale in self.rows():
            p.setPen(pal.windowText().color())
            p.drawText(label, Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                       fm.elidedText(row_text(s), Qt.TextElideMode.ElideMiddle, int(label.width())))
            x = bar.x()
            for name, v in s.stacked():
                seg = bar.width() * v / scale
                colour = QColor(SEGMENT_COLOURS[name])
                if name == "free":  # see-through: light on a light palette, dim on a dark one
                    colour.setAlpha(0x60)
                p.fillRect(QRectF(x, bar.y(), seg, bar.height()), colour)
                x += seg
            p.setPen(QPen(pal.mid().color()))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRect(bar)
        p.end()

    def event(self, ev) -> bool:  # Qt override: a row's figures on hover
        if ev.type() == QEvent.Type.ToolTip:
            for s, label, bar, _scale in self.rows():
                if label.united(bar).contains(QPointF(ev.pos())):
                    QToolTip.showText(ev.globalPos(), row_tooltip(s), self)
                    return True
            QToolTip.hideText()
            return True
        return super().event(ev)


class MemoryBars(QWidget):
    """Memory by owner: a legend, then one labelled row per device (scrolls when there are many)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.legend = QLabel("Memory by owner, each bar against its own device:  " + "  ".join(
            f"<span style='color:{c}'>■</span> {n}" for n, c in SEGMENT_COLOURS.items()))
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setWordWrap(True)
        self.rows = _Rows()
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(self.rows)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.legend)
        lay.addWidget(scroll, 1)
        self.last: list[MemorySegments] = []
        self.setMinimumHeight(90)

    def set_segments(self, segments: list[MemorySegments], *, empty_text: str = NO_FIGURES) -> None:
        """Show a row per device; none: `empty_text` says why (no figures yet, the server is gone)."""
        if empty_text != self.rows.empty_text:
            self.rows.empty_text = empty_text
            self.rows.update()
        if segments == self.last:
            return
        self.last = list(segments)
        self.rows.set_segments(self.last)
        # up to three rows in sight without scrolling (the splitter above gives the plots the rest)
        self.setMinimumHeight(self.legend.sizeHint().height() + min(max(1, len(self.last)), 3) * self.rows.row_px() + 8)
