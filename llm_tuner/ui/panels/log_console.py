"""LogConsole: the server's output with a level filter and search; bounded so hours of -lv 4 stay light."""

from __future__ import annotations

from collections import deque

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

LEVEL_ORDER = {"error": 0, "warn": 1, "info": 2, "output": 2, "cont": 2, "debug": 3}
FILTERS = (("Errors", 0), ("Warnings and errors", 1), ("Info", 2), ("Everything", 3))
MARK = {"error": "E", "warn": "W", "info": "I", "debug": "D", "output": " ", "cont": " "}


class LogConsole(QWidget):
    def __init__(self, parent: QWidget | None = None, max_lines: int = 20_000) -> None:
        super().__init__(parent)
        self.lines: deque = deque(maxlen=max_lines)
        self.level = QComboBox()
        for text, value in FILTERS:
            self.level.addItem(text, value)
        self.level.setCurrentIndex(3)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search the log (text)")
        self.search.setClearButtonEnabled(True)
        self.follow = QCheckBox("Follow")
        self.follow.setChecked(True)
        self.count = QLabel()
        self.count.setToolTip(f"Lines received from the server (the newest {max_lines:,} are kept)")
        # room for the largest count, so the label is never clipped and the row does not shift as it grows
        self.count.setMinimumWidth(self.count.fontMetrics().horizontalAdvance(f"{max_lines} lines") + 8)
        self.count.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setMaximumBlockCount(max_lines)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.text.setPlaceholderText("The server's output appears here once it starts.")
        font = self.text.font()
        font.setFamily("monospace")
        self.text.setFont(font)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 6, 0)  # the line count clear of the dock edge
        top.addWidget(QLabel("Show:"))
        top.addWidget(self.level)
        top.addWidget(self.search, 1)
        top.addWidget(self.follow)
        top.addWidget(self.count)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(top)
        lay.addWidget(self.text)
        self.level.currentIndexChanged.connect(self._on_filter_changed)
        self.search.textChanged.connect(self._on_filter_changed)

    def _visible(self, line) -> bool:
        if LEVEL_ORDER.get(line.level, 2) > self.level.currentData():
            return False
        needle = self.search.text()
        return not needle or needle.lower() in line.text.lower()

    @staticmethod
    def _format(line) -> str:
        return f"{MARK.get(line.level, ' ')} {line.text}"

    def append_lines(self, lines: list) -> None:
        self.lines.extend(lines)
        shown = [self._format(x) for x in lines if self._visible(x)]
        if shown:
            self.text.appendPlainText("\n".join(shown))
            if self.follow.isChecked():
                self._scroll_to_newest()
        self.count.setText(f"{len(self.lines)} lines")

    def _scroll_to_newest(self) -> None:
        """Show the newest line, scrolled to the left: moving the cursor to the end would scroll sideways to
        the end of the last long line and hide the start of every line."""
        bar = self.text.verticalScrollBar()
        bar.setValue(bar.maximum())
        self.text.horizontalScrollBar().setValue(0)

    def clear(self) -> None:
        self.lines.clear()
        self.text.clear()
        self.count.setText("")

    def shown_text(self) -> str:
        return self.text.toPlainText()

    def _on_filter_changed(self, *_args) -> None:
        self.text.setPlainText("\n".join(self._format(x) for x in self.lines if self._visible(x)))
        self._scroll_to_newest()
