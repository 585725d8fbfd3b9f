"""The Live panel's Requests tab: one row per finished request, cheap under a busy server.

A server answering 15 requests a second must not cost the GUI thread per request: `add` only queues the
record, and a 100 ms timer inserts the queued rows as one batch. Column widths are fitted once (when the
first rows are shown) and when the user asks ("Fit columns", or a double-click on a column's edge), never
per request: sizing to contents measures every row (Qt looks at up to 1,000), hundreds of ms once the table
is long. The table keeps the newest `max_rows` requests; a note says so, and every request stays in the
session history (SQLite).
"""

from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QHBoxLayout, QHeaderView, QLabel, QPushButton, QTableView, QVBoxLayout, QWidget

from llm_tuner.qt.request_table_model import RequestTableModel

FIT_ROWS = 200  # rows measured when fitting the columns (Qt's default is 1,000: up to ~0.4 s)


class RequestsView(QWidget):
    """Hint, "newest N of M" note and the request table, fed in batches."""

    def __init__(self, parent: QWidget | None = None, *, max_rows: int = 10_000, batch_ms: int = 100) -> None:
        super().__init__(parent)
        self.model = RequestTableModel(self, max_rows=max_rows)
        self.table = QTableView()
        self.table.setModel(self.model)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setResizeContentsPrecision(FIT_ROWS)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        self.hint = QLabel("No requests yet. Press “Send test prompt”, or point any client (a chat UI, curl, your "
                           "editor) at the server's URL: every request appears here with its prompt and generation "
                           "speed.")
        self.hint.setWordWrap(True)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: palette(placeholder-text)")
        self.fit_button = QPushButton("Fit columns")
        self.fit_button.setToolTip("Size the columns to the rows shown (a double-click on a column's edge fits "
                                   "that one)")
        bar = QHBoxLayout()
        bar.addWidget(self.note, 1)
        bar.addWidget(self.fit_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.hint)
        lay.addLayout(bar)
        lay.addWidget(self.table, 1)
        self._pending: list = []
        self._fitted = False
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(batch_ms)
        self._timer.timeout.connect(self.flush)
        self.fit_button.clicked.connect(self.fit_columns)
        self._update_labels()

    def add(self, rec) -> None:
        """Queue one finished request; it is shown with the next batch (within `batch_ms`)."""
        self._pending.append(rec)
        if not self._timer.isActive():
            self._timer.start()

    def flush(self) -> None:
        """Insert the queued rows as one batch."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        self.model.extend(pending)
        self._update_labels()
        if not self._fitted and self.table.isVisible():
            self.fit_columns()

    def reset(self, records, total: int | None = None) -> None:
        """Show another session's requests (`total`: how many it had in all, when more than `records`)."""
        self._pending = []
        self._timer.stop()
        self.model.reset(records, total)
        self._fitted = False
        self._update_labels()
        if self.model.rowCount() and self.table.isVisible():
            self.fit_columns()

    def fit_columns(self) -> None:
        """Size the columns to their contents (the rows in view and up to FIT_ROWS others) and the titles."""
        self._fitted = self.model.rowCount() > 0
        self.table.resizeColumnsToContents()

    def showEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        if not self._fitted and self.model.rowCount():
            self.fit_columns()

    def _update_labels(self) -> None:
        rows, total = self.model.rowCount(), self.model.total
        self.hint.setVisible(rows == 0)
        trimmed = total > rows
        self.note.setVisible(trimmed)
        self.fit_button.setVisible(rows > 0)
        if trimmed:
            self.note.setText(f"Showing the newest {rows:,} of {total:,} requests. Every request is kept in this "
                              "session's history (the app's database); the table keeps the newest so a busy "
                              "server stays light.")
