"""The Server menu's keyboard shortcuts, in one table: the main window's actions take them, and each panel
names its own button's shortcut in the button's tooltip (a panel never touches another's widgets)."""

from __future__ import annotations

from PySide6.QtWidgets import QAbstractButton

SHORTCUTS: dict[str, str] = {
    "launch": "F5",
    "stop": "Shift+F5",
    "test_prompt": "Ctrl+T",
    "benchmark": "Ctrl+B",
    "copy_command": "Ctrl+Shift+C",
}


def with_shortcut(button: QAbstractButton, action: str, tip: str = "") -> None:
    """`button`'s tooltip (or `tip`) followed by its menu action's shortcut, e.g. "... (F5)"."""
    button.setToolTip(f"{button.toolTip() or tip} ({SHORTCUTS[action]})")
