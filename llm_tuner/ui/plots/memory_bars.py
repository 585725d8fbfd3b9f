"""Painted widgets for the memory plan: stacked bars per device, and a draggable tensor-split bar.

QPainter only (no pyqtgraph): a handful of rectangles repainted when the plan changes.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from llm_tuner.core.memory import DeviceMemory
from llm_tuner.core.units import format_mib

# what must be resident (weights, KV, compute, output, runtime), then weights mapped from the file (evictable)
PARTS = (("Weights", "#4C78A8"), ("KV cache", "#F58518"), ("Compute", "#54A24B"), ("Output", "#B279A2"),
         ("Runtime", "#9D9D9D"), ("Mapped weights (page cache)", "#A9C4E0"),
         ("Prompt cache (grows while serving)", "#E6D3A3"))


def segments(d: DeviceMemory) -> list[tuple[str, float]]:
    """(part, MiB) in drawing order: the resident parts, then the mapped weights the kernel may evict, then
    what the host's prompt cache may grow to (--cache-ram)."""
    return [("Weights", d.model_mib - d.mapped_mib), ("KV cache", d.kv_mib), ("Compute", d.compute_mib),
            ("Output", d.output_mib), ("Runtime", d.overhead_mib), ("Mapped weights (page cache)", d.mapped_mib),
            ("Prompt cache (grows while serving)", d.prompt_cache_mib)]


def bar_text(d: DeviceMemory) -> str:
    """The figure beside a bar: what must be resident (and what is mapped) against the budget."""
    if d.budget_mib is None:
        cap = "of ? (size unknown)"
    elif d.reserved_all:
        cap = f"of 0 MiB ({format_mib(d.capacity_mib)} total, all reserved by the {d.backend} driver)"
    else:  # the bar is compared with free memory when it is known, else with the capacity
        cap = f"of {format_mib(d.budget_mib)} {'free' if d.available_mib is not None else 'total'}"
    cache = f" + {format_mib(d.prompt_cache_mib)} prompt cache" if d.prompt_cache_mib else ""
    if d.mapped_mib:
        return f"{format_mib(d.resident_mib)} + {format_mib(d.mapped_mib)} mapped{cache} {cap}"
    return f"{format_mib(d.resident_mib)}{cache} {cap}"


