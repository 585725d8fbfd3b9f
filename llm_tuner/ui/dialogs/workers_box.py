"""Settings' llama.cpp RPC workers: the list (host:port, its agent), local workers started and stopped
here, and a check that shows each worker's devices and memory, or what is wrong, in plain words.

Starting a worker and asking llama-server for the workers' devices run in BackgroundJobs; the workers this
app starts belong to the AppContext's WorkerPool (services.rpc), which stops them when the app quits.
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

from llm_tuner.core.rpc import bind_warning, parse_endpoint
from llm_tuner.core.settings import RpcWorker, Settings
from llm_tuner.core.units import format_mib
from llm_tuner.qt.workers import BackgroundJob
from llm_tuner.services.paths import cache_dir
from llm_tuner.services.rpc import WorkerSpec, reachable, worker_devices

_COLUMNS = ("Worker (host:port)", "Agent (GPU telemetry)", "Status")


class WorkersBox(QGroupBox):
    """The RPC workers list of the Settings dialog. `workers()` is the edited list."""

    def __init__(self, settings: Settings, pool=None, parent: QWidget | None = None) -> None:
        super().__init__("RPC workers (llama.cpp ggml-rpc-server on this or another machine)", parent)
        self._settings = settings
        self._pool = pool  # services.rpc.WorkerPool of the app; None: no local workers from here
        self._tokens: dict[str, str | None] = {w.endpoint: w.agent_token for w in settings.rpc_workers}
        self._jobs: list[BackgroundJob] = []
        v = QVBoxLayout(self)
        self.table = QTableWidget(0, len(_COLUMNS))
        self.table.setHorizontalHeaderLabels(_COLUMNS)
        header = self.table.horizontalHeader()
        for c in range(len(_COLUMNS) - 1):  # whole headers and addresses; the status takes the rest
            header.setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.table.setMinimumHeight(90)
        v.addWidget(self.table)
        for w in settings.rpc_workers:
            self._add_row(w.endpoint, w.agent_url or "", "not checked")

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
        self.bind_edit.setToolTip("Address to listen on. Anything but loopback is insecure (see the warning).")
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

    # -- the list ------------------------------------------------------------------------------------
    def _add_row(self, endpoint: str, agent: str, status: str) -> None:
        r = self.table.rowCount()
        self.table.insertRow(r)
        for c, text in enumerate((endpoint, agent, status)):
            self.table.setItem(r, c, QTableWidgetItem(text))

    def _row_of(self, endpoint: str) -> int | None:
        for r in range(self.table.rowCount()):
            if self.table.item(r, 0).text() == endpoint:
                return r
        return None

    def endpoints(self) -> list[str]:
        return [self.table.item(r, 0).text() for r in range(self.table.rowCount())]

    def workers(self) -> list[RpcWorker]:
        out = []
        for r in range(self.table.rowCount()):
            ep, agent = self.table.item(r, 0).text(), self.table.item(r, 1).text().strip()
            out.append(RpcWorker(endpoint=ep, agent_url=agent or None, agent_token=self._tokens.get(ep)))
        return out

    def set_status(self, endpoint: str, text: str) -> None:
        r = self._row_of(endpoint)
        if r is not None:
            self.table.item(r, 2).setText(text)
            self.table.item(r, 2).setToolTip(text)

    def _show(self, text: str, error: bool = False) -> None:
        self.message.setText(text)
        self.message.setStyleSheet("color: #c62828" if error else "")

    def _on_add_clicked(self) -> None:
        ep = self.endpoint_edit.text().strip()
        try:
            parse_endpoint(ep)
        except ValueError as exc:
            self._show(str(exc), error=True)
            return
        if self._row_of(ep) is None:
            self._add_row(ep, self.agent_edit.text().strip(), "not checked")
        self._tokens[ep] = self.token_edit.text().strip() or None
        self.endpoint_edit.clear()
        self.agent_edit.clear()
        self.token_edit.clear()
        self._show("")

    def _on_remove_clicked(self) -> None:
        for r in sorted({i.row() for i in self.table.selectedItems()}, reverse=True):
            self.table.removeRow(r)

    # -- local workers ---------------------------------------------------------------------------------
    def _on_bind_changed(self, host: str) -> None:
        warning = bind_warning(host.strip() or "127.0.0.1", self.port_spin.value())
        self._show(warning or "", error=warning is not None)

    def _on_start_clicked(self) -> None:
        port = self.port_spin.value()
        cache = self.cache_edit.text().strip() or str(cache_dir() / "rpc-worker")
        spec = WorkerSpec(self.bind_edit.text().strip() or "127.0.0.1", port,
                          tuple(d.strip() for d in self.devices_edit.text().split(",") if d.strip()), None, cache)
        pool, settings = self._pool, self._settings
        self.start_button.setEnabled(False)
        self._show("starting ggml-rpc-server …")
        self._run(lambda _c: pool.start(spec, settings), self._on_started, self._on_start_failed,
                  what="Starting an RPC worker")

    def _on_started(self, worker) -> None:
        self.start_button.setEnabled(True)
        if self._row_of(worker.endpoint) is None:
            self._add_row(worker.endpoint, "", "")
        self.set_status(worker.endpoint, f"started here (pid {worker.pid})")
        self._show(worker.warning or f"ggml-rpc-server listens on {worker.endpoint}; it stops when the app "
                   "quits. Save to keep it in the list.", error=worker.warning is not None)

    def _on_start_failed(self, exc) -> None:
        self.start_button.setEnabled(True)
        self._show(f"could not start the worker: {exc}", error=True)

    def _on_stop_clicked(self) -> None:
        for r in sorted({i.row() for i in self.table.selectedItems()}):
            ep = self.table.item(r, 0).text()
            if self._pool is not None and self._pool.stop(ep):
                self.set_status(ep, "stopped")
            else:
                self.set_status(ep, "not started by this app (stop it where it runs)")

    # -- check -----------------------------------------------------------------------------------------
    def check(self) -> None:
        """Each worker's reachability, then all workers' devices (one llama-server --rpc --list-devices)."""
        endpoints = self.endpoints()
        if not endpoints:
            return

        settings = self._settings

        def work(_c):
            status = {ep: reachable(ep) for ep in endpoints}
            ok = [ep for ep, why in status.items() if why is None]
            devices, error = [], None
            if ok:
                try:
                    devices = worker_devices(ok, settings, timeout_s=15)
                except Exception as exc:  # noqa: BLE001 - shown in words
                    error = str(exc)
            return status, ok, devices, error

        self.check_button.setEnabled(False)
        self._run(work, self._on_checked, self._on_check_failed, what="Checking the RPC workers")

    def _on_check_failed(self, exc) -> None:
        self.check_button.setEnabled(True)
        self._show(str(exc), error=True)

    def _on_checked(self, result) -> None:
        status, ok, devices, error = result
        self.check_button.setEnabled(True)
        for ep, why in status.items():
            self.set_status(ep, why or error or "reachable")
        by_endpoint: dict[str, list[str]] = {}
        for d in devices:
            by_endpoint.setdefault(d.description, []).append(
                f"{d.name}: {format_mib(d.memory_total_mib)} ({format_mib(d.memory_free_mib)} free)")
        for ep in ok:
            if ep in by_endpoint:
                self.set_status(ep, "; ".join(by_endpoint[ep]))
        self._show(error or "", error=error is not None)

    def _run(self, fn, on_ok, on_fail, *, what: str) -> None:
        job = BackgroundJob(fn, self, what=what, on_failed=on_fail)
        job.succeeded.connect(on_ok)
        self._jobs.append(job)
        job.finished.connect(lambda: self._jobs.remove(job) if job in self._jobs else None)
        job.start(long=True)
