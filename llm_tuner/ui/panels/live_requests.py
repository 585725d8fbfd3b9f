"""The Live panel's Requests tab: one row per finished request, cheap under a busy server.

A server answering 15 requests a second must not cost the GUI thread per request: `add` only queues the
record (state.live_views.RequestsFeed), and the queued rows are inserted as one batch with the log lines (the
panel calls `flush` when the bridge's batch lands, so rows and lines share one paint) or, without lines
(attached without a log), by a timer a little longer than ROWS_EVERY_S, so the lines come first. While the
table shows, rows land at most once every ROWS_EVERY_S: a repaint of the table costs ~10 ms (every cell in
view asks the model for ~7 roles), so at the log's four batches a second the table was most of the Requests
tab's CPU (benchmarks/results/live_load_profile.txt); hidden, it takes each batch (no paint). Column widths
are fitted once (when the first rows are shown) and when the user asks ("Fit columns", or a double-click on a
column's edge), never per request: sizing to contents measures every row (Qt looks at up to 1,000), hundreds
of ms once the table is long. The table keeps the newest `max_rows` requests; past that a note says so, and
"Show all" reads the whole session back from the history (SQLite, where every request is written) on demand.
"""

from __future__ import annotations

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QHeaderView, QLabel, QPushButton, QTableView, QVBoxLayout, QWidget

from llm_tuner.qt.request_table_model import MODEL_COLUMN, RequestTableModel
from llm_tuner.qt.server_bridge import FRAME_MS
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.state.live_views import (
    NO_REQUESTS,
    ROWS_EVERY_S,
    UNBOUNDED,
    RequestsFeed,
    all_requests,
    requests_labels,
)

FIT_ROWS = 200  # rows measured when fitting the columns (Qt's default is 1,000: up to ~0.4 s)


class RequestsView(QWidget):
    """Hint, "newest N of M" note and the request table, fed in batches."""

    all_requested = Signal()  # the user asked for every request of the session (read from the history)

    def __init__(self, parent: QWidget | None = None, *, max_rows: int = 10_000,
                 every_s: float = ROWS_EVERY_S) -> None:
        super().__init__(parent)
        self.feed = RequestsFeed(max_rows=max_rows, every_s=every_s, run=self._run)
        self.model = RequestTableModel(self, max_rows=max_rows)
        self.table = QTableView()
        self.table.setModel(self.model)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setResizeContentsPrecision(FIT_ROWS)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        self.hint = QLabel(NO_REQUESTS)
        self.hint.setWordWrap(True)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: palette(placeholder-text)")
        self.all_button = QPushButton("Show all")
        self.all_button.setToolTip("Read every request of this session back from the history and show them "
                                   "all")
        self.fit_button = QPushButton("Fit columns")
        self.fit_button.setToolTip("Size the columns to the rows shown (a double-click on a column's edge "
                                   "fits that one)")
        bar = QHBoxLayout()
        bar.addWidget(self.note, 1)
        bar.addWidget(self.all_button)
        bar.addWidget(self.fit_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.hint)
        lay.addLayout(bar)
        lay.addWidget(self.table, 1)
        self._fitted = False
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(int(1000 * every_s) + FRAME_MS)
        self._timer.timeout.connect(lambda: self.flush(force=True))
        self.fit_button.clicked.connect(self.fit_columns)
        self.all_button.clicked.connect(self.all_requested)
        self.feed.add_callback(self._on_feed_changed)
        self._update_labels()

    @property
    def ring_rows(self) -> int:
        return self.feed.ring_rows

    def _run(self, work, done, failed) -> None:
        job = BackgroundJob(lambda _ctl: work(), self, what="Reading the session's requests",
                            on_failed=failed)
        job.succeeded.connect(done)
        job.start()

    def _on_feed_changed(self, what: str, *details) -> None:
        if what == "reading":
            self.all_button.setEnabled(not self.feed.reading)
        elif what == "note":
            self.note.setText(details[0])
        elif what == "all":
            rows, received = details
            self.reset(rows, received, max_rows=UNBOUNDED)  # no ring until the next session: the user asked

    def add(self, rec) -> None:
        """Queue one finished request; it is shown with a later batch (within the timer's interval)."""
        self.feed.add(rec)
        if not self._timer.isActive():
            self._timer.start()

    def flush(self, *, force: bool = False) -> None:
        """Insert the queued rows as one batch: now when the table is hidden or `force`, else at most once
        every `every_s` (the rows left wait for a later batch, or the timer)."""
        pending = self.feed.take(visible=self.table.isVisible(), force=force)
        if not pending:
            return
        self._timer.stop()
        self.model.extend(pending)
        # lay the new rows out now: the table (and its scroll bar) then repaint in the same pass as the log's
        # lines, not in one or two later passes of their own
        self.table.executeDelayedItemsLayout()
        self._update_labels()
        if not self._fitted and self.table.isVisible():
            self.fit_columns()

    def reset(self, records, total: int | None = None, *, max_rows: int | None = None) -> None:
        """Show another session's requests (`total`: how many it had in all, when more than `records`); the
        newest `max_rows` (default: the ring's size) are kept."""
        self.feed.clear()
        self._timer.stop()
        self.model.max_rows = max_rows or self.ring_rows
        self.model.reset(records, total)
        self._fitted = False
        self._update_labels()
        if self.model.rowCount() and self.table.isVisible():
            self.fit_columns()

    def read_all(self, repo, session_id: int | None, current) -> None:
        """Read session `session_id`'s requests back from the history `repo` in a job (it can be 100k rows),
        then show them all; `current()` gives (requests received, the newest of them) for the session shown,
        or None when the view shows another one by then."""
        self.feed.read_all(repo, session_id, current)

    def show_all(self, stored: list, received: int, recent) -> None:
        """Every request of the session (state.live_views.all_requests: `stored` from the history, `received`
        how many the panel has had so far, `recent` the newest of those), with no ring until the next one."""
        self.reset(all_requests(stored, received, recent), received, max_rows=UNBOUNDED)

    def fit_columns(self) -> None:
        """Size the columns to their contents (the rows in view and up to FIT_ROWS others) and the titles."""
        self._fitted = self.model.rowCount() > 0
        self.table.resizeColumnsToContents()

    def showEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        if not self._fitted and self.model.rowCount():
            self.fit_columns()

    def _update_labels(self) -> None:
        rows = self.model.rowCount()
        # a router's requests name theirs
        self.table.setColumnHidden(MODEL_COLUMN, not self.model.names_models)
        labels = requests_labels(rows, self.model.total)
        self.hint.setVisible(labels.hint)
        self.note.setVisible(labels.trimmed)
        self.all_button.setVisible(labels.trimmed)
        self.fit_button.setVisible(labels.fit)
        if labels.trimmed:
            self.note.setText(labels.note)
