"""LogConsole: the server's output with a level filter and search; bounded and lean so hours of -lv 4 stay
light.

The lines are a one-column table over the newest `max_lines` LogLines (a ring), rows of a fixed height: the
view draws only the rows on screen and keeps nothing per line (a QListView relaid out every row on each
batch: 40 ms at 20,000 lines). A QPlainTextEdit kept each shown line's text layout once painted (about
6 KiB a line: 125 MiB at 20,000 lines); here a line costs its LogLine (about 0.3-0.5 KiB). Lines are
selectable; Ctrl+C copies the selected ones.
"""

from __future__ import annotations

from collections import deque

from PySide6.QtCore import QAbstractListModel, Qt
from PySide6.QtGui import QFontDatabase, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.qt.request_table_model import extend_ring
from llm_tuner.state.live_views import LOG_FILTERS, LogLines, format_line

_DISPLAY = int(Qt.ItemDataRole.DisplayRole)


class LogLinesModel(QAbstractListModel):
    """The shown lines (those that pass the filter), newest last, at most `max_lines`; text made when
    painted."""

    def __init__(self, parent=None, max_lines: int = 20_000) -> None:
        super().__init__(parent)
        self.max_lines = max_lines
        self.rows: deque = deque(maxlen=max_lines)
        # the longest line shown so far: the column's width, for the horizontal scroll bar
        self.width_chars = 0

    def rowCount(self, parent=None) -> int:  # noqa: N802 - Qt override
        return 0 if parent is not None and parent.isValid() else len(self.rows)

    def data(self, index, role=_DISPLAY):
        # asked for ~7 roles per line on each repaint: the role compared as an int (a PySide enum compare ~1
        # µs)
        if int(role) != _DISPLAY or index.row() < 0:
            return None
        return format_line(self.rows[index.row()])

    def extend(self, lines: list) -> None:
        """Append a batch: one insert, and one removal of the oldest rows when the ring is full."""
        if not lines:
            return
        lines = lines[-self.max_lines:]
        self.width_chars = max(self.width_chars, max(len(x.text) for x in lines) + 2)
        extend_ring(self, self.rows, lines, self.max_lines)

    def reset(self, lines) -> None:
        self.beginResetModel()
        self.rows = deque(lines, maxlen=self.max_lines)
        self.width_chars = max((len(x.text) + 2 for x in self.rows), default=0)
        self.endResetModel()


class LogView(QTableView):
    """Log lines in one column: fixed row height, no headers, grid, wrapping or eliding; Ctrl+C copies the
    selected lines."""

    def __init__(self, model: LogLinesModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setModel(model)
        self.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.char_px = max(1, self.fontMetrics().horizontalAdvance("M"))
        self.horizontalHeader().hide()
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        rows = self.verticalHeader()
        rows.hide()
        rows.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        rows.setMinimumSectionSize(1)
        rows.setDefaultSectionSize(self.fontMetrics().height() + 2)
        self.setShowGrid(False)
        self.setWordWrap(False)
        self.setTextElideMode(Qt.TextElideMode.ElideNone)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.fit_width(shrink=True)

    def fit_width(self, shrink: bool = False) -> bool:
        """The column as wide as the longest line, so long lines scroll sideways instead of eliding; it only
        grows while lines arrive (`shrink` after the lines were replaced). True when the width changed."""
        px = max(100, self.model().width_chars * self.char_px + 12)
        if px > self.columnWidth(0) or shrink:
            self.setColumnWidth(0, px)
            return True
        return False

    def keyPressEvent(self, event) -> None:  # noqa: N802 - Qt override
        if event.matches(QKeySequence.StandardKey.Copy):
            rows = sorted(i.row() for i in self.selectedIndexes())
            model = self.model()
            QGuiApplication.clipboard().setText("\n".join(model.index(r, 0).data() for r in rows))
            return
        super().keyPressEvent(event)

class LogConsole(QWidget):
    def __init__(self, parent: QWidget | None = None, max_lines: int = 20_000) -> None:
        super().__init__(parent)
        self.log = LogLines(max_lines)  # what was received and what the filter lets through
        self.level = QComboBox()
        for text, value in LOG_FILTERS:
            self.level.addItem(text, value)
        self.level.setCurrentIndex(3)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search the log (text)")
        self.search.setClearButtonEnabled(True)
        self.follow = QCheckBox("Follow")
        self.follow.setChecked(True)
        self.count = QLabel()
        self.count.setToolTip(f"Lines received from the server (the newest {max_lines:,} are kept). Select "
                              "lines and press Ctrl+C to copy them.")
        # room for the largest count, so the label is never clipped and the row does not shift as it grows
        self.count.setMinimumWidth(self.count.fontMetrics().horizontalAdvance(f"{max_lines} lines") + 8)
        self.count.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.model = LogLinesModel(self, max_lines)
        self.text = LogView(self.model)
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

    @property
    def lines(self) -> deque:
        """The lines received (the newest `max_lines`)."""
        return self.log.lines

    def append_lines(self, lines: list) -> None:
        """A batch of new lines (the bridge sends them every FRAME_MS: four times a second)."""
        shown = self.log.add(lines)
        if shown:
            self.model.extend(shown)
            if self.text.fit_width():
                self.text.updateGeometries()  # the scroll bar's range now (else a later pass of its own)
            # lay the rows out now: one paint pass a batch, not a second one for the layout's timer
            self.text.executeDelayedItemsLayout()
            if self.follow.isChecked() and self.text.isVisible():
                self._scroll_to_newest()
        self.count.setText(self.log.count_text)

    def _scroll_to_newest(self) -> None:
        """Show the newest line, scrolled to the left (the start of every line in view)."""
        self.text.scrollToBottom()
        self.text.horizontalScrollBar().setValue(0)

    def showEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        if self.follow.isChecked():
            self._scroll_to_newest()

    def clear(self) -> None:
        self.log.clear()
        self.model.reset([])
        self.text.fit_width(shrink=True)
        self.count.setText("")

    def shown_text(self) -> str:
        return "\n".join(format_line(x) for x in self.model.rows)

    def _on_filter_changed(self, *_args) -> None:
        self.model.reset(self.log.set_filter(self.level.currentData(), self.search.text()))
        self.text.fit_width(shrink=True)
        self._scroll_to_newest()
