"""The Live panel's History tab: every server session this app launched or attached, newest first, as
state.live_views.SessionHistory has them (widgets only)."""

from __future__ import annotations

from PySide6.QtWidgets import QHeaderView, QTableWidget, QTableWidgetItem, QWidget

from llm_tuner.state.live_views import HISTORY_HEADERS, SessionHistory


class HistoryTable(QTableWidget):
    """One line per session: number, start, mode, requests, exit, reason and command."""

    def __init__(self, history: SessionHistory | None = None, parent: QWidget | None = None) -> None:
        super().__init__(0, len(HISTORY_HEADERS), parent)
        self.history = history if history is not None else SessionHistory(None)
        self.setHorizontalHeaderLabels(list(HISTORY_HEADERS))
        header = self.horizontalHeader()
        for c in range(5):
            header.setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
        header.resizeSection(5, 280)  # the reason can be a whole sentence: elided, in full in its tooltip
        header.setStretchLastSection(True)
        self.verticalHeader().setVisible(False)
        self.setWordWrap(False)  # one line per session; long cells elide, in full in tooltips
        self.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.history.add_callback(self._on_history_changed)

    def _on_history_changed(self, what: str, *_details) -> None:
        if what == "rows":
            self._show_rows()

    def _show_rows(self) -> None:
        rows = self.history.rows
        self.setRowCount(len(rows))
        for r, cells in enumerate(rows):
            for c, (text, tip) in enumerate(cells):
                item = QTableWidgetItem(text)
                if tip:
                    item.setToolTip(tip)
                self.setItem(r, c, item)
