"""`llm-tuner agent`: this machine's GPU samples over HTTP, for the Live panel of the machine running
llama-server with this one as an RPC worker; and `AgentReader`, the Live side that reads them.

Headless: no Qt (import-linter: services never touch Qt; tests/unit/test_agent.py imports the command
and checks). The samples come from the same readers as the local sampler (services.telemetry: NVML, AMD),
read on request (at most every `min_interval_s`). Bound to loopback by default; bound anywhere else it
requires a token (generated and printed at start unless given), sent as `Authorization: Bearer <token>`.
The token can come from $LLM_TUNER_AGENT_TOKEN or a file (read_token), so `ps` never shows it.

Hostile clients: a request must arrive whole (headers included) within REQUEST_TIMEOUT_S or its connection is
closed (a thread each would otherwise be held); the listen backlog is LISTEN_BACKLOG; on loopback a request
whose Host header is not a loopback name is refused (403), so a web page cannot reach the agent through a
DNS name rebound to 127.0.0.1.

    GET /v1/gpus  ->  {"host": "<hostname>", "samples": [GpuSample as JSON, ...], "errors": {...}}
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, fields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from llm_tuner.core.rpc import is_loopback
from llm_tuner.core.settings import RpcWorker
from llm_tuner.services.telemetry.inventory import gpu_labels
from llm_tuner.services.telemetry.readers import default_gpu_readers
from llm_tuner.services.telemetry.sampler import THREAD_PREFIX, GpuSample

DEFAULT_PORT = 50100
PATH = "/v1/gpus"
# the agent's token, and the one `workers add` gives a worker, off the command line
TOKEN_ENV = "LLM_TUNER_AGENT_TOKEN"
REQUEST_TIMEOUT_S = 10.0  # a whole request (headers and all): a client that sends nothing more is cut off
LISTEN_BACKLOG = 128  # connections waiting to be accepted (socketserver's default is 5)
_GPU_KEYS = {f.name for f in fields(GpuSample)}


def read_token(value: str | None = None, path: str | None = None) -> str | None:
    """The token given: from a file (`path`, first line; "-" is stdin), else `value`, else
    $LLM_TUNER_AGENT_TOKEN.

    Raises:
        ValueError: the file cannot be read or holds no token (the message names it).
    """
    if path:
        try:
            text = sys.stdin.readline() if path == "-" else Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read the token file {path}: {exc}") from None
        token = (text.strip().splitlines() or [""])[0].strip()
        if not token:
            raise ValueError(f"the token file {path} is empty")
        return token
    return value or os.environ.get(TOKEN_ENV) or None


def _loopback_host_header(value: str | None) -> bool:
    """Whether a Host header names this machine's loopback (`localhost`, `127.0.0.1`, `[::1]`, with a
    port)."""
    if not value:
        return False
    host = value.strip()
    if host.startswith("["):
        host = host[1:host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.split(":")[0]
    host = host.rstrip(".").lower()
    return host == "localhost" or host.endswith(".localhost") or is_loopback(host)


class _Server(ThreadingHTTPServer):
    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away or was cut off (OSError) is no error of ours: no traceback on the
        terminal."""
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


def default_readers() -> tuple[dict[str, Callable[[], Sequence[GpuSample]]], list[str]]:
    """This machine's GPU readers (the local sampler's), named by llama.cpp where a llama-server says."""
    readers, notes = default_gpu_readers(frozenset, gpu_labels)
    return dict(readers.items()), notes


