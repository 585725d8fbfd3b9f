"""A watched server: one session (launched or attached) + its telemetry + its record in the store.

Composition for the Live panel and `llm-tuner run`: events from the session go to the store (the
session row, each request as it finishes, the exit and a telemetry summary) and then to `on_event`;
samples go to ring buffers and to `on_samples`. Everything arrives on service threads.

The store writes run on one writer thread (`llm-tuner:history`), so a locked database never holds up the
server's log reader. A write that fails (another program holds the write lock past the busy timeout, a full
disk) keeps its requests and is tried again; the user is told at once (a HistoryStatus event and an error log
line: `run` prints them, Live's log shows the line) and again when the writes catch up or, at the end, how
many requests could not be kept.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from llm_tuner.core.settings import RpcWorker
from llm_tuner.services import logparse
from llm_tuner.services.agent import agent_readers
from llm_tuner.services.client import LlamaClient
from llm_tuner.services.failures import log_once
from llm_tuner.services.router_watch import RouterWatch
from llm_tuner.services.supervised import RequestFinished, ServerState, StateChanged, SupervisedSession
from llm_tuner.services.telemetry.host import HostReader
from llm_tuner.services.telemetry.inventory import gpu_labels
from llm_tuner.services.telemetry.readers import default_gpu_readers
from llm_tuner.services.telemetry.sampler import Sample, Telemetry
from llm_tuner.services.telemetry.server_metrics import ServerReader

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HistoryStatus:
    """How the history keeps up with a watched session (an event, and `WatchedServer.history`).

    `unsaved`: requests kept in memory because writing them failed (`error` says why; None once writes work
    again); `lost`: requests given up on (the session ended and the database stayed unwritable)."""

    unsaved: int = 0
    error: str | None = None
    lost: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None and self.lost == 0

    def text(self) -> str:
        if self.lost:
            return (f"history: {self.lost} request(s) of this session could not be kept ({self.error}); the "
                    "database stayed locked or unwritable")
        if self.error and not self.unsaved:
            return f"history: this session's record could not be written ({self.error})"
        if self.error:
            return (f"history: {self.unsaved} request(s) not written yet ({self.error}); kept in memory and "
                    "tried again")
        return "history: writes work again; every request so far is kept"

    def to_json(self) -> dict[str, Any]:
        return {"event": "history", "ok": self.ok, "unsaved": self.unsaved, "lost": self.lost, "error": self.error}


HISTORY_BATCH_S = 0.25  # a watched session's requests are written to the history in one transaction per this


def _short(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]


class _HistoryWriter:
    """The one thread that writes a session's history, in order; a failed write is retried (see module doc).

    Requests are written in batches: the requests queued at the head go in one transaction
    (`write_requests(records)`), and after a write of requests the thread gathers for `batch_s` before the
    next, so a busy server costs a few transactions a second, not one per request (each cost ~0.4 ms of CPU,
    the server's cores: benchmarks/results/live_load_profile.txt). Other ops (`fn()`: the URL, the end) keep
    their place in the order. `close(deadline_s)`: no more ops; the thread writes what is left at once and
    ends once all are written or, after `deadline_s` of failures, gives up (the requests left count as
    lost)."""

    MAX_UNSAVED = 50_000  # a database locked for hours at 15 requests/s: the oldest beyond this are lost
    MAX_BATCH = 2_000  # requests in one transaction (catching up after a lock: a few ms each)
    ONE_TRY_S = 10.0  # the longest one write takes to fail (store.db's busy timeout is 5 s), with a margin

    def __init__(self, on_status: Callable[[HistoryStatus], None], write_requests: Callable[[list[Any]], object], *,
                 retry_s: float = 1.0, batch_s: float = HISTORY_BATCH_S) -> None:
        self.on_status = on_status
        self.write_requests = write_requests
        self.retry_s = retry_s
        self.batch_s = batch_s
        self.status = HistoryStatus()
        self.transactions = 0  # writes done (for tests and benchmarks: requests per transaction)
        # (True, RequestRecord) or (False, fn); the first `_in_flight` are being written
        self._ops: collections.deque[tuple[bool, object]] = collections.deque()
        self._in_flight = 0
        self._gathering = False  # pacing between batches: a new request need not wake the thread
        self._cond = threading.Condition()
        self._closing_until: float | None = None
        self._dropped = 0
        self._thread = threading.Thread(target=self._loop, name="llm-tuner:history", daemon=True)
        self._thread.start()

    def put_request(self, rec: object) -> None:
        self._put(True, rec)

    def put(self, fn: Callable[[], object]) -> None:
        self._put(False, fn)

    def _put(self, is_request: bool, item: object) -> None:
        with self._cond:
            self._ops.append((is_request, item))
            k = self._in_flight  # the oldest not being written
            if len(self._ops) > self.MAX_UNSAVED and k < len(self._ops) and self._ops[k][0]:
                del self._ops[k]
                self._dropped += 1
            if not self._gathering:
                self._cond.notify()

    def close(self, deadline_s: float) -> bool:
        """Stop taking ops and wait for the thread: it ends once all are written, or at the first failure
        after `deadline_s` (a try under way then may take its busy timeout). True when it ended."""
        with self._cond:
            if self._closing_until is None:
                self._closing_until = time.monotonic() + deadline_s
            until = self._closing_until
            self._cond.notify()
        self._thread.join(max(0.0, until - time.monotonic()) + self.ONE_TRY_S + self.retry_s)
        return not self._thread.is_alive()

    def _unsaved(self) -> int:
        return sum(1 for is_req, _item in self._ops if is_req)

    def _set(self, status: HistoryStatus) -> None:
        if status != self.status:
            self.status = status
            self.on_status(status)

    def _take(self) -> tuple[bool, list[object]]:
        """The next write (under the lock): the requests at the head (at most MAX_BATCH), or one other op."""
        is_req, item = self._ops[0]
        if not is_req:
            self._in_flight = 1
            return False, [item]
        batch: list[object] = []
        for is_r, rec in self._ops:
            if not is_r or len(batch) >= self.MAX_BATCH:
                break
            batch.append(rec)
        self._in_flight = len(batch)
        return True, batch

    def _pause(self, seconds: float, *, closing_ends: bool) -> None:
        """Let ops queue up for `seconds` (after a write of requests: the batch; after a failure: the retry);
        new ops do not end it; a close does when `closing_ends` (what is left is then written at once)."""
        with self._cond:
            until = time.monotonic() + seconds
            self._gathering = True
            while not (closing_ends and self._closing_until is not None) and (left := until - time.monotonic()) > 0:
                self._cond.wait(left)
            self._gathering = False

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._ops and self._closing_until is None:
                    self._cond.wait()
                if not self._ops:
                    return
                is_req, batch = self._take()
            try:
                if is_req:
                    self.write_requests(batch)
                else:
                    op = batch[0]
                    assert callable(op)  # put() queues only functions beside the requests
                    op()
            except Exception as exc:  # noqa: BLE001 - kept and retried; the user is told (HistoryStatus)
                log_once("writing a session's history", exc, logger=log)
                with self._cond:
                    self._in_flight = 0
                    given_up = self._closing_until is not None and time.monotonic() >= self._closing_until
                    if given_up:
                        lost = self._unsaved()
                        self._ops.clear()
                    unsaved = self._unsaved()
                if given_up:
                    self._set(HistoryStatus(0, _short(exc), lost + self._dropped))
                    return
                self._set(HistoryStatus(unsaved, _short(exc), self._dropped))
                self._pause(self.retry_s, closing_ends=False)
                continue
            with self._cond:
                for _ in range(self._in_flight):
                    self._ops.popleft()
                self._in_flight = 0
                self.transactions += 1
                unsaved = self._unsaved() if self.status.error is not None else 0
            if self.status.error is not None and unsaved == 0:  # caught up
                self._set(HistoryStatus(0, None, self._dropped))
            if is_req:
                self._pause(self.batch_s, closing_ends=True)


class WatchedServer:
    """Session + telemetry + store. `start()` returns at once; `stop()` stops (or detaches) and records.

    `agents`: the RPC workers (core.settings.RpcWorker) whose agent's GPU samples join the telemetry.
    `history_retry_s`: the pause between tries of a failed history write; `history_give_up_s`: how long, once
    the session ended, writes are still tried before the requests left are reported lost.
    """

    # repo: store.sessions.SessionRepository (or a test's own), None: no history kept
    def __init__(self, session: SupervisedSession, *, repo: Any = None, profile_version_id: int | None = None,
                 on_event: Callable[[object], None] | None = None,
                 on_samples: Callable[[Sequence[Sample]], None] | None = None,
                 gpu_readers: dict[str, Any] | None = None, rates_s: dict[str, float] | None = None,
                 capacity: int = 36_000, telemetry: bool = True, agents: Sequence[RpcWorker] = (),
                 history_retry_s: float = 1.0, history_give_up_s: float = 15.0,
                 on_sampler_error: Callable[[str, str], None] | None = None) -> None:
        self.session = session
        self.history_retry_s = history_retry_s
        self.history_give_up_s = history_give_up_s
        self._writer: _HistoryWriter | None = None
        self.repo = repo
        self.profile_version_id = profile_version_id
        self.session_id: int | None = None
        self._user_on_event = on_event
        self.notes: list[str] = []
        session.on_event = self._on_event
        readers: dict[str, Any] = {}
        if telemetry:
            if gpu_readers is None:
                gpu_readers, self.notes = default_gpu_readers(self._pids, self._gpu_labels)
            readers.update(gpu_readers)
            readers.update(agent_readers(agents))  # RPC workers' GPUs, from their `llm-tuner agent`
            readers["host"] = HostReader(lambda: session.pid)
            readers["server"] = self._server_reader()
        self.telemetry = Telemetry(readers, rates_s=rates_s, capacity=capacity, on_samples=on_samples,
                                   on_error=on_sampler_error)
        self._ended = threading.Event()
        # a router's models (RouterModels events)
        self.router = RouterWatch(session, self._forward, self._ended)

    def _gpu_labels(self) -> dict[str, str]:
        """llama.cpp names for the GPU samples (CUDA0), as the memory plan and the server's log use them."""
        plan = self.session.plan
        return gpu_labels(plan.binary if plan is not None else None)

    def api_key(self) -> str | None:
        """The key a client of this server sends (the launch's, or the one given when attaching), or None."""
        return self.session.api_key

    def _pids(self) -> frozenset[int]:
        pid = self.session.pid
        return frozenset({pid}) if pid else frozenset()

    def _server_reader(self) -> Callable[[], list[Any]]:
        holder: dict[str, ServerReader] = {}

        def read() -> list[Any]:
            if self.session.state != ServerState.READY or not self.session.url:
                return []
            reader = holder.get(self.session.url)
            if reader is None:
                holder.clear()
                reader = holder[self.session.url] = ServerReader(
                    LlamaClient(self.session.url, api_key=self.session.api_key, timeout=2.0))
            return reader()

        return read

    def start(self) -> None:
        if self.repo is not None:
            argv = self.session.plan.argv if self.session.plan is not None else []
            try:
                self.session_id = self.repo.begin(argv, started_unix=time.time(), mode=self.session.kind,
                                                  url=self.session.url,
                                                  profile_version_id=self.profile_version_id)
            except Exception as exc:  # noqa: BLE001 - watching works without the history
                self.notes.append(f"this session is not recorded in the history: {exc.__class__.__name__}: "
                                  f"{str(exc).splitlines()[0]}")
            else:
                sid = self.session_id
                self._writer = _HistoryWriter(self._on_history_status,
                                              lambda recs: self.repo.add_requests(sid, recs),
                                              retry_s=self.history_retry_s)
        self.telemetry.start()
        self.router.start()
        self.session.start()

    @property
    def history(self) -> HistoryStatus:
        """Whether the history keeps up (see HistoryStatus); all clear when nothing is recorded."""
        return self._writer.status if self._writer is not None else HistoryStatus()

    def stop(self) -> None:
        self.session.stop()
        self.session.wait(15.0)
        self._ended.wait(5.0 + self.history_give_up_s + _HistoryWriter.ONE_TRY_S)
        if self._writer is not None:  # ended already (EXITED closed it); else a session that never ran
            self._writer.close(0.0)
        self.router.join(5.0)

    def _on_history_status(self, status: HistoryStatus) -> None:
        try:
            self._forward(status)
            self._forward(logparse.LogLine("info" if status.ok else "error", status.text()))
        except Exception as exc:  # noqa: BLE001 - a consumer bug must not stop the history writer
            log_once("a consumer of a session's history status failed", exc, logger=log)

    def _forward(self, ev: object) -> None:
        if self._user_on_event is not None:
            self._user_on_event(ev)

    def wait(self, timeout: float | None = None) -> bool:
        return self._ended.wait(timeout)

    def _on_event(self, ev: object) -> None:
        writer, sid = self._writer, self.session_id
        if writer is not None and sid is not None:
            if isinstance(ev, RequestFinished):
                writer.put_request(ev.record)
            elif isinstance(ev, StateChanged) and ev.state == ServerState.READY and ev.url:
                url = ev.url
                writer.put(lambda: self.repo.set_url(sid, url))
        if isinstance(ev, StateChanged) and ev.state == ServerState.EXITED:
            self.telemetry.stop()
            if writer is not None and sid is not None:
                reason = ev.reason if ev.failure is None else f"{ev.reason} — {ev.failure.message}"
                summary = self.telemetry.summary()
                writer.put(lambda: self.repo.end(sid, ended_unix=ev.t, exit_code=ev.code, exit_reason=reason,
                                                 telemetry_summary=summary))
                writer.close(self.history_give_up_s)  # recorded (or given up on, and said) before "exited"
        self._forward(ev)
        if isinstance(ev, StateChanged) and ev.state == ServerState.EXITED:
            self._ended.set()
