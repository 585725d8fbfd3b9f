"""The Settings dialog's RPC workers as plain state: the list (host:port, its agent and token, a status),
local workers started and stopped here, and a check that finds each worker's devices and memory, or what is
wrong, in plain words.

Starting a worker and asking llama-server for the workers' devices go through the `Run` given (the box's
long BackgroundJobs, `run_now` in tests); the workers this app starts belong to the app's WorkerPool
(services.rpc), which stops them when the app quits.

Declared properties (said once per change): "rows" (each worker's endpoint, agent URL and status), "message"
(text and whether it is an error), "starting", "checking".
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from llm_tuner.core.devices import LlamaDevice
from llm_tuner.core.rpc import bind_warning, parse_endpoint
from llm_tuner.core.settings import RpcWorker, Settings
from llm_tuner.core.units import format_mib
from llm_tuner.services.paths import cache_dir
from llm_tuner.services.rpc import LocalWorker, WorkerPool, WorkerSpec, reachable, worker_devices
from llm_tuner.state.callbacks import Declared, Jobs, Observable, Run, run_now

NOT_CHECKED = "not checked"
LOOPBACK = "127.0.0.1"

# a check's answer: each endpoint's reachability (None: reachable), those reachable, their devices, an error
Checked = tuple[dict[str, str | None], list[str], list[LlamaDevice], str | None]


@dataclass(frozen=True)
class WorkerRow:
    endpoint: str
    agent: str = ""
    status: str = NOT_CHECKED


def check_workers(endpoints: list[str], settings: Settings) -> Checked:
    """Each worker's reachability, then the reachable ones' devices (one llama-server --rpc
    --list-devices)."""
    status = {ep: reachable(ep) for ep in endpoints}
    ok = [ep for ep, why in status.items() if why is None]
    devices: list[LlamaDevice] = []
    error = None
    if ok:
        try:
            devices = worker_devices(ok, settings, timeout_s=15)
        except Exception as exc:  # noqa: BLE001 - shown in words
            error = str(exc)
    return status, ok, devices, error


class WorkersState(Observable):
    """The RPC workers list being edited, and what its buttons do."""

    rows = Declared[tuple[WorkerRow, ...]]((), topic="rows")
    message = Declared[tuple[str, bool]](("", False), topic="message")
    starting = Declared[bool](False, topic="starting")
    checking = Declared[bool](False, topic="checking")

    def __init__(self, settings: Settings, pool: WorkerPool | None = None, *, run: Run = run_now) -> None:
        super().__init__()
        self.settings = settings
        self.pool = pool  # the app's WorkerPool; None: no local workers from here
        self.jobs = Jobs(run)  # start and check, with their words
        self.tokens: dict[str, str | None] = {w.endpoint: w.agent_token for w in settings.rpc_workers}
        self.rows = tuple(WorkerRow(w.endpoint, w.agent_url or "") for w in settings.rpc_workers)

    # -- the list ------------------------------------------------------------------------------------------
    def endpoints(self) -> list[str]:
        return [r.endpoint for r in self.rows]

    def workers(self) -> list[RpcWorker]:
        """The edited list, as Settings keeps it."""
        return [
            RpcWorker(
                endpoint=r.endpoint,
                agent_url=r.agent.strip() or None,
                agent_token=self.tokens.get(r.endpoint),
            )
            for r in self.rows
        ]

    def set_status(self, endpoint: str, text: str) -> None:
        self.rows = tuple(replace(r, status=text) if r.endpoint == endpoint else r for r in self.rows)

    def _say(self, text: str, *, error: bool = False) -> None:
        self.message = (text, error)

    def add(self, endpoint: str, agent: str = "", token: str = "") -> bool:
        """Add a worker (host:port; its agent's URL and token, optional); False, with the reason said, when
        the endpoint is not one. A listed endpoint keeps its row and takes the new token."""
        endpoint = endpoint.strip()
        try:
            parse_endpoint(endpoint)
        except ValueError as exc:
            self._say(str(exc), error=True)
            return False
        if endpoint not in self.endpoints():
            self.rows = (*self.rows, WorkerRow(endpoint, agent.strip()))
        self.tokens[endpoint] = token.strip() or None
        self._say("")
        return True

    def remove(self, endpoints: list[str]) -> None:
        self.rows = tuple(r for r in self.rows if r.endpoint not in endpoints)

    # -- local workers ---------------------------------------------------------------------------------------
    def bind_changed(self, host: str, port: int) -> None:
        """Where a local worker would listen: anything but loopback is warned about."""
        warning = bind_warning(host.strip() or LOOPBACK, port)
        self._say(warning or "", error=warning is not None)

    def start(self, host: str, port: int, devices: str, cache: str = "") -> None:
        """Start a local ggml-rpc-server (through `run`): devices as typed ('CPU, CUDA0'; '' for all)."""
        pool, settings = self.pool, self.settings
        if pool is None:
            return
        spec = WorkerSpec(
            host.strip() or LOOPBACK,
            port,
            tuple(d.strip() for d in devices.split(",") if d.strip()),
            None,
            cache.strip() or str(cache_dir() / "rpc-worker"),
        )
        self.starting = True
        self._say("starting ggml-rpc-server …")
        self.jobs(
            "Starting an RPC worker", lambda: pool.start(spec, settings), self._started, self._start_failed
        )

    def _started(self, worker: LocalWorker) -> None:
        self.starting = False
        if worker.endpoint not in self.endpoints():
            self.rows = (*self.rows, WorkerRow(worker.endpoint, "", ""))
        self.set_status(worker.endpoint, f"started here (pid {worker.pid})")
        self._say(
            worker.warning
            or f"ggml-rpc-server listens on {worker.endpoint}; it stops when the app quits. "
            "Save to keep it in the list.",
            error=worker.warning is not None,
        )

    def _start_failed(self, exc: BaseException) -> None:
        self.starting = False
        self._say(f"could not start the worker: {exc}", error=True)

    def stop(self, endpoints: list[str]) -> None:
        for ep in endpoints:
            if self.pool is not None and self.pool.stop(ep):
                self.set_status(ep, "stopped")
            else:
                self.set_status(ep, "not started by this app (stop it where it runs)")

    # -- check -----------------------------------------------------------------------------------------------
    def check(self) -> None:
        """Each worker's reachability, then all workers' devices (through `run`)."""
        endpoints, settings = self.endpoints(), self.settings
        if not endpoints:
            return
        self.checking = True
        self.jobs(
            "Checking the RPC workers",
            lambda: check_workers(endpoints, settings),
            self._checked,
            self._check_failed,
        )

    def _check_failed(self, exc: BaseException) -> None:
        self.checking = False
        self._say(str(exc), error=True)

    def _checked(self, result: Checked) -> None:
        status, ok, devices, error = result
        self.checking = False
        for ep, why in status.items():
            self.set_status(ep, why or error or "reachable")
        by_endpoint: dict[str, list[str]] = {}
        for d in devices:
            by_endpoint.setdefault(d.description, []).append(
                f"{d.name}: {format_mib(d.memory_total_mib)} ({format_mib(d.memory_free_mib)} free)"
            )
        for ep in ok:
            if ep in by_endpoint:
                self.set_status(ep, "; ".join(by_endpoint[ep]))
        self._say(error or "", error=error is not None)
