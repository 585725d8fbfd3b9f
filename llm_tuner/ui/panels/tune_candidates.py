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

COLUMNS = ("Knob", "Value", "Plan", "Predicted", "Memory", "Arguments")
MEMORY_COLUMN_PX = 320  # no column wider: the plan's figures elide, whole in the tooltip


class CandidateView(QWidget):
    """A table of services.tune.Candidate rows and a button to plan them again from the form's knobs."""

    check_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.summary = QLabel("Choose a base profile: its candidates show here before you run the tune.")
        self.summary.setWordWrap(True)
        self.check_button = QPushButton("Check candidates")
        self.check_button.setToolTip("Plan every knob value of the form against the devices (no server starts)")
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
        pruned = sum(1 for c in cands if not c.fits)
        slow = sum(1 for c in cands if c.fits and c.speed_pruned)
        placement = [c for c in cands if c.knob == "placement" and c.value is not None]
        text = (f"{len(cands)} candidates, {pruned} pruned by the memory plan (never started)." if cands else
                "No knob is checked.")
        if slow:
            text += (f" {slow} predicted far behind the best of their knob (beyond the speed model's error, at least "
                     "20 %): not started.")
        calibrated = next((c.predicted for c in cands if c.predicted), None)
        if cands and calibrated is not None:
            text += (f" Speed calibrated on {calibrated.get('on')}." if calibrated.get("calibrated") else
                     " Speed: no calibration of this build (default costs; nothing is pruned by speed).")
        if placement:
            text += (" The model does not fit the GPUs: the placement knob races the placements that fit, "
                     "with their K/V types, fewest bytes read from host memory first.")
        self.summary.setText(text)
        muted = self.palette().color(self.palette().ColorRole.PlaceholderText)
        for c in cands:
            row = self.table.rowCount()
            self.table.insertRow(row)
            status = "pruned" if not c.fits else "pruned (speed)" if c.speed_pruned else "fits"
            predicted = c.predicted_text if c.predicted else "–"
            cells = (c.knob, c.label, status, predicted, c.plan, c.args_text)
            tip = "\n".join(x for x in (c.args_text, c.plan, c.speed_pruned) if x)
            for col, value in enumerate(cells):
                item = QTableWidgetItem(value)
                item.setToolTip(tip)
                if not c.fits or c.speed_pruned:
                    item.setForeground(QColor(muted))
                self.table.setItem(row, col, item)

    def rows(self) -> list[tuple[str, ...]]:
        """The table as text, row by row (what a user reads)."""
        return [tuple(self.table.item(r, c).text() for c in range(len(COLUMNS))) for r in range(self.table.rowCount())]