class AgentServer:
    """The agent's HTTP server on its own thread (`llm-tuner:agent`). `start()` returns once it listens."""

    def __init__(self, host: str = "127.0.0.1", port: int = DEFAULT_PORT, *, token: str | None = None,
                 readers: dict[str, Callable[[], Sequence[GpuSample]]] | None = None,
                 min_interval_s: float = 0.2, request_timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self.host = host
        self.loopback = is_loopback(host)
        self.token = token if token or self.loopback else secrets.token_urlsafe(24)
        self.notes: list[str] = []
        if readers is None:
            readers, self.notes = default_readers()
        self.readers = readers
        self.min_interval_s = min_interval_s
        self.request_timeout_s = request_timeout_s  # tests shorten it; clients keep REQUEST_TIMEOUT_S
        self._lock = threading.Lock()
        self._last: tuple[float, dict[str, Any]] | None = None
        self._httpd = _Server((host, port), self._handler())
        self.port = self._httpd.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{('[' + host + ']') if ':' in host else host}:{self.port}"

    def snapshot(self) -> dict[str, Any]:
        """Every reader's newest samples (cached for `min_interval_s`, so many clients cost one read)."""
        with self._lock:
            now = time.monotonic()
            if self._last is not None and now - self._last[0] < self.min_interval_s:
                return self._last[1]
            samples, errors = [], {}
            for name, read in self.readers.items():
                try:
                    samples += [asdict(s) for s in read()]
                except Exception as exc:  # noqa: BLE001 - one vendor's hiccup; the others still answer
                    errors[name] = f"{exc.__class__.__name__}: {exc}"
            body = {"host": socket.gethostname(), "samples": samples, "errors": errors}
            self._last = (now, body)
            return body

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        agent = self

        class Handler(BaseHTTPRequestHandler):
            timeout = agent.request_timeout_s  # each read; the whole request's bound is the timer in setup()

            def log_message(self, *_a: Any) -> None:  # quiet: one line per request would flood a terminal
                pass

            def setup(self) -> None:
                super().setup()
                self._cut = threading.Timer(agent.request_timeout_s, self._cut_off)
                self._cut.name = f"{THREAD_PREFIX}agent-request-timeout"
                self._cut.daemon = True
                self._cut.start()

            def _cut_off(self) -> None:  # a request that trickles in: its connection ends, its thread with it
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

            def finish(self) -> None:
                self._cut.cancel()
                super().finish()

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._cut.cancel()  # the request is in; the answer is ours to send
                if agent.loopback and not _loopback_host_header(self.headers.get("Host")):
                    return self._send(403, {"error": "this agent answers loopback names only (Host: 127.0.0.1 "
                                            "or localhost); bind it elsewhere with a token to reach it by name"})
                if agent.token is not None:
                    given = self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
                    if not hmac.compare_digest(given.encode(), agent.token.encode()):
                        return self._send(401, {"error": "a token is required: Authorization: Bearer <token>"})
                if self.path.split("?")[0] != PATH:
                    return self._send(404, {"error": f"unknown path; GET {PATH}"})
                self._send(200, agent.snapshot())

        return Handler

    def start(self) -> AgentServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name=f"{THREAD_PREFIX}agent", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:  # shutdown() waits for serve_forever: only once it ran
            self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(5.0)


class AgentReader:
    """A GPU reader (as services.telemetry.sampler.GpuReader) over an agent: its samples, each device named
    `<label> <device>` (label: the worker's host:port) so that they plot beside the local GPUs."""

    def __init__(self, url: str, token: str | None = None, label: str | None = None, timeout_s: float = 1.0) -> None:
        self.url = url.rstrip("/")
        self.label = label or urlsplit(self.url).netloc
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout_s = timeout_s

    def __call__(self) -> list[GpuSample]:
        r = httpx.get(self.url + PATH, headers=self.headers, timeout=self.timeout_s)
        if r.status_code == 401:
            raise PermissionError(f"the agent at {self.url} wants its token (Settings → RPC workers)")
        r.raise_for_status()
        out = []
        t = time.time()  # this machine's clock: the plots share one time axis
        for s in r.json().get("samples", []):
            d = {k: v for k, v in s.items() if k in _GPU_KEYS}
            d.update(t=t, device=f"{self.label} {d.get('device', '?')}")
            out.append(GpuSample(**d))
        return out


def agent_readers(workers: Sequence[RpcWorker]) -> dict[str, AgentReader]:
    """Readers for the workers (core.settings.RpcWorker) that name an agent, keyed for Telemetry
    ("gpu:...")."""
    return {f"gpu:agent:{w.endpoint}": AgentReader(w.agent_url, w.agent_token, label=w.endpoint)
            for w in workers if w.agent_url}
