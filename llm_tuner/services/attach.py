"""Watch a llama-server someone else started, by URL: AttachedSession, a
services.supervised.SupervisedSession.

The app does not own the process (no pid, no plan; stop = detach). Requests come from the server's log file
when the user names it (precise), else from `/slots` and `/metrics` deltas (approximate).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from llm_tuner.services import logparse
from llm_tuner.services.client import BadAnswer, LlamaClient
from llm_tuner.services.failures import log_once
from llm_tuner.services.supervised import (
    RequestFinished,
    ServerState,
    SupervisedSession,
    record_from_slots,
)
from llm_tuner.services.telemetry.server_metrics import SlotWatcher, endpoint_off, parse_metrics


def _remote(exc: BaseException) -> bool:
    """A failure of the server's answer (not JSON, not llama-server's, a dropped connection), not of our
    code."""
    return isinstance(exc, (BadAnswer, httpx.HTTPError))

class AttachedSession(SupervisedSession):
    """Watch a llama-server someone else started, by URL, without owning it (stop = detach).

    With `log_path` the log file is followed from its end and parsed like a launched server's output
    (precise per-request records). Without it, finished requests are inferred from `/slots` and the
    `/metrics` deltas and marked approximate.
    """

    kind = "attach"

    def __init__(self, url: str, on_event: Callable[[object], None], *, log_path: str | Path | None = None,
                 api_key: str | None = None, poll_s: float = 0.5,
                 client_factory: Callable[..., LlamaClient] | None = None,
                 connect_timeout_s: float = 5.0, gone_grace_s: float = 10.0) -> None:
        super().__init__(on_event)
        self.url = url.rstrip("/")
        self.connect_timeout_s = connect_timeout_s  # nothing answers at all: the attach fails
        self.gone_grace_s = gone_grace_s  # state GONE this long, then the session ends as failed
        self.log_path = Path(log_path) if log_path else None
        self._api_key = api_key
        self.poll_s = poll_s
        self._stop = threading.Event()
        self._done = threading.Event()
        self._parser = logparse.LogParser()
        self._finish_lock = threading.Lock()
        client_factory = client_factory or LlamaClient
        self._client = client_factory(self.url, api_key=api_key, timeout=5.0) if api_key else \
            client_factory(self.url, timeout=5.0)
        self._threads: list[threading.Thread] = []

    @property
    def plan(self) -> None:
        return None  # someone else's server: its command is not known here

    @property
    def pid(self) -> None:
        return None  # not the app's process

    @property
    def api_key(self) -> str | None:
        return self._api_key

    def start(self) -> None:
        # the log's end is taken first: what is written once `started_unix` is set is never missed (a caller
        # that waits for it and then writes, as a test does, must not race the offset)
        end = (self.log_path.stat().st_size if self.log_path.exists() else 0) if self.log_path else None
        self.started_unix = time.time()
        self._set_state(ServerState.STARTING)
        targets: list[tuple[Callable[..., None], tuple[Any, ...]]] = [(self._poll_loop, ())]
        if end is not None:
            targets.append((self._tail_loop, (end,)))
        for fn, args in targets:
            t = threading.Thread(target=fn, args=args, name=f"attach-{fn.__name__}", daemon=True)
            self._threads.append(t)
            t.start()

    def stop(self, sigint_s: float = 10.0, sigterm_s: float = 5.0, sigkill_s: float = 5.0) -> None:
        """Detach (the server runs on; the timeouts of a launch's stop do not apply)."""
        if self._done.is_set():
            return
        self._stop.set()
        self._set_state(ServerState.STOPPING)
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(5.0)
        self._finish("detached", None)

    def _finish(self, reason: str, failure: logparse.Failure | None) -> None:
        with self._finish_lock:
            if self._done.is_set():
                return
            self._mark_exited(None, reason, failure)
            self._client.close()
            self._done.set()

    def _give_up(self, kind: str, message: str) -> None:
        """The poll loop ends the session: nothing answered, or a server stopped answering for the grace
        period."""
        self._stop.set()
        self._emit(logparse.LogLine("error", message))
        self._finish(kind, logparse.Failure(kind=kind, message=message, evidence=""))

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def abandon(self, failure: logparse.Failure) -> None:
        self._stop.set()
        self._finish("could not start", failure)

    def alive(self) -> bool:
        return self.state in (ServerState.READY, ServerState.LOADING)

    def _poll_loop(self) -> None:
        watcher = SlotWatcher()
        # An endpoint the server will never answer (server_metrics.endpoint_off: no --metrics, --no-slots, a
        # router) is not asked again: llama-server closes the connection after a 501 while promising
        # keep-alive, so asking every poll made a connection per poll (299 of 300, measured), and the next
        # request could meet the close.
        has_metrics = has_slots = True
        was_reachable = None
        ever_reachable = False
        since = time.monotonic()  # of the attach, then of the last answer
        while not self._stop.is_set():
            h = self._client.health(timeout=2.0)
            if h.status_code is not None:
                ever_reachable, since = True, time.monotonic()
            elif not ever_reachable and time.monotonic() - since >= self.connect_timeout_s:
                return self._give_up("unreachable", f"nothing answers at {self.url} ({h.message}): is the "
                                     "server running, and is the URL (host and port) right?")
            elif ever_reachable and time.monotonic() - since >= self.gone_grace_s:
                return self._give_up("gone", f"the server at {self.url} stopped answering "
                                     f"{self.gone_grace_s:g} s ago ({h.message}); it was stopped or crashed")
            if h.status_code == 503:
                self._set_state(ServerState.LOADING)
            if (h.status_code is not None) != was_reachable:
                was_reachable = h.status_code is not None
                if not was_reachable:
                    self._emit(logparse.LogLine("warn",
                                                f"server at {self.url} is not reachable ({h.message})"))
                    self._set_state(ServerState.GONE if ever_reachable else ServerState.STARTING)
            if h.ready and self.log_path is None and has_slots:
                try:
                    slots = self._client.slots()
                    metrics = {}
                    if has_metrics:
                        try:
                            metrics = parse_metrics(self._client.metrics_text())
                        except Exception as exc:  # noqa: BLE001 - this poll counts from /slots only
                            has_metrics = not endpoint_off(exc)
                            if has_metrics:  # a transient failure
                                log_once(f"reading /metrics of {self.url}", exc, trace=not _remote(exc))
                    for a in watcher.update(slots, metrics):
                        self._emit(RequestFinished(record_from_slots(a)))
                except Exception as exc:  # noqa: BLE001 - a transient error: the next poll asks again
                    has_slots = not endpoint_off(exc)
                    if has_slots:
                        log_once(f"reading /slots of {self.url}", exc, trace=not _remote(exc))
                    else:
                        self._emit(logparse.LogLine("warn", f"the server at {self.url} does not answer "
                                                    "/slots (started with --no-slots, or a router): its "
                                                    "requests cannot be seen without its log"))
            if h.ready:  # after the first /slots + /metrics poll, so requests sent on "ready" have a baseline
                self._set_state(ServerState.READY)
            self._stop.wait(self.poll_s)

    def _tail_loop(self, pos: int) -> None:
        assert self.log_path is not None
        buf = ""
        said = ""  # why the log could not be read, as last said ('': it was read, or nothing said yet)
        while not self._stop.is_set():
            try:
                size = self.log_path.stat().st_size
                if size < pos:  # rotated or truncated: start over
                    pos = 0
                if size > pos:
                    with open(self.log_path, encoding="utf-8", errors="replace") as f:
                        f.seek(pos)
                        buf += f.read()
                        pos = f.tell()
                    *lines, buf = buf.split("\n")
                    for line in lines:
                        for ev in self._parser.feed(line):
                            self._on_log_event(ev)
                said = ""
            except OSError as exc:
                # a wrong path or an unreadable file: with a log named, /slots is not polled, so no request
                # would ever show; said once per reason (a file that appears later is still followed)
                why = exc.strerror or str(exc)
                if why != said:
                    said = why
                    self._emit(logparse.LogLine(
                        "warn", f"the log file {self.log_path} cannot be read ({why}): this server's "
                        "requests are not seen until it can. Check the path, or attach again without a log "
                        "file (requests then come from /slots, approximate)."))
            self._stop.wait(0.25)