class MemoryBarsWidget(QWidget):
    """One horizontal stacked bar per device (weights / KV / compute / output / runtime, then the weights
    mapped from the file, lighter: they may live in the page cache) against its budget."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._devices: tuple[DeviceMemory, ...] = ()
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Minimum)
        self.setMinimumHeight(80)

    def set_devices(self, devices: tuple[DeviceMemory, ...]) -> None:
        self._devices = tuple(devices)
        self.setMinimumHeight(30 + 46 * max(1, len(self._devices)))
        self.updateGeometry()
        self.update()

    def devices(self) -> tuple[DeviceMemory, ...]:
        return self._devices

    @staticmethod
    def _name(d: DeviceMemory) -> str:
        return d.name + (" *" if d.hypothetical else "")

    def columns(self) -> tuple[int, int, int, int]:
        """(name width, bar x, bar width, figure width): the name and the figure beside the bars as wide as
        their longest text, the figure never wider than half the widget (then elided: the tooltip has it
        whole)."""
        fm = self.fontMetrics()
        label_w = max([90, *(fm.horizontalAdvance(self._name(d)) + 6 for d in self._devices)])
        text_w = min(max([200, *(fm.horizontalAdvance(bar_text(d)) + 6 for d in self._devices)]),
                     max(200, self.width() // 2))
        bar_x = label_w + 8
        bar_w = max(50, self.width() - bar_x - text_w - 8)
        return label_w, bar_x, bar_w, max(40, self.width() - bar_x - bar_w - 8)

    def drawn_texts(self) -> list[str]:
        """The figure beside each bar as drawn (elided when the widget is too narrow for it)."""
        text_w = self.columns()[3]
        return [self.fontMetrics().elidedText(bar_text(d), Qt.TextElideMode.ElideRight, text_w) for d in self._devices]

    def event(self, ev) -> bool:  # Qt override: every device's figure, whole, on hover
        if ev.type() == QEvent.Type.ToolTip and self._devices:
            QToolTip.showText(ev.globalPos(), "\n".join(f"{self._name(d)}: {bar_text(d)}" for d in self._devices), self)
            return True
        return super().event(ev)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return QSize(520, 30 + 46 * max(1, len(self._devices)))

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt override
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        text = pal.windowText().color()
        p.setFont(QFont(self.font()))
        label_w, bar_x, bar_w, text_w = self.columns()
        y = 6
        for d, figure in zip(self._devices, self.drawn_texts(), strict=True):
            budget = d.budget_mib or 0
            scale_mib = max(budget, d.total_mib, 1.0)
            p.setPen(text)
            p.drawText(QRectF(0, y, label_w, 28), Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                       self._name(d))
            p.setPen(QPen(pal.mid().color()))
            p.setBrush(pal.base())
            p.drawRect(QRectF(bar_x, y, bar_w, 28))
            x = float(bar_x)
            colors = dict(PARTS)
            # no size: the parts only, faint (a full bar would read "full")
            p.setOpacity(1.0 if budget else 0.35)
            for label, v in segments(d):
                if v <= 0:
                    continue
                seg = bar_w * v / scale_mib
                p.setPen(Qt.PenStyle.NoPen)
                p.setBrush(QColor(colors[label]))
                p.drawRect(QRectF(x, y + 1, seg, 26))
                x += seg
            p.setOpacity(1.0)
            if budget:
                bx = bar_x + bar_w * budget / scale_mib
                p.setPen(QPen(QColor("#D62728") if d.fits is False else text, 2))
                p.drawLine(QPointF(bx, y - 2), QPointF(bx, y + 30))
            p.setPen(QColor("#D62728") if d.fits is False else text)
            p.drawText(QRectF(bar_x + bar_w + 8, y, text_w, 28), Qt.AlignmentFlag.AlignVCenter, figure)
            y += 46
        if not self._devices:
            p.setPen(pal.mid().color())
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "No plan yet")
        # legend
        x = float(bar_x)
        ly = self.height() - 18
        for label, color in PARTS:
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(QColor(color))
            p.drawRect(QRectF(x, ly + 3, 10, 10))
            p.setPen(text)
            p.drawText(QPointF(x + 14, ly + 12), label)
            x += 14 + p.fontMetrics().horizontalAdvance(label) + 14
        p.end()


class SplitBarWidget(QWidget):
    """The tensor split as one bar cut into device shares; drag a boundary to move layers between devices.

    Emits `split_edited(tuple[float, ...])` (percentages summing to 100) when a drag ends.
    """

    split_edited = Signal(object)
    COLORS = ("#4C78A8", "#F58518", "#54A24B", "#B279A2", "#E45756", "#72B7B2")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._names: list[str] = []
        self._shares: list[float] = []
        self._drag: int | None = None
        self.setMinimumHeight(44)
        self.setMouseTracking(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set_split(self, names: list[str], shares: list[float]) -> None:
        total = sum(shares) or 1.0
        self._names = list(names)
        self._shares = [100.0 * s / total for s in shares]
        self.update()

    def shares(self) -> tuple[float, ...]:
        return tuple(round(s, 1) for s in self._shares)

    def _bar(self) -> QRectF:
        return QRectF(4, 4, max(10, self.width() - 8), 28)

    def _boundaries(self) -> list[float]:
        r = self._bar()
        out, acc = [], 0.0
        for s in self._shares[:-1]:
            acc += s
            out.append(r.left() + r.width() * acc / 100)
        return out

    def boundary_x(self, i: int) -> float:
        return self._boundaries()[i]

    def mousePressEvent(self, e) -> None:  # noqa: N802 - Qt override
        x = e.position().x()
        for i, bx in enumerate(self._boundaries()):
            if abs(bx - x) <= 6:
                self._drag = i
                return

    def mouseMoveEvent(self, e) -> None:  # noqa: N802 - Qt override
        x = e.position().x()
        near = any(abs(bx - x) <= 6 for bx in self._boundaries())
        self.setCursor(Qt.CursorShape.SplitHCursor if near or self._drag is not None else Qt.CursorShape.ArrowCursor)
        if self._drag is None:
            return
        r = self._bar()
        i = self._drag
        left = sum(self._shares[:i])
        pair = self._shares[i] + self._shares[i + 1]
        pos = min(max((x - r.left()) / r.width() * 100, left + 1), left + pair - 1)
        self._shares[i] = pos - left
        self._shares[i + 1] = pair - self._shares[i]
        self.update()

    def mouseReleaseEvent(self, e) -> None:  # noqa: N802 - Qt override
        if self._drag is not None:
            self._drag = None
            self.split_edited.emit(self.shares())

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt override
        p = QPainter(self)
        r = self._bar()
        x = r.left()
        for i, (name, s) in enumerate(zip(self._names, self._shares, strict=False)):
            w = r.width() * s / 100
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(QColor(self.COLORS[i % len(self.COLORS)]))
            p.drawRect(QRectF(x, r.top(), w, r.height()))
            p.setPen(QColor("white"))
            p.drawText(QRectF(x, r.top(), w, r.height()), Qt.AlignmentFlag.AlignCenter, f"{name} {s:.0f}%")
            x += w
        p.setPen(QPen(self.palette().windowText().color(), 3))
        for bx in self._boundaries():
            p.drawLine(QPointF(bx, r.top() - 2), QPointF(bx, r.bottom() + 2))
        p.end()
