"""The Live panel's History tab: every server session this app launched or attached, newest first."""

from __future__ import annotations

import shlex
import time

from PySide6.QtWidgets import QHeaderView, QTableWidget, QTableWidgetItem, QWidget

from llm_tuner.services.process import signal_name


class HistoryTable(QTableWidget):
    """One line per session: number, start, mode, requests, exit, reason and command."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, 7, parent)
        self.setHorizontalHeaderLabels(["#", "Started", "Mode", "Requests", "Exit", "Reason", "Command"])
        header = self.horizontalHeader()
        for c in range(5):
            header.setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
        header.resizeSection(5, 280)  # the reason can be a whole sentence: elided, in full in its tooltip
        header.setStretchLastSection(True)
        self.verticalHeader().setVisible(False)
        self.setWordWrap(False)  # one line per session; long cells elide, in full in tooltips
        self.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)

    def show_sessions(self, sessions, running_ids: set) -> None:
        """Fill the table with `sessions` (SessionInfo); those in `running_ids` are still running."""
        self.setRowCount(len(sessions))
        for r, s in enumerate(sessions):
            exit_text, exit_tip = exit_cell(s, running=s.id in running_ids)
            command = shlex.join(s.argv) if s.argv else None
            started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.started_unix))
            cells = [(str(s.id), None), (started, None),
                     (s.mode, None), (str(s.n_requests), None), (exit_text, exit_tip),
                     (s.exit_reason or "—", s.exit_reason), (command or s.url or "—", command)]
            for c, (text, tip) in enumerate(cells):
                item = QTableWidgetItem(text)
                if tip:
                    item.setToolTip(tip)
                self.setItem(r, c, item)


def exit_cell(s, *, running: bool) -> tuple[str, str | None]:
    """The History's Exit column for a session: a readable value and a tooltip with the reason."""
    if s.ended_unix is None:
        if running:
            return "running", None
        return "not recorded", "The app ended before this server's exit was recorded."
    if s.exit_code is not None:
        return signal_name(s.exit_code) or str(s.exit_code), s.exit_reason
    if s.mode == "attach":
        return "—", s.exit_reason or "Detached: the server was started elsewhere and kept running."
    return "did not start", s.exit_reason or "The server process did not start."
