"""HTTP client for llama-server: /health /props /slots /metrics /completion /v1/chat/completions /tokenize.

Thin and synchronous (httpx); callers run it off the GUI thread. Streamed answers (server-sent events) are
read by sse_events and can be cancelled from another thread (a threading.Event, seen within CANCEL_POLL_S).

Every read is bounded, so a server that lies (or is not llama-server at all) cannot hold a caller or fill its
memory: an answer must arrive whole, headers included, within the call's timeout (a body that trickles one
byte a second is cut off at the deadline, not each second's read; at most SHORT_CALL_S for all but
/completion), be at most MAX_BODY_BYTES (a streamed event at most MAX_EVENT_BYTES, each within the timeout),
and be JSON of the shape llama-server sends; anything else is a BadAnswer (a ServerError) that says what was
wrong.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

from llm_tuner.core.server_endpoints import RouterModel, parse_router_models

MAX_BODY_BYTES = 8 * 2**20  # llama-server's answers are KiB (/props with a long chat template: ~100 KiB)
MAX_EVENT_BYTES = 2 * 2**20  # one streamed /completion event (a token or a few, with probabilities if asked)
# the longest /props /slots /metrics /tokenize /detokenize may take (the timeout, if shorter)
SHORT_CALL_S = 60.0


class ServerError(Exception):
    """The server answered with an error body: `{"error": {"code", "message", "type"}}`."""

    def __init__(self, status: int, message: str, kind: str | None = None) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message
        self.kind = kind


class BadAnswer(ServerError):
    """The server's answer is not what llama-server sends: too big, too slow to arrive whole, not JSON, or
    JSON of another shape. `message` says which, for the user."""

    def __init__(self, status: int, path: str, what: str) -> None:
        super().__init__(status, f"the answer to {path} is not llama-server's: {what}", "bad_answer")


# -- deadlines: a bound on a whole answer, not on each read -------------------------------------------

_deadline = threading.local()  # .at: the monotonic time by which the current call's reads must be done


def _bounded(timeout: float | None) -> float | None:
    at: float | None = getattr(_deadline, "at", None)  # a threading.local: unset on a thread that set none
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise httpcore.ReadTimeout("the answer did not arrive whole in time")
    return left if timeout is None else min(timeout, left)


@contextmanager
def _within(seconds: float | None) -> Iterator[None]:
    """Reads and writes on this thread end by `seconds` from now (nested calls keep the earlier end)."""
    prev = getattr(_deadline, "at", None)
    if seconds is not None:
        end = time.monotonic() + seconds
        _deadline.at = end if prev is None else min(prev, end)
    try:
        yield
    finally:
        _deadline.at = prev


# -- cancel: a stream the user stops ends within CANCEL_POLL_S, while waiting for headers or the next event
# --------

CANCEL_POLL_S = 0.2
# .event: the threading.Event that cancels the current call's reads on this thread
_cancel = threading.local()


@contextmanager
def _cancellable(event: threading.Event | None) -> Iterator[None]:
    """Reads on this thread wait in slices of CANCEL_POLL_S and end with StreamCancelled once `event` is
    set."""
    prev = getattr(_cancel, "event", None)
    _cancel.event = event
    try:
        yield
    finally:
        _cancel.event = prev


def _read(stream: httpcore.NetworkStream, max_bytes: int, timeout: float | None) -> bytes:
    event = getattr(_cancel, "event", None)
    if event is None:
        return stream.read(max_bytes, _bounded(timeout))
    while True:  # a socket read that timed out took nothing: the next slice reads on where it left off
        if event.is_set():
            raise StreamCancelled()
        left = _bounded(timeout)
        if left is not None and left <= CANCEL_POLL_S:
            return stream.read(max_bytes, left)
        try:
            return stream.read(max_bytes, CANCEL_POLL_S)
        except httpcore.ReadTimeout:
            continue


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return _read(self._stream, max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _bounded(timeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, _bounded(timeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's own sockets, each read and write given at most the time left to the call (see _within)."""

    def __init__(self) -> None:
        self._backend = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._backend.connect_tcp(host, port, _bounded(timeout), local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._backend.connect_unix_socket(path, _bounded(timeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def _transport() -> httpx.HTTPTransport:
    transport = httpx.HTTPTransport()
    limits = httpx.Limits()
    transport._pool = httpcore.ConnectionPool(  # httpx's own limits (TLS: httpcore's default context), over
        max_connections=limits.max_connections,  # the deadline-aware sockets
        max_keepalive_connections=limits.max_keepalive_connections, keepalive_expiry=limits.keepalive_expiry,
        network_backend=_DeadlineBackend())
    return transport


@dataclass(frozen=True)
class Health:
    status_code: int | None  # None: nothing listening
    ready: bool
    message: str


@dataclass(frozen=True)
class _Answer:
    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")


def _error_message(data: Any, fallback: str) -> tuple[str, str | None]:
    """llama-server's `{"error": {"message", "type"}}` (or a bare string), else the start of the body."""
    err = data.get("error") if isinstance(data, dict) else None
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        return err["message"][:500], err.get("type") if isinstance(err.get("type"), str) else None
    if isinstance(err, str):
        return err[:500], None
    return fallback[:200], None

# a router answers these itself (no model named)
_ROUTER_OWN = ("/health", "/v1/health", "/models", "/v1/models", "/models/load", "/models/unload")


class LlamaClient:
    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 600.0, *,
                 model: str | None = None) -> None:
        """`model`: the model of a router (llama-server in router mode) every request is for: sent as the JSON
        body's `model` and as `?model=` on GETs (/props, /slots, /metrics, which a router passes on to that
        model's instance); None for a server of one model."""
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        if model:
            # A router closes the connection after every answer it passes on from a model's instance while its
            # headers promise keep-alive: a request sent on that connection before its close arrived failed
            # with "Server disconnected without sending a response" (1 benchmark in 5 on the real router).
            # Each request gets a connection of its own, as the router gives it anyway.
            headers["Connection"] = "close"
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout  # the longest a whole answer (or one streamed event) may take
        self._http = httpx.Client(base_url=self.base_url, headers=headers, transport=_transport(),
                                  timeout=httpx.Timeout(timeout, connect=5.0))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LlamaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers --------------------------------------------------------------------------------
    def _fetch(self, method: str, path: str, *, timeout: float | None = None, **kw: Any) -> _Answer:
        """One whole answer, bounded in size (MAX_BODY_BYTES) and in time (`timeout`, else the client's)."""
        limit = self.timeout if timeout is None else timeout
        kw = self._for_model(method, path, kw)
        with _within(limit), self._http.stream(method, path, timeout=limit, **kw) as r:
            declared = r.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
                raise BadAnswer(r.status_code, path, f"{int(declared):,} bytes announced, more than the "
                                f"{MAX_BODY_BYTES // 2**20} MiB any of its answers takes")
            body = bytearray()
            for chunk in r.iter_bytes():
                body += chunk
                if len(body) > MAX_BODY_BYTES:
                    raise BadAnswer(r.status_code, path, f"more than the {MAX_BODY_BYTES // 2**20} MiB any "
                                    "of its answers takes")
            return _Answer(r.status_code, bytes(body))

    def _for_model(self, method: str, path: str, kw: dict[str, Any]) -> dict[str, Any]:
        """The request's arguments naming the client's router model (see __init__); unchanged without one, and
        for the router's own endpoints (/health, /models)."""
        if not self.model or path in _ROUTER_OWN:
            return kw
        if isinstance(kw.get("json"), dict):
            return {**kw, "json": {"model": self.model, **kw["json"]}}
        if method in ("GET", "HEAD"):
            return {**kw, "params": {"model": self.model, **(kw.get("params") or {})}}
        return kw

    def _check(self, r: _Answer, path: str = "") -> _Answer:
        if r.status_code >= 400:
            try:
                data = json.loads(r.content)
            except ValueError:
                data = None
            message, kind = _error_message(data, r.text)
            raise ServerError(r.status_code, message, kind)
        return r

    def _json(self, method: str, path: str, shape: type | tuple[type, ...], **kw: Any) -> Any:
        """The answer's JSON, checked to be of `shape` (dict or list)."""
        r = self._check(self._fetch(method, path, **kw), path)
        try:
            data = json.loads(r.content)
        except ValueError:
            raise BadAnswer(r.status_code, path, f"not JSON ({r.text[:60]!r})") from None
        if not isinstance(data, shape):
            raise BadAnswer(r.status_code, path, f"JSON {type(data).__name__}, not an object of its fields")
        return data

    # -- endpoints ------------------------------------------------------------------------------
    def health(self, timeout: float = 2.0) -> Health:
        """/health within `timeout` (all of it: connect, headers, body). Never raises."""
        try:
            r = self._fetch("GET", "/health", timeout=timeout)
        # no llama-server answers there: as unreachable, so an attach ends saying why
        except BadAnswer as exc:
            return Health(None, False, exc.message)
        except httpx.TimeoutException as exc:
            return Health(None, False, f"no whole answer within {timeout:g} s ({exc.__class__.__name__})")
        except httpx.HTTPError as exc:
            return Health(None, False, f"not reachable: {exc.__class__.__name__}")
        if r.status_code == 200:
            return Health(200, True, "ok")
        try:
            data = json.loads(r.content)
        except ValueError:
            data = None
        return Health(r.status_code, False, _error_message(data, r.text)[0][:100])

    def wait_ready(self, timeout: float = 120.0, poll_s: float = 0.2, alive: Callable[[], bool] = lambda: True,
                   unanswered_s: float | None = None) -> Health:
        """Poll /health until 200, the timeout, or `alive()` turning False (the process died). `unanswered_s`:
        give up sooner when no whole answer at all (not even "loading") came for that long (a server someone
        else runs: a frozen one, or not a llama-server)."""
        start = time.monotonic()
        deadline = start + timeout
        h = self.health()
        answered = h.status_code is not None
        while not h.ready and time.monotonic() < deadline and alive():
            if unanswered_s is not None and not answered and time.monotonic() - start >= unanswered_s:
                break
            time.sleep(poll_s)
            h = self.health()
            answered = answered or h.status_code is not None
        return h

    def _short(self) -> float:
        return min(self.timeout, SHORT_CALL_S)

    def serves_web_page(self) -> bool:
        """Whether the server's own web page is there (a build without its web UI answers 404 at "/")."""
        return self._fetch("HEAD", "/", timeout=self._short()).status_code == 200

    def props(self) -> dict[str, Any]:
        props: dict[str, Any] = self._json("GET", "/props", dict, timeout=self._short())
        return props

    def slots(self) -> list[dict[str, Any]]:
        return [s for s in self._json("GET", "/slots", list, timeout=self._short()) if isinstance(s, dict)]

    def metrics_text(self) -> str:
        return self._check(self._fetch("GET", "/metrics", timeout=self._short()), "/metrics").text

    def models(self) -> list[RouterModel]:
        """`GET /models`: the models a router knows and which are loaded (one entry for a plain server)."""
        return parse_router_models(self._json("GET", "/models", dict, timeout=self._short()))

    def load_model(self, name: str) -> None:
        """`POST /models/load`: a router starts the named model's instance (it answers at once; `GET /models`
        says when the model is loaded). ServerError when it is unknown or already running."""
        self._json("POST", "/models/load", dict, json={"model": name}, timeout=self._short())

    def unload_model(self, name: str) -> None:
        """`POST /models/unload`: a router stops the named model's instance. ServerError when it is not running."""
        self._json("POST", "/models/unload", dict, json={"model": name}, timeout=self._short())

    def tokenize(self, text: str, add_special: bool = False) -> list[int]:
        data = self._json("POST", "/tokenize", dict, json={"content": text, "add_special": add_special},
                          timeout=self._short())
        tokens = data.get("tokens")
        if not isinstance(tokens, list) or not all(type(t) is int and 0 <= t < 2**31 for t in tokens):
            raise BadAnswer(200, "/tokenize", "no list of token ids in 'tokens'")
        return tokens

    def detokenize(self, tokens: list[int]) -> str:
        data = self._json("POST", "/detokenize", dict, json={"tokens": tokens}, timeout=self._short())
        if not isinstance(data.get("content"), str):
            raise BadAnswer(200, "/detokenize", "no text in 'content'")
        content: str = data["content"]
        return content

    def completion(self, prompt: Any, n_predict: int = 16, **params: Any) -> dict[str, Any]:
        """Non-streaming /completion; returns the server's JSON (with its `timings`)."""
        body = {"prompt": prompt, "n_predict": n_predict, "stream": False, **params}
        answer: dict[str, Any] = self._json("POST", "/completion", dict, json=body)
        return answer

    def completion_stream(self, prompt: Any, n_predict: int = 16, *, cancel: threading.Event | None = None,
                          **params: Any) -> Iterator[dict[str, Any]]:
        """Streaming /completion: yields each server-sent JSON chunk (the last has `timings`); see stream."""
        body = {"prompt": prompt, "n_predict": n_predict, "stream": True, **params}
        return self.stream("/completion", body, cancel=cancel)

    def chat_stream(self, messages: list[dict[str, Any]], *, cancel: threading.Event | None = None,
                    **params: Any) -> Iterator[dict[str, Any]]:
        """Streaming /v1/chat/completions (OpenAI's shape): yields each chunk, `choices[0].delta` holding the
        new text; the last chunk has `finish_reason` and the server's `timings`. Sampling not given in
        `params` is the server's own default (what its command line set). See stream."""
        return self.stream("/v1/chat/completions", {"messages": messages, "stream": True, **params}, cancel=cancel)

    def stream(self, path: str, body: dict[str, Any], *,
               cancel: threading.Event | None = None) -> Iterator[dict[str, Any]]:
        """POST `body` and yield each server-sent event's JSON object (see sse_events).

        Each event must arrive whole within the client's timeout and hold at most MAX_EVENT_BYTES; the time
        the caller spends between events is not counted. Setting `cancel` (from any thread) ends the wait for
        the answer or the next event within CANCEL_POLL_S with StreamCancelled, and closing the connection
        tells the server to stop generating. A streamed error (`{"error": …}`) is a ServerError."""
        return self._stream(path, body, cancel)

    def _stream(self, path: str, body: dict[str, Any],
                cancel: threading.Event | None) -> Iterator[dict[str, Any]]:
        with _cancellable(cancel):
            with _within(self.timeout):
                cm = self._http.stream("POST", path, **self._for_model("POST", path, {"json": body}))
                r = cm.__enter__()
        try:
            if r.status_code >= 400:
                with _cancellable(cancel), _within(self.timeout):
                    content = bytearray()
                    for chunk in r.iter_bytes():
                        content += chunk
                        if len(content) > MAX_BODY_BYTES:
                            break
                self._check(_Answer(r.status_code, bytes(content[:MAX_BODY_BYTES])), path)
            events = sse_events(r.iter_bytes(), r.status_code, path)
            while True:
                # one whole event (or the end) within the timeout
                with _cancellable(cancel), _within(self.timeout):
                    event = next(events, None)
                if event is None:
                    return
                yield event
                if cancel is not None and cancel.is_set():
                    raise StreamCancelled()
        finally:
            cm.__exit__(None, None, None)


class StreamCancelled(Exception):
    """The caller cancelled a stream (LlamaClient.stream's `cancel` was set)."""


def _error_event(payload: str, status: int, path: str) -> ServerError:
    try:
        data = json.loads(payload)
    except ValueError:
        data = None
    data = data if isinstance(data, dict) and "error" in data else {"error": data}
    message, kind = _error_message(data, payload)
    code = data["error"].get("code") if isinstance(data["error"], dict) else None
    return ServerError(code if type(code) is int and 400 <= code < 600 else status, message, kind)


def sse_events(chunks: Iterable[bytes], status: int = 200, path: str = "") -> Iterator[dict[str, Any]]:
    """Server-sent events (the bytes as they arrive, cut anywhere) -> each event's JSON object.

    llama-server sends `data: <json>` lines, each event ended by a blank line; `:` lines are keep-alive
    comments; `data: [DONE]` ends an OpenAI-style stream; a failure inside a stream arrives as `data:
    {"error": …}` (or, from some builds, an `error: <json>` line): a ServerError. An event longer than
    MAX_EVENT_BYTES, or one that is not a JSON object, is a BadAnswer."""
    buf, data = b"", []
    chunks = iter(chunks)
    ended = False
    while True:
        while b"\n" not in buf and not ended:
            chunk = next(chunks, None)
            if chunk is None:
                ended = True
            else:
                buf += chunk
                if len(buf) > MAX_EVENT_BYTES and b"\n" not in buf:
                    raise BadAnswer(status, path, f"a streamed event longer than {MAX_EVENT_BYTES // 2**20} MiB")
        if b"\n" in buf:
            raw, buf = buf.split(b"\n", 1)
        elif buf:
            raw, buf = buf, b""
        else:
            raw = None  # the end of the stream: what was gathered is the last event
        line = None if raw is None else raw.decode("utf-8", errors="replace").rstrip("\r")
        if line:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "data":
                data.append(value)
                if sum(len(d) for d in data) > MAX_EVENT_BYTES:
                    raise BadAnswer(status, path, f"a streamed event longer than {MAX_EVENT_BYTES // 2**20} MiB")
                if value.strip() != "[DONE]":
                    continue
            elif field == "error":
                raise _error_event(value, status, path)
            else:
                continue  # a comment (keep-alive) or a field llama-server does not send (event, id, retry)
        if data:  # a blank line (or the end, or [DONE]) ends an event
            payload = "\n".join(data).strip()
            data = []
            if payload == "[DONE]":
                return
            if payload:
                yield _event(payload, status, path)
        if raw is None:
            return


def _event(payload: str, status: int, path: str) -> dict[str, Any]:
    try:
        event = json.loads(payload)
    except ValueError:
        raise BadAnswer(status, path, f"a streamed event is not JSON ({payload[:60]!r})") from None
    if not isinstance(event, dict):
        raise BadAnswer(status, path, "a streamed event is not a JSON object")
    if "error" in event and not event.get("choices") and "content" not in event:
        raise _error_event(payload, status, path)
    return event
