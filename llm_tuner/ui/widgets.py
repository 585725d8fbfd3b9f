"""Small widgets shared by the panels."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QLabel, QSizePolicy


class ElidedLabel(QLabel):
    """One line of text that fits the width it gets and never asks for more: its middle part (a profile
    name) ends in "…" when needed, the parts around it stay whole; the full text is the tooltip.

    A long profile name must not widen its splitter pane, which would squeeze the form beside it.
    """

    def __init__(self, text: str = "") -> None:
        super().__init__()
        self._parts = ("", "", "")
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.set_parts(text)

    def full_text(self) -> str:
        return "".join(self._parts)

    def set_parts(self, start: str, middle: str = "", end: str = "") -> None:
        """Show start + middle + end; only `middle` is shortened when the line does not fit."""
        self._parts = (start, middle, end)
        self._elide()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return QSize(0, super().minimumSizeHint().height())

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        start, middle, end = self._parts
        metrics = self.fontMetrics()
        room = self.width() - metrics.horizontalAdvance(start + end)
        shown = start + metrics.elidedText(middle, Qt.TextElideMode.ElideRight, max(room, 0)) + end
        self.setText(shown)
        self.setToolTip(self.full_text() if shown != self.full_text() else "")
