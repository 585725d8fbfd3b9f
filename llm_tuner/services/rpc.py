"""llama.cpp RPC workers: start and stop local `ggml-rpc-server`s, check workers, read their devices.

A worker is a `ggml-rpc-server` at `host:port` (this machine or another). The app can start local workers
(devices, port, cache folder); each is a long-lived child started through services.server.ServerProcess,
so it gets its own process group and, on Linux, PR_SET_PDEATHSIG: it never outlives the app, also when the
app is killed. `WorkerPool` owns the workers one app (or CLI command) started and stops them all at exit.

What a worker offers is asked of llama-server itself (`--rpc A,B --list-devices`: its RPC lines); before
that, a TCP connect with a short timeout tells "nothing answers" apart from a slow worker, because
llama.cpp aborts on a refused connection.
"""

from __future__ import annotations

import atexit
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from llm_tuner.core import flags
from llm_tuner.core.cmdline import parse_help
from llm_tuner.core.devices import LlamaDevice
from llm_tuner.core.memory import PlanDevice, plan_gpus
from llm_tuner.core.rpc import (
    bind_warning,
    default_device_order,
    device_endpoint,
    is_rpc_device,
    parse_endpoint,
    rpc_support_error,
    split_endpoints,
)
from llm_tuner.core.settings import Settings
from llm_tuner.services import binaries
from llm_tuner.services.launch import free_port
from llm_tuner.services.process import StopResult, child_env
from llm_tuner.services.server import ServerProcess
from llm_tuner.services.telemetry.inventory import inventory_for


class WorkerError(Exception):
    """A worker that cannot be used or started; the message says what happened and what to do."""


def reachable(endpoint: str, timeout_s: float = 3.0) -> str | None:
    """None when something accepts a TCP connection at `endpoint`; else why not, in plain words.

    ggml-rpc-server listens with a backlog of 1 (transport.cpp), so a connection can be queued behind
    another one and its first SYN dropped; the kernel retries after 1 s, so the timeout stays above that.
    """
    host, port = parse_endpoint(endpoint)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except ConnectionRefusedError:
        return f"connection refused: nothing listens at {endpoint} (is ggml-rpc-server running there?)"
    except TimeoutError:
        return f"no answer from {endpoint} within {timeout_s:g} s (wrong address, or a firewall drops it)"
    except OSError as exc:
        return f"cannot reach {endpoint}: {exc.strerror or exc}"


def worker_devices(endpoints: list[str], settings: Settings | None = None, *,
                   server_binary: Path | None = None, timeout_s: float = 30.0) -> list[LlamaDevice]:
    """The RPC devices (`RPC0`, `RPC1`, ... with their endpoint as description) llama-server sees with these
    workers, in `--rpc` order. WorkerError in plain words: unreachable, version mismatch, no RPC in the
    build."""
    for ep in endpoints:
        if (why := reachable(ep)) is not None:
            raise WorkerError(why)
    if server_binary is None:
        loc = binaries.locate(binaries.SERVER, settings)
        if loc is None:
            raise WorkerError("llama-server not found: it is what reads the workers' devices. Set it in Settings.")
        server_binary = loc.path
    try:
        catalog = parse_help(binaries.read_help(server_binary))
    except binaries.BinaryError:
        catalog = None  # unreadable --help: llama-server's own error below says more
    if (why := rpc_support_error(catalog)) is not None:
        raise WorkerError(why)
    try:
        devices = binaries.list_devices(server_binary, endpoints, timeout=timeout_s, max_age_s=0)  # asked now
    except binaries.BinaryError as exc:
        if "did not finish" in str(exc):  # connected, then no answer: the worker serves someone else
            raise WorkerError(f"busy: a worker of {', '.join(endpoints)} accepted the connection but did not "
                              f"answer within {timeout_s:g} s. ggml-rpc-server serves one llama-server at a "
                              "time: stop the one using it (or wait), then ask again.") from exc
        raise WorkerError(str(exc)) from exc
    return [d for d in devices if is_rpc_device(d.name)]


