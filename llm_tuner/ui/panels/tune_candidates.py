"""The Tune view's Candidates tab: what the tune would try, before it starts (the list `tune --dry-run`
prints): each knob value with the memory plan's verdict, the speed model's prediction (and whether a race
would start it), the arguments it changes and the plan's figures. Where the model does not fit its GPUs, the
placement knob's values are the placements that fit each K/V type."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.state.tune import NO_BASE
from llm_tuner.state.tune_result import candidate_cells, candidates_summary

COLUMNS = ("Knob", "Value", "Plan", "Predicted", "Memory", "Arguments")
MEMORY_COLUMN_PX = 320  # no column wider: the plan's figures elide, whole in the tooltip


class CandidateView(QWidget):
    """A table of services.tune.Candidate rows and a button to plan them again from the form's knobs."""

    check_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.summary = QLabel(NO_BASE)
        self.summary.setWordWrap(True)
        self.check_button = QPushButton("Check candidates")
        self.check_button.setToolTip("Plan every knob value of the form against the devices (no server "
                                     "starts)")
        self.check_button.clicked.connect(self.check_requested)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().setVisible(False)
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        for i in range(5):
            header.setSectionResizeMode(i, QHeaderView.ResizeMode.ResizeToContents)
        header.setMaximumSectionSize(MEMORY_COLUMN_PX)  # a long plan figure is elided (whole in the tooltip)
        header.setStretchLastSection(True)
        top = QHBoxLayout()
        top.addWidget(self.summary, 1)
        top.addWidget(self.check_button)
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(self.table, 1)

    def set_message(self, text: str) -> None:
        self.summary.setText(text)

    def set_candidates(self, cands) -> None:
        self.table.setRowCount(0)
        self.summary.setText(candidates_summary(cands))
        muted = self.palette().color(self.palette().ColorRole.PlaceholderText)
        for c in cands:
            row = self.table.rowCount()
            self.table.insertRow(row)
            cells, tip, dim = candidate_cells(c)
            for col, value in enumerate(cells):
                item = QTableWidgetItem(value)
                item.setToolTip(tip)
                if dim:
                    item.setForeground(QColor(muted))
                self.table.setItem(row, col, item)

    def rows(self) -> list[tuple[str, ...]]:
        """The table as text, row by row (what a user reads)."""
        return [tuple(self.table.item(r, c).text() for c in range(len(COLUMNS)))
                for r in range(self.table.rowCount())]
