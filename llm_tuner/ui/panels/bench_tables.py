"""Sortable tables for benchmark results (Benchmarks and Compare): numbers sort as numbers, statuses and
verdicts in their colour."""

from __future__ import annotations

from PySide6.QtCore import QSortFilterProxyModel, Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView

from llm_tuner.qt.bench_models import COLOR_ROLE, SORT_ROLE


class SortProxy(QSortFilterProxyModel):
    """Sorts by SORT_ROLE and paints COLOR_ROLE as the text colour."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setSortRole(SORT_ROLE)

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if role == Qt.ItemDataRole.ForegroundRole:
            color = super().data(index, COLOR_ROLE)
            return QBrush(QColor(color)) if color else None
        return super().data(index, role)

    def lessThan(self, left, right) -> bool:  # noqa: N802 - Qt override
        a, b = left.data(SORT_ROLE), right.data(SORT_ROLE)
        try:
            return a < b
        except TypeError:
            return str(a) < str(b)


def make_table(model, stretch: int | None = None) -> tuple[QTableView, SortProxy]:
    """A sortable table; columns fit their contents, and column `stretch` (else the last) takes the rest
    of the width (its text elides when the view is narrow, so the other columns stay whole)."""
    proxy = SortProxy()
    proxy.setSourceModel(model)
    view = QTableView()
    view.setModel(proxy)
    # the model's order until a click
    view.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)
    view.setSortingEnabled(True)
    view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    view.setAlternatingRowColors(True)
    view.verticalHeader().setVisible(False)
    view.verticalHeader().setDefaultSectionSize(view.fontMetrics().height() + 8)
    header = view.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    if stretch is None:
        header.setStretchLastSection(True)
    else:
        header.setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)
    return view, proxy
