"""The Live panel's Models tab: the models a router serves, which are loaded, and Load / Unload for each.

A llama-server in router mode (no -m; --models-dir or --models-preset) loads a model when a request names it, or
when asked (`POST /models/load`). The list comes from the server's own `GET /models`, read off the GUI thread by
services.router_watch and handed here as RouterModels events through the server bridge, with each model's
instance memory (RSS), its load time and the plan of all of them together. Per model this view shows its state,
load time, memory beside the plan, and speed from the requests that named it (the slot's records).

Load asks the plan first: a load that would not fit beside the running models is refused with the figures unless
"Load even if it does not fit" is ticked. Loads by other clients cannot be stopped; when the running models
overfill a device, a warning says so (a router started with --no-models-autoload loads only when asked).
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
from llm_tuner.services.router_watch import model_speeds

HEADERS = ("Model", "State", "Loaded in", "Memory (RSS)", "Plan", "Speed", "Found in", "File")
FILE_COLUMN = HEADERS.index("File")
# The router reads --models-autoload from its own command line only (server-models.cpp is_autoload: a presets
# file's [*] passes it to the instances, not to the router)
AUTOLOAD_HINT = ("Loads by other clients cannot be refused here: started with --no-models-autoload, the router "
                 "loads a model only when asked (Load), never because a request names it.")


def _plan_text(plan, name: str) -> str:
    m = plan.model(name) if plan is not None else None
    if m is None:
        return "—"
    if m.plan is None:
        return f"no plan: {m.error}"
    return ", ".join(f"{dev} {mib:.0f}" for dev, mib in m.use_mib.items() if mib >= 0.5) + " MiB"


class RouterModelsView(QWidget):
    """A summary line, one row per model of the router, Load / Unload for the selected one, and what they said."""

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
            "What the plan counts for the model's instance: what must be resident on each device, and in host RAM "
            "its prompt cache's ceiling (--cache-ram) too")
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
        self._load_s: dict[str, float] = {}  # loads asked here, timed by the job that followed them
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
        self._listed = None
        self._url: str | None = None
        self._api_key: str | None = None
        self._records = ()
        self._update_buttons()

    def show_models(self, listed, *, url: str | None = None, api_key: str | None = None, records=()) -> None:
        """Show a RouterModels event (None: not a router, or not known yet: an empty list); `url`/`api_key`: where
        Load and Unload go; `records`: the server's recent requests (each router model's speed)."""
        picked = self.selected_model()
        self._listed, self._url, self._api_key, self._records = listed, url, api_key, records
        models = listed.models if listed is not None else ()
        plan = getattr(listed, "plan", None)
        speeds = model_speeds(records)
        self.table.setRowCount(len(models))
        for row, m in enumerate(models):
            usage = listed.usage_of(m.id)
            speed = speeds.get(m.id)
            load_s = self._load_s.get(m.id, usage.load_s if usage is not None else None)
            cells = (m.id, m.status + (" (failed)" if m.failed else ""),
                     f"{load_s:.1f} s" if load_s is not None else "—",
                     f"{usage.rss_mib:.0f} MiB" if usage is not None and usage.rss_mib is not None else "—",
                     _plan_text(plan, m.id), speed.text() if speed is not None else "—",
                     m.source or "—", m.path or "—")
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if col == FILE_COLUMN and m.path:
                    item.setToolTip(m.path)
                self.table.setItem(row, col, item)
            if m.id == picked:
                self.table.selectRow(row)
        loaded = [m.id for m in models if m.loaded]
        text = (f"{len(models)} model(s); loaded: {', '.join(loaded) or 'none'}. The router loads a model when a "
                "request names it (its \"model\" field), or with Load.") if models else ""
        if plan is not None and plan.models_max is not None:
            text += f" The plan: at most {plan.models_max} at once fit (--models-max)."
        if listed is not None and listed.error:
            text = f"{text} {listed.error}".strip()
        self.summary.setText(text)
        overfull = listed.unfit_running() if listed is not None else None
        self.warning.setText(f"The running models do not fit together: {overfull.text()} {AUTOLOAD_HINT}"
                             if overfull is not None else "")
        self.warning.setVisible(overfull is not None)
        self._update_buttons()

    def loaded_names(self) -> list[str]:
        """The models shown as loaded (for tests and status lines)."""
        return [self.table.item(r, 0).text() for r in range(self.table.rowCount())
                if self.table.item(r, 1).text() == "loaded"]

    def selected_model(self) -> str | None:
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        return self.table.item(rows[0].row(), 0).text() if rows and self.table.item(rows[0].row(), 0) else None

    def select_model(self, name: str) -> None:
        for r in range(self.table.rowCount()):
            if self.table.item(r, 0).text() == name:
                self.table.selectRow(r)

    def _status_of(self, name: str | None) -> str | None:
        models = self._listed.models if self._listed is not None else ()
        return next((m.status for m in models if m.id == name), None)

    def _update_buttons(self) -> None:
        status = self._status_of(self.selected_model())
        self.load_button.setEnabled(self._url is not None and status is not None and status not in ("loaded",
                                                                                                    "loading"))
        self.unload_button.setEnabled(self._url is not None and status in ("loaded", "loading"))

    def _on_table_selection_changed(self) -> None:
        self._update_buttons()

    def _on_load_button_clicked(self) -> None:
        name = self.selected_model()
        if name is None or self._url is None:
            return
        check = self._listed.check_load(name) if self._listed is not None else None
        if check is not None and check.fits is False and not self.override_box.isChecked():
            self.message.setText(f"Not loaded: {check.text()}. Unload a model first, or tick \"Load even if the "
                                 "plan says it does not fit\".")
            return
        self.message.setText(f"Loading {name}…" + (f" ({check.text()})" if check is not None else ""))
        self.actions.load(self._url, name, self._api_key)

    def _on_unload_button_clicked(self) -> None:
        name = self.selected_model()
        if name is None or self._url is None:
            return
        self.message.setText(f"Unloading {name}…")
        self.actions.unload(self._url, name, self._api_key)

    def _on_actions_loaded(self, name: str, seconds: float) -> None:
        self._load_s[name] = seconds
        self.show_models(self._listed, url=self._url, api_key=self._api_key, records=self._records)

    def _on_actions_done(self, name: str, action: str, error) -> None:
        if error:
            self.message.setText(f"The router did not {action} {name}: {error}")
        elif action == "load":
            took = self._load_s.get(name)
            self.message.setText(f"{name} is loaded" + (f" (in {took:.1f} s)." if took is not None else "."))
        else:
            self.message.setText(f"The router unloads {name}; the list follows within seconds.")

    def stop(self) -> None:
        """Stop following loads (the server stops, or the panel goes)."""
        self.actions.cancel()