def workers_devices(endpoints: list[str], settings: Settings | None = None, *, server_binary: Path | None = None,
                    timeout_s: float = 30.0) -> tuple[list[LlamaDevice], dict[str, str]]:
    """The devices of the workers that answer (as `worker_devices` asks them, in `--rpc` order) and, for each
    worker that does not, why ({endpoint: reason}): one dead worker does not hide the live ones."""
    errors = {ep: why for ep in endpoints if (why := reachable(ep)) is not None}
    live = [ep for ep in endpoints if ep not in errors]
    if not live:
        return [], errors
    try:
        return worker_devices(live, settings, server_binary=server_binary, timeout_s=timeout_s), errors
    except WorkerError as exc:
        return [], {ep: errors.get(ep, str(exc)) for ep in endpoints}


def planned_gpus(binary: Path, argv: list[str], env: dict[str, str] | None = None, *,
                 fresh: bool = False) -> list[PlanDevice]:
    """The GPUs (core.memory.PlanDevice) to plan these llama-server arguments for: the binary's devices, one
    card under two backends as one pool, and the `--rpc` workers' devices (with the memory they report) first,
    as llama.cpp orders them without `-dev`. One home for the Plan's CLI (`estimate`) and the benchmark
    prediction. `fresh`: the devices' free memory as it is now, not a `--list-devices` answer kept for up to
    binaries.LIST_DEVICES_MAX_AGE_S (a tune places for the whole run on what it sees at its start)."""
    rpc = split_endpoints(flags.value_of(flags.effective_argv(list(argv), env or {}), "rpc") or "")
    listed = None  # inventory_for asks the binary (a recent answer will do)
    if fresh:
        listed = binaries.list_devices(binary, rpc, max_age_s=0)
    elif rpc:
        listed = binaries.list_devices(binary, rpc)
    return default_device_order(plan_gpus(inventory_for(binary, devices=listed)))


def devices_json(devices: list[LlamaDevice]) -> list[dict[str, Any]]:
    """`llm-tuner devices/workers --json`: each device with its endpoint (RPC) and memory."""
    return [{"name": d.name, "backend": d.backend, "description": d.description, "endpoint": device_endpoint(d),
             "memory_total_mib": d.memory_total_mib, "memory_free_mib": d.memory_free_mib} for d in devices]


def run_devices(argv: list[str], env: dict[str, str] | None, server_binary: Path | None) -> list[dict[str, Any]]:
    """The RPC devices of a run's arguments (`--rpc`, or LLAMA_ARG_RPC), for its record: name, endpoint,
    memory (`model` reads "RPC worker host:port" in reports). A worker that cannot be asked is recorded with
    its endpoint and the error (the others with their devices). [] without RPC."""
    try:
        endpoints = split_endpoints(flags.value_of(flags.effective_argv(argv, env or {}), "rpc") or "")
    except ValueError as exc:
        return [{"name": "RPC", "error": str(exc)}]
    if not endpoints:
        return []
    devices, errors = workers_devices(endpoints, server_binary=server_binary, timeout_s=15)
    rows = [{**r, "model": f"RPC worker {r['endpoint']}"} for r in devices_json(devices)]
    return rows + [{"name": "RPC", "endpoint": ep, "model": f"RPC worker {ep}", "error": why}
                   for ep, why in errors.items()]


@dataclass(frozen=True)
class WorkerSpec:
    """A local ggml-rpc-server to start: which devices (`CPU`, `CUDA0`), where it listens, and its cache
    folder (`cache_dir`: tensors it received are kept there, so a restart of llama-server does not re-send
    weights)."""

    host: str = "127.0.0.1"
    port: int = 0  # 0: a free port now
    devices: tuple[str, ...] = ()
    threads: int | None = None
    cache_dir: str | None = None

    @property
    def warning(self) -> str | None:
        return bind_warning(self.host, self.port)


def worker_argv(binary: Path, spec: WorkerSpec) -> list[str]:
    f = flags.RPC_SERVER_FLAGS
    argv = [str(binary), f["host"], spec.host, f["port"], str(spec.port)]
    if spec.devices:
        argv += [f["device"], ",".join(spec.devices)]
    if spec.threads:
        argv += [f["threads"], str(spec.threads)]
    if spec.cache_dir:
        argv.append(f["cache"])
    return argv


def locate_rpc_server(settings: Settings | None = None) -> Path:
    loc = binaries.locate(binaries.RPC_SERVER, settings)
    if loc is None:
        raise WorkerError("ggml-rpc-server not found: set it in Settings, put it on PATH, set "
                          f"{binaries.ENV_VARS[binaries.RPC_SERVER]}, or rebuild the built-in llama.cpp (make run).")
    binaries.check_executable(loc.path)
    return loc.path


