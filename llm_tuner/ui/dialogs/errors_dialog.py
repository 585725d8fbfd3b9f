"""The Errors list: every failure of this session (qt.errors), newest first, with what to do and "Copy
details" (the selected one's traceback, for a bug report). Opened from Help ▸ Errors or the status bar's
count."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QHBoxLayout,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.qt.errors import ErrorCenter, Failure


class ErrorsDialog(QDialog):
    def __init__(self, center: ErrorCenter, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("errors_dialog")
        self.setWindowTitle("llm-tuner: errors")
        self.resize(760, 420)
        self.center = center
        self._shown: list[Failure] = []
        self.list = QListWidget()
        self.details = QPlainTextEdit()
        self.details.setReadOnly(True)
        self.details.setPlaceholderText("Nothing went wrong in this session.")
        self.copy_button = QPushButton("Copy details")
        self.copy_button.setToolTip("Copy the selected error with its details (for a bug report)")
        self.clear_button = QPushButton("Clear")
        self.clear_button.setToolTip("Forget the errors listed (the log file keeps them)")
        close_button = QPushButton("Close")
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.list)
        split.addWidget(self.details)
        buttons = QHBoxLayout()
        buttons.addWidget(self.copy_button)
        buttons.addWidget(self.clear_button)
        buttons.addStretch(1)
        buttons.addWidget(close_button)
        lay = QVBoxLayout(self)
        lay.addWidget(split, 1)
        lay.addLayout(buttons)
        self.list.currentRowChanged.connect(self._on_list_current_row_changed)
        self.copy_button.clicked.connect(self.copy_details)
        self.clear_button.clicked.connect(self._on_clear_clicked)
        close_button.clicked.connect(self.hide)
        self.reload()

    def reload(self) -> None:
        """Show the center's failures, newest first (the newest selected)."""
        self._shown = list(reversed(self.center.failures()))
        self.list.clear()
        for f in self._shown:
            when = time.strftime("%H:%M:%S", time.localtime(f.time_unix))
            self.list.addItem(QListWidgetItem(f"{when}  {f.what} failed: {f.message}"))
        if self._shown:
            self.list.setCurrentRow(0)
        else:
            self.details.clear()
        self.copy_button.setEnabled(bool(self._shown))
        self.clear_button.setEnabled(bool(self._shown))

    def selected(self) -> Failure | None:
        row = self.list.currentRow()
        return self._shown[row] if 0 <= row < len(self._shown) else None

    def copy_details(self) -> None:
        f = self.selected()
        if f is not None:
            QGuiApplication.clipboard().setText(f.details_text())

    def _on_list_current_row_changed(self, _row: int) -> None:
        f = self.selected()
        self.details.setPlainText(f"{f.summary()}\n\n{f.details}" if f is not None else "")

    def _on_clear_clicked(self) -> None:
        self.center.clear()
        self.reload()
