"""The Plan tab's router box: a router profile's models (no -m; --models-dir / --models-preset) planned
together, as state.router_plan.RouterPlanState has them (widgets only).

Shown while the edited profile is a router: each model's use per device, the sets that fit together, the pairs
that do not, the safe --models-max, on the Plan's devices. The state's reads (the models' headers, saved
profiles, a presets file) run as this box's background jobs. "Write presets…" saves a --models-preset file;
"Open presets…" reads one and saves each model's section as a profile of its name.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.state.router_plan import RouterPlanState
from llm_tuner.store.profiles import ProfileRepository


class RouterPlanBox(QGroupBox):
    """A router's models planned as a whole (hidden for a profile with a model of its own)."""

    def __init__(self, plan_state, parent: QWidget | None = None, *, engine=None) -> None:
        super().__init__("Router: its models together", parent)
        self.setObjectName("router_plan")
        self.job: BackgroundJob | None = None  # the state's last read or write
        repo = ProfileRepository(engine) if engine is not None else None  # the saved profiles
        self.state = RouterPlanState(plan_state, profiles=repo, run=self._run)
        self.summary = QLabel("")
        self.summary.setWordWrap(True)
        self.table = QTableWidget(0, 0)
        self.table.setObjectName("router_plan_table")
        self.table.verticalHeader().setVisible(False)
        self.lines = QLabel("")
        self.lines.setObjectName("router_plan_lines")
        self.lines.setWordWrap(True)
        self.write_button = QPushButton("Write presets…")
        self.write_button.setToolTip(
            "Save these models' arguments as a --models-preset file (shared ones in [*])"
        )
        self.write_button.clicked.connect(self._on_write_button_clicked)
        self.open_button = QPushButton("Open presets…")
        self.open_button.setToolTip("Read a --models-preset file: each model's section as a profile")
        self.open_button.clicked.connect(self._on_open_button_clicked)
        row = QHBoxLayout()
        row.addWidget(self.write_button)
        row.addWidget(self.open_button)
        row.addStretch(1)
        lay = QVBoxLayout(self)
        lay.addWidget(self.summary)
        lay.addWidget(self.table)
        lay.addWidget(self.lines)
        lay.addLayout(row)
        self.state.add_callback(self._on_state_changed)
        self.setVisible(False)

    @property
    def opened(self) -> dict:
        """The profiles of the last presets file opened (name -> LaunchProfile)."""
        return self.state.opened

    def _run(self, work, done, failed) -> None:
        self.job = BackgroundJob(lambda _c: work(), self, what=self.state.jobs.doing, on_failed=failed)
        self.job.succeeded.connect(done)
        self.job.start()

    def _on_state_changed(self, what: str, *_details) -> None:
        st = self.state
        if what == "shown":
            self.setVisible(st.shown)
        elif what == "summary":
            self.summary.setText(st.summary)
        elif what == "lines":
            self.lines.setText(st.lines)
        elif what == "table":
            self._show_table()

    def _show_table(self) -> None:
        table = self.state.table
        self.table.setRowCount(0)
        self.table.setColumnCount(len(table.headers))
        self.table.setHorizontalHeaderLabels(list(table.headers))
        self.table.setRowCount(len(table.rows))
        for r, cells in enumerate(table.rows):
            for c, text in enumerate(cells):
                self.table.setItem(r, c, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()

    def refresh(self) -> None:
        """Plan the edited profile's router models again, or hide for a plain profile."""
        self.state.refresh()

    def _on_write_button_clicked(self) -> None:
        if not self.state.can_write:
            return
        path, _ = QFileDialog.getSaveFileName(self, "Write a presets file", "models.ini", "Presets (*.ini)")
        if path:
            self.write_presets(path)

    def write_presets(self, path: str) -> BackgroundJob | None:
        """Write the router's presets file (a background job: it reads saved profiles and headers)."""
        self.state.write_presets(path)
        return self.job

    def _on_open_button_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open a presets file", "", "Presets (*.ini);;All files (*)"
        )
        if path:
            self.open_presets(path)

    def open_presets(self, path: str) -> BackgroundJob | None:
        """Read a presets file as profiles, each saved under its section's name (off the GUI thread)."""
        self.state.open_presets(path)
        return self.job
