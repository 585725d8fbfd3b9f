"""The Live panel's Models tab: the models a router serves, which are loaded, and Load / Unload for each
(widgets only: the rows, words and rules are state.live_views.RouterModelsState's).

A llama-server in router mode (no -m; --models-dir or --models-preset) loads a model when a request names it,
or when asked (`POST /models/load`). The list comes from the server's own `GET /models`, read off the GUI
thread by services.router_watch and handed here as RouterModels events through the server bridge, with each
model's instance memory (RSS), its load time and the plan of all of them together. Per model this view shows
its state, load time, memory beside the plan, and speed from the requests that named it (the slot's records).

Load asks the plan first: a load that would not fit beside the running models is refused with the figures
unless "Load even if it does not fit" is ticked. Loads by other clients cannot be stopped; when the
running models overfill a device, a warning says so (a router started with --no-models-autoload loads only
when asked).
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.qt.router_actions import RouterActions
from llm_tuner.state.live_views import MODELS_HEADERS, RouterModelsState

HEADERS = MODELS_HEADERS
FILE_COLUMN = HEADERS.index("File")


class RouterModelsView(QWidget):
    """A summary line, one row per model of the router, Load / Unload for the selected one, and what they
    said."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.summary = QLabel("")
        self.summary.setWordWrap(True)
        self.warning = QLabel("")  # running models that overfill a device (loaded by another client)
        self.warning.setObjectName("router_overfull")
        self.warning.setWordWrap(True)
        self.warning.setStyleSheet("color: #b35900;")
        self.warning.hide()
        self.table = QTableWidget(0, len(HEADERS))
        self.table.setObjectName("router_models")
        self.table.setHorizontalHeaderLabels(HEADERS)
        self.table.horizontalHeaderItem(HEADERS.index("Plan")).setToolTip(
            "What the plan counts for the model's instance: what must be resident on each device, and in "
            "host RAM its prompt cache's ceiling (--cache-ram) too")
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.itemSelectionChanged.connect(self._on_table_selection_changed)
        self.load_button = QPushButton("Load")
        self.load_button.setObjectName("router_load")
        self.load_button.setToolTip("Start the selected model's instance (the plan is asked first)")
        self.unload_button = QPushButton("Unload")
        self.unload_button.setObjectName("router_unload")
        self.unload_button.setToolTip("Stop the selected model's instance and free its memory")
        self.override_box = QCheckBox("Load even if the plan says it does not fit")
        self.override_box.setObjectName("router_load_override")
        self.load_button.clicked.connect(self._on_load_button_clicked)
        self.unload_button.clicked.connect(self._on_unload_button_clicked)
        self.message = QLabel("")  # a refusal with its figures, or what the router answered
        self.message.setObjectName("router_message")
        self.message.setWordWrap(True)
        self.actions = RouterActions(self)
        self.actions.done.connect(self._on_actions_done)
        self.actions.loaded.connect(self._on_actions_loaded)
        self.state = RouterModelsState()
        self.state.add_callback(self._on_state_changed)
        buttons = QHBoxLayout()
        buttons.addWidget(self.load_button)
        buttons.addWidget(self.unload_button)
        buttons.addWidget(self.override_box)
        buttons.addStretch(1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.summary)
        lay.addWidget(self.warning)
        lay.addWidget(self.table, 1)
        lay.addLayout(buttons)
        lay.addWidget(self.message)
        self._update_buttons()

    def show_models(self, listed, *, url: str | None = None, api_key: str | None = None, records=()) -> None:
        """Show a RouterModels event (None: not a router, or not known yet: an empty list); `url`/`api_key`:
        where Load and Unload go; `records`: the server's recent requests (each router model's speed)."""
        self.state.show(listed, url=url, api_key=api_key, records=records)
        self._update_buttons()

    def _on_state_changed(self, what: str, *_details) -> None:
        st = self.state
        if what == "rows":
            self._show_rows()
        elif what == "summary":
            self.summary.setText(st.summary)
        elif what == "warning":
            self.warning.setText(st.warning)
            self.warning.setVisible(bool(st.warning))
        elif what == "message":
            self.message.setText(st.message)

    def _show_rows(self) -> None:
        picked = self.selected_model()
        rows = self.state.rows
        self.table.setRowCount(len(rows))
        for row, cells in enumerate(rows):
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if col == FILE_COLUMN and text != "—":
                    item.setToolTip(text)
                self.table.setItem(row, col, item)
            if cells[0] == picked:
                self.table.selectRow(row)

    def loaded_names(self) -> list[str]:
        """The models shown as loaded (for tests and status lines)."""
        return self.state.loaded_names()

    def selected_model(self) -> str | None:
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        item = self.table.item(rows[0].row(), 0) if rows else None
        return item.text() if item is not None else None

    def select_model(self, name: str) -> None:
        for r in range(self.table.rowCount()):
            if self.table.item(r, 0).text() == name:
                self.table.selectRow(r)

    def _update_buttons(self) -> None:
        name = self.selected_model()
        self.load_button.setEnabled(self.state.can_load(name))
        self.unload_button.setEnabled(self.state.can_unload(name))

    def _on_table_selection_changed(self) -> None:
        self._update_buttons()

    def _on_load_button_clicked(self) -> None:
        name, st = self.selected_model(), self.state
        asked = st.ask_load(name, override=self.override_box.isChecked())
        if asked and name is not None and st.url is not None:
            self.actions.load(st.url, name, st.api_key)

    def _on_unload_button_clicked(self) -> None:
        name, st = self.selected_model(), self.state
        if st.ask_unload(name) and name is not None and st.url is not None:
            self.actions.unload(st.url, name, st.api_key)

    def _on_actions_loaded(self, name: str, seconds: float) -> None:
        self.state.loaded(name, seconds)
        self._update_buttons()

    def _on_actions_done(self, name: str, action: str, error) -> None:
        self.state.done(name, action, error)

    def stop(self) -> None:
        """Stop following loads (the server stops, or the panel goes)."""
        self.actions.cancel()