class LocalWorker:
    """One ggml-rpc-server this app started. `start()` returns once it accepts connections."""

    def __init__(self, spec: WorkerSpec, binary: Path) -> None:
        if spec.port == 0:
            spec = WorkerSpec(spec.host, free_port(spec.host if spec.host != "0.0.0.0" else "127.0.0.1"),
                              spec.devices, spec.threads, spec.cache_dir)
        self.spec = spec
        self.binary = binary
        self.warning = spec.warning
        env = {flags.RPC_CACHE_ENV: str(spec.cache_dir)} if spec.cache_dir else {}
        env["GGML_NO_BACKTRACE"] = "1"
        # ggml-rpc-server writes to clients without MSG_NOSIGNAL: a client gone mid-connection (a llama-server
        # killed, a timed-out --list-devices) would end it with SIGPIPE unless that signal stays ignored
        self.process = ServerProcess(worker_argv(binary, spec), child_env(env)[0], keep_lines=200,
                                     ignore_sigpipe=True)

    @property
    def endpoint(self) -> str:
        host = "127.0.0.1" if self.spec.host in ("0.0.0.0", "") else self.spec.host
        return f"{host}:{self.spec.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.alive()

    def start(self, timeout_s: float = 20.0) -> LocalWorker:
        if self.spec.cache_dir:
            Path(self.spec.cache_dir).mkdir(parents=True, exist_ok=True)
        try:
            self.process.start()
        except OSError as exc:
            raise WorkerError(f"could not start {self.binary}: {exc.strerror or exc}") from exc
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.process.alive():
                self.process.join_reader(2.0)
                tail = " / ".join(list(self.process.lines)[-3:]) or "(no output)"
                raise WorkerError(f"ggml-rpc-server exited at start (code {self.process.poll()}): {tail}")
            if reachable(self.endpoint, 0.2) is None:
                return self
            time.sleep(0.05)
        self.stop()
        raise WorkerError(f"ggml-rpc-server did not listen on {self.endpoint} within {timeout_s:g} s")

    def stop(self) -> StopResult:
        return self.process.stop(sigint_s=3.0, sigterm_s=3.0, sigkill_s=3.0)

    def to_json(self) -> dict[str, Any]:
        return {"endpoint": self.endpoint, "pid": self.pid, "devices": list(self.spec.devices),
                "cache_dir": self.spec.cache_dir, "alive": self.alive(), "warning": self.warning}


class WorkerPool:
    """The local workers one app (or one CLI command) started; `stop_all` runs at exit too."""

    def __init__(self) -> None:
        self._workers: list[LocalWorker] = []
        self._lock = threading.Lock()
        atexit.register(self.stop_all)

    def start(self, spec: WorkerSpec, settings: Settings | None = None) -> LocalWorker:
        worker = LocalWorker(spec, locate_rpc_server(settings))
        worker.start()
        with self._lock:
            self._workers.append(worker)
        return worker

    @property
    def workers(self) -> list[LocalWorker]:
        with self._lock:
            return list(self._workers)

    def stop(self, endpoint: str) -> bool:
        with self._lock:
            found = [w for w in self._workers if w.endpoint == endpoint]
            self._workers = [w for w in self._workers if w.endpoint != endpoint]
        for w in found:
            w.stop()
        return bool(found)

    def stop_all(self) -> None:
        with self._lock:
            workers, self._workers = self._workers, []
        for w in workers:
            w.stop()


def stop_local_worker(endpoint: str) -> int | None:
    """Stop a ggml-rpc-server of this user that listens on `endpoint`'s port here (one `llm-tuner workers
    start` left running, say). Returns its pid, or None when there is none."""
    _host, port = parse_endpoint(endpoint)
    for proc in psutil.process_iter(["name", "uids"]):
        try:
            if proc.info["name"] != binaries.RPC_SERVER or (os.name != "nt" and proc.info["uids"].real != os.getuid()):
                continue
            if any(c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN for c in proc.net_connections()):
                proc.terminate()
                try:
                    proc.wait(5)
                except psutil.TimeoutExpired:
                    proc.kill()
                pid: int = proc.pid
                return pid
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return None
