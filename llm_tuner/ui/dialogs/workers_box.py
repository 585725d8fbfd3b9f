"""Settings' llama.cpp RPC workers: the list (host:port, its agent), local workers started and stopped
here, and a check that shows each worker's devices and memory, or what is wrong, in plain words.

Starting a worker and asking llama-server for the workers' devices run in BackgroundJobs; the workers this
app starts belong to the AppContext's WorkerPool (services.rpc), which stops them when the app quits. Widgets
only: the list, its rules and words are state.workers.WorkersState's.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from llm_tuner.core.settings import RpcWorker, Settings
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.state.workers import WorkersState

_COLUMNS = ("Worker (host:port)", "Agent (GPU telemetry)", "Status")


class WorkersBox(QGroupBox):
    """The RPC workers list of the Settings dialog. `workers()` is the edited list."""

    def __init__(self, settings: Settings, pool=None, parent: QWidget | None = None) -> None:
        super().__init__("RPC workers (llama.cpp ggml-rpc-server on this or another machine)", parent)
        self._jobs: list[BackgroundJob] = []
        # pool: services.rpc.WorkerPool of the app; None: no local workers from here
        self.state = WorkersState(settings, pool, run=self._run)
        v = QVBoxLayout(self)
        self.table = QTableWidget(0, len(_COLUMNS))
        self.table.setHorizontalHeaderLabels(_COLUMNS)
        header = self.table.horizontalHeader()
        for c in range(len(_COLUMNS) - 1):  # whole headers and addresses; the status takes the rest
            header.setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.table.setMinimumHeight(90)
        v.addWidget(self.table)

        add_row = QHBoxLayout()
        self.endpoint_edit = QLineEdit(placeholderText="host:port, e.g. 192.168.1.20:50052")
        self.agent_edit = QLineEdit(placeholderText="agent URL (optional), e.g. http://192.168.1.20:50100")
        self.token_edit = QLineEdit(placeholderText="agent token")
        self.token_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.add_button = QPushButton("Add")
        self.add_button.clicked.connect(self._on_add_clicked)
        self.remove_button = QPushButton("Remove")
        self.remove_button.clicked.connect(self._on_remove_clicked)
        self.check_button = QPushButton("Check")
        self.check_button.setToolTip("Reachability, then each worker's devices as llama-server sees them")
        self.check_button.clicked.connect(self.check)
        for w in (self.endpoint_edit, self.agent_edit, self.token_edit, self.add_button, self.remove_button,
                  self.check_button):
            add_row.addWidget(w, 2 if isinstance(w, QLineEdit) else 0)
        v.addLayout(add_row)

        local = QHBoxLayout()
        local.addWidget(QLabel("Local worker:"))
        self.bind_edit = QLineEdit("127.0.0.1")
        self.bind_edit.setToolTip("Address to listen on. Anything but loopback is insecure (see the "
                                  "warning).")
        self.bind_edit.textChanged.connect(self._on_bind_changed)
        self.devices_edit = QLineEdit(placeholderText="devices: all, or e.g. CPU / CUDA0")
        self.port_spin = QSpinBox(minimum=0, maximum=65535, specialValueText="free port")
        self.cache_edit = QLineEdit(placeholderText="cache folder (default: the app's cache)")
        self.start_button = QPushButton("Start")
        self.start_button.clicked.connect(self._on_start_clicked)
        self.stop_button = QPushButton("Stop selected")
        self.stop_button.clicked.connect(self._on_stop_clicked)
        for w in (self.bind_edit, self.devices_edit, self.port_spin, self.cache_edit, self.start_button,
                  self.stop_button):
            local.addWidget(w)
        self.start_button.setEnabled(pool is not None)
        self.stop_button.setEnabled(pool is not None)
        v.addLayout(local)
        self.message = QLabel()
        self.message.setWordWrap(True)
        v.addWidget(self.message)
        self.state.add_callback(self._on_state_changed)
        self._show_rows()

    def _run(self, work, done, failed) -> None:
        job = BackgroundJob(lambda _ctl: work(), self, what=self.state.jobs.doing, on_failed=failed)
        job.succeeded.connect(done)
        self._jobs.append(job)
        job.finished.connect(lambda: self._jobs.remove(job) if job in self._jobs else None)
        job.start(long=True)

    def _on_state_changed(self, what: str, *_details) -> None:
        st = self.state
        if what == "rows":
            self._show_rows()
        elif what == "message":
            text, error = st.message
            self.message.setText(text)
            self.message.setStyleSheet("color: #c62828" if error else "")
        elif what == "starting":
            self.start_button.setEnabled(not st.starting and st.pool is not None)
        elif what == "checking":
            self.check_button.setEnabled(not st.checking)

    # -- the list ------------------------------------------------------------------------------------
    def _show_rows(self) -> None:
        rows = self.state.rows
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, text in enumerate((row.endpoint, row.agent, row.status)):
                item = QTableWidgetItem(text)
                if c == 2:
                    item.setToolTip(text)
                self.table.setItem(r, c, item)

    def _selected(self) -> list[str]:
        rows = sorted({i.row() for i in self.table.selectedItems()})
        return [self.table.item(r, 0).text() for r in rows]

    def endpoints(self) -> list[str]:
        return self.state.endpoints()

    def workers(self) -> list[RpcWorker]:
        return self.state.workers()

    def set_status(self, endpoint: str, text: str) -> None:
        self.state.set_status(endpoint, text)

    def _on_add_clicked(self) -> None:
        if self.state.add(self.endpoint_edit.text(), self.agent_edit.text(), self.token_edit.text()):
            self.endpoint_edit.clear()
            self.agent_edit.clear()
            self.token_edit.clear()

    def _on_remove_clicked(self) -> None:
        self.state.remove(self._selected())

    # -- local workers ---------------------------------------------------------------------------------
    def _on_bind_changed(self, host: str) -> None:
        self.state.bind_changed(host, self.port_spin.value())

    def _on_start_clicked(self) -> None:
        self.state.start(self.bind_edit.text(), self.port_spin.value(), self.devices_edit.text(),
                         self.cache_edit.text())

    def _on_stop_clicked(self) -> None:
        self.state.stop(self._selected())

    # -- check -----------------------------------------------------------------------------------------
    def check(self) -> None:
        """Each worker's reachability, then all workers' devices (one llama-server --rpc --list-devices)."""
        self.state.check()
