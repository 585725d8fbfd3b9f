"""Scrolling a long form must not change its values: a drop-down or number box under the pointer takes the
mouse wheel only once it has been clicked (has focus); otherwise the wheel scrolls the page around it."""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt
from PySide6.QtWidgets import QAbstractScrollArea, QAbstractSpinBox, QComboBox, QWidget


class _WheelGuard(QObject):
    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if event.type() == QEvent.Type.Wheel and isinstance(obj, QWidget) and not obj.hasFocus():
            area = obj.parentWidget()
            while area is not None and not isinstance(area, QAbstractScrollArea):
                area = area.parentWidget()
            if area is not None:
                QCoreApplication.sendEvent(area.verticalScrollBar(), event)
            return True
        return False


_guard: _WheelGuard | None = None


def guard_wheel(root: QWidget) -> None:
    """Apply to every drop-down and number box under `root` (call after building it)."""
    global _guard
    if _guard is None:
        _guard = _WheelGuard()
    for w in [*root.findChildren(QComboBox), *root.findChildren(QAbstractSpinBox)]:
        w.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        w.installEventFilter(_guard)
