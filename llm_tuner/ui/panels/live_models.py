"""The Live panel's Models tab: the models a router serves and which are loaded.

A llama-server in router mode (no -m; --models-dir or --models-preset) loads a model when a request names it.
The list comes from the server's own `GET /models`, read off the GUI thread by services.router_watch and handed
here as RouterModels events through the server bridge; this view only shows the latest one.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

HEADERS = ("Model", "State", "Found in", "File")


class RouterModelsView(QWidget):
    """A summary line and one row per model of the router (name, state, where it was found, its file)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.summary = QLabel("")
        self.summary.setWordWrap(True)
        self.table = QTableWidget(0, len(HEADERS))
        self.table.setObjectName("router_models")
        self.table.setHorizontalHeaderLabels(HEADERS)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.summary)
        lay.addWidget(self.table, 1)

    def show_models(self, listed) -> None:
        """Show a RouterModels event (None: not a router, or not known yet: an empty list)."""
        models = listed.models if listed is not None else ()
        self.table.setRowCount(len(models))
        for row, m in enumerate(models):
            for col, text in enumerate((m.id, m.status, m.source or "—", m.path or "—")):
                item = QTableWidgetItem(text)
                if col == 3 and m.path:
                    item.setToolTip(m.path)
                self.table.setItem(row, col, item)
        loaded = [m.id for m in models if m.loaded]
        text = (f"{len(models)} model(s); loaded: {', '.join(loaded) or 'none'}. The router loads a model when a "
                "request names it (its \"model\" field).") if models else ""
        if listed is not None and listed.error:
            text = f"{text} {listed.error}".strip()
        self.summary.setText(text)

    def loaded_names(self) -> list[str]:
        """The models shown as loaded (for tests and status lines)."""
        return [self.table.item(r, 0).text() for r in range(self.table.rowCount())
                if self.table.item(r, 1).text() == "loaded"]
