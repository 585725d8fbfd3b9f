"""A watched server: one session (launched or attached) + its telemetry + its record in the store.

Composition for the Live panel and `llm-tuner run`: events from the session go to the store (the
session row, each request as it finishes, the exit and a telemetry summary) and then to `on_event`;
samples go to ring buffers and to `on_samples`. Everything arrives on service threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from llm_tuner.services.server import (
    AttachedSession,
    RequestFinished,
    ServerSession,
    ServerState,
    StateChanged,
)
from llm_tuner.services.telemetry.sampler import GpuReader, Sample, Telemetry


def default_gpu_readers(pids: Callable[[], frozenset[int]], labels=None) -> tuple[dict, list[str]]:
    """GPU readers for the vendors present here, and notes for those that are not.

    `labels` names the samples ({"nvidia:0": "CUDA0"} or a callable giving it; see GpuReader).
    """
    from llm_tuner.services.telemetry.amd import AmdSource
    from llm_tuner.services.telemetry.nvml import THROTTLE_MASK, NvmlSource

    readers: dict = {}
    notes: list[str] = []
    nv = NvmlSource()
    if nv.count:
        readers["gpu:nvidia"] = GpuReader(nv, "nvidia", pids, THROTTLE_MASK, labels=labels)
    elif nv.reason:
        notes.append(nv.reason)
    amd = AmdSource()
    if amd.count:
        readers["gpu:amd"] = GpuReader(amd, "amd", labels=labels)
    elif amd.reason:
        notes.append(amd.reason)
    return readers, notes


class WatchedServer:
    """Session + telemetry + store. `start()` returns at once; `stop()` stops (or detaches) and records.

    `agents`: the RPC workers (core.settings.RpcWorker) whose agent's GPU samples join the telemetry.
    """

    def __init__(self, session: ServerSession | AttachedSession, *, repo=None, profile_version_id: int | None = None,
                 on_event: Callable[[object], None] | None = None,
                 on_samples: Callable[[Sequence[Sample]], None] | None = None,
                 gpu_readers: dict | None = None, rates_s: dict[str, float] | None = None,
                 capacity: int = 36_000, telemetry: bool = True, agents: Sequence[object] = ()) -> None:
        self.session = session
        self.repo = repo
        self.profile_version_id = profile_version_id
        self.session_id: int | None = None
        self._user_on_event = on_event
        self.notes: list[str] = []
        session.on_event = self._on_event
        readers: dict = {}
        if telemetry:
            if gpu_readers is None:
                gpu_readers, self.notes = default_gpu_readers(self._pids, self._gpu_labels)
            readers.update(gpu_readers)
            from llm_tuner.services.agent import agent_readers

            readers.update(agent_readers(agents))  # RPC workers' GPUs, from their `llm-tuner agent`
            from llm_tuner.services.telemetry.host import HostReader

            readers["host"] = HostReader(lambda: session.pid)
            readers["server"] = self._server_reader()
        self.telemetry = Telemetry(readers, rates_s=rates_s, capacity=capacity, on_samples=on_samples)
        self._ended = threading.Event()

    def _gpu_labels(self) -> dict[str, str]:
        """llama.cpp names for the GPU samples (CUDA0), as the memory plan and the server's log use them."""
        from llm_tuner.services.telemetry.inventory import gpu_labels

        plan = getattr(self.session, "plan", None)
        return gpu_labels(plan.binary if plan is not None else None)

    def _api_key(self) -> str | None:
        plan = getattr(self.session, "plan", None)
        return plan.api_key if plan is not None else getattr(self.session, "api_key", None)

    def _pids(self) -> frozenset[int]:
        pid = self.session.pid
        return frozenset({pid}) if pid else frozenset()

    def _server_reader(self):
        from llm_tuner.services.client import LlamaClient
        from llm_tuner.services.telemetry.server_metrics import ServerReader

        holder: dict = {}

        def read():
            if self.session.state != ServerState.READY or not self.session.url:
                return []
            reader = holder.get(self.session.url)
            if reader is None:
                holder.clear()
                reader = holder[self.session.url] = ServerReader(
                    LlamaClient(self.session.url, api_key=self._api_key(), timeout=2.0))
            return reader()

        return read

    def start(self) -> None:
        if self.repo is not None:
            argv = self.session.plan.argv if self.session.plan is not None else []
            mode = "attach" if isinstance(self.session, AttachedSession) else "launch"
            import time

            try:
                self.session_id = self.repo.begin(argv, started_unix=time.time(), mode=mode,
                                                  url=getattr(self.session, "url", None),
                                                  profile_version_id=self.profile_version_id)
            except Exception as exc:  # noqa: BLE001 - watching works without the history
                self.notes.append(f"this session is not recorded in the history: {exc.__class__.__name__}: "
                                  f"{str(exc).splitlines()[0]}")
        self.telemetry.start()
        self.session.start()

    def stop(self) -> None:
        self.session.stop()
        self.session.wait(15.0)
        self._ended.wait(5.0)

    def wait(self, timeout: float | None = None) -> bool:
        return self._ended.wait(timeout)

    def _on_event(self, ev: object) -> None:
        if self.repo is not None and self.session_id is not None:
            try:
                if isinstance(ev, RequestFinished):
                    self.repo.add_request(self.session_id, ev.record)
                elif isinstance(ev, StateChanged) and ev.state == ServerState.READY and ev.url:
                    self.repo.set_url(self.session_id, ev.url)
            except Exception:  # noqa: BLE001 - a locked database must not stop watching
                pass
        if isinstance(ev, StateChanged) and ev.state == ServerState.EXITED:
            self.telemetry.stop()
            if self.repo is not None and self.session_id is not None:
                try:
                    reason = ev.reason if ev.failure is None else f"{ev.reason} — {ev.failure.message}"
                    self.repo.end(self.session_id, ended_unix=ev.t, exit_code=ev.code, exit_reason=reason,
                                  telemetry_summary=self.telemetry.summary())
                except Exception:  # noqa: BLE001
                    pass
        if self._user_on_event is not None:
            self._user_on_event(ev)
        if isinstance(ev, StateChanged) and ev.state == ServerState.EXITED:
            self._ended.set()
