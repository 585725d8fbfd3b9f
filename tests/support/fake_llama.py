"""A local HTTP server that answers like llama-server, or lies in the ways a test asks (loopback only).

For tests of what the app does with a server it does not control (attach, `bench --url`, `run --attach`):
garbage bodies, huge numbers, negative timings, bodies that are huge, endless or trickle a byte at a time.
Not a stand-in for the real server where the real one can run: the lies are the point.

    with FakeLlama(timings={"predicted_ms": -50.0}) as fake:
        ... fake.url ...
    with FakeLlama(routes={"/health": trickle(b"{}", per_byte_s=1.0)}) as fake: ...

A route is a function (handler, body: dict | None) -> None that writes the whole answer itself; helpers below
make the usual ones. Every writer stops when the server is closed, so no thread of a test outlives it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Route = Callable[[BaseHTTPRequestHandler, dict | None], None]

GOOD_TIMINGS = {"cache_n": 0, "prompt_n": 64, "prompt_ms": 20.0, "prompt_per_second": 3200.0, "predicted_n": 8,
                "predicted_ms": 40.0, "predicted_per_second": 200.0}
METRICS = ("# HELP llamacpp:prompt_tokens_total x\n# TYPE llamacpp:prompt_tokens_total counter\n"
           "llamacpp:prompt_tokens_total {p}\nllamacpp:prompt_seconds_total {ps}\n"
           "llamacpp:tokens_predicted_total {g}\nllamacpp:tokens_predicted_seconds_total {gs}\n"
           "llamacpp:requests_processing 0\n")


def send(handler: BaseHTTPRequestHandler, code: int, body: bytes | str | dict | list,
         ctype: str = "application/json", length: int | None = None) -> None:
    data = body if isinstance(body, bytes) else body.encode() if isinstance(body, str) else json.dumps(body).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", ctype)
    handler.send_header("Content-Length", str(len(data) if length is None else length))
    handler.end_headers()
    handler.wfile.write(data)


def raw(data: bytes) -> Route:
    """Exactly these bytes on the socket (status line and headers included, or not)."""
    def route(h, _body):
        h.wfile.write(data)
        h.close_connection = True
    return route


def trickle(data: bytes, per_byte_s: float = 1.0, *, headers_too: bool = False, forever: bool = False) -> Route:
    """The answer one byte every `per_byte_s` (the headers first, at once, unless `headers_too`); `forever`
    sends spaces after it until the client leaves or the server stops."""
    def route(h, _body):
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + (b"" if forever else b"Content-Length: %d\r\n" % len(data)) + b"\r\n")
        stop = h.server.stopping
        try:
            if not headers_too:
                h.wfile.write(head)
                out = data
            else:
                out = head + data
            i = 0
            while not stop.is_set() and (i < len(out) or forever):
                h.wfile.write(out[i:i + 1] if i < len(out) else b" ")
                h.wfile.flush()
                i += 1
                stop.wait(per_byte_s)
        except OSError:
            pass
        h.close_connection = True
    return route


def huge(n_bytes: int, chunk: bytes = b"x" * 65536, *, endless: bool = False) -> Route:
    """A body of `n_bytes` (announced), or one that never ends (no length, until the client leaves)."""
    def route(h, _body):
        stop = h.server.stopping
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        if not endless:
            h.send_header("Content-Length", str(n_bytes))
        h.end_headers()
        sent = 0
        try:
            while not stop.is_set() and (endless or sent < n_bytes):
                part = chunk if endless else chunk[:n_bytes - sent]
                h.wfile.write(part)
                sent += len(part)
        except OSError:
            pass
        h.close_connection = True
    return route


def chat_stream(pieces: list[str], gates: list[threading.Event] | None = None, *,
                timings: dict | None = None, wait_s: float = 120.0) -> Route:
    """A streamed /v1/chat/completions that sends its `pieces` as chunks, waiting before piece i+1 until
    `gates[i]` is set (a server made to stream slowly, at the test's pace rather than the clock's), then the last
    chunk with `timings`. A gate never set holds the reply open until the client leaves or the server stops
    (for Stop). Each wait is bounded by `wait_s`."""
    def route(h, _body):
        stop = h.server.stopping
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()

        def event(obj) -> None:
            h.wfile.write(f"data: {json.dumps(obj)}\n\n".encode())
            h.wfile.flush()

        try:
            for i, piece in enumerate(pieces):
                if i and gates and i - 1 < len(gates):
                    deadline = time.monotonic() + wait_s
                    while not gates[i - 1].wait(0.05) and not stop.is_set() and time.monotonic() < deadline:
                        pass
                    if not gates[i - 1].is_set():
                        return
                event({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
            event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                   "timings": GOOD_TIMINGS if timings is None else timings})
            h.wfile.write(b"data: [DONE]\n\n")
            h.wfile.flush()
        except OSError:
            pass
        finally:
            h.close_connection = True
    return route


def json_route(obj, code: int = 200) -> Route:
    return lambda h, _body: send(h, code, obj)


class FakeLlama:
    """llama-server's endpoints as a bench and an attach use them; `timings` replaces the final event's
    timings, `slots` what /slots answers, `metrics` the counters /metrics answers, `routes` whole endpoints."""

    def __init__(self, *, timings: dict | None = None, routes: dict[str, Route] | None = None,
                 slots: list | Callable[[], list] | None = None, metrics: dict | Callable[[], dict] | None = None) -> None:
        self.timings = GOOD_TIMINGS if timings is None else timings
        self.routes = dict(routes or {})
        self.slots = slots if slots is not None else []
        self.metrics = metrics if metrics is not None else {"p": 0, "ps": 0, "g": 0, "gs": 0}
        self.requests: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out as two writes: with Nagle's algorithm the body waited for the client's
            # delayed ACK, 40 ms an answer (a bench's ~30 /tokenize calls: over a second)
            disable_nagle_algorithm = True

            def log_message(self, *_a) -> None:
                pass

            def _body(self) -> dict | None:
                n = int(self.headers.get("Content-Length") or 0)
                if not n:
                    return None
                try:
                    return json.loads(self.rfile.read(n))
                except ValueError:
                    return None

            def _route(self) -> None:
                path = self.path.split("?")[0]
                fake.requests.append(path)
                body = self._body()
                route = fake.routes.get(path) or fake._default(path)
                if route is None:
                    return send(self, 404, {"error": {"code": 404, "message": "File Not Found", "type": "not_found"}})
                route(self, body)

            do_GET = do_POST = do_HEAD = _route  # noqa: N815 - http.server's names

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._httpd.stopping = threading.Event()
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-llama-server", daemon=True)

    # -- llama-server's answers --------------------------------------------------------------------
    def _default(self, path: str) -> Route | None:
        return {"/health": json_route({"status": "ok"}), "/props": json_route({"total_slots": 1}),
                "/slots": lambda h, _b: send(h, 200, self.slots() if callable(self.slots) else self.slots),
                "/metrics": lambda h, _b: send(h, 200, METRICS.format(
                    **(self.metrics() if callable(self.metrics) else self.metrics)), "text/plain"),
                "/tokenize": self._tokenize, "/detokenize": json_route({"content": "text"}),
                "/completion": self._completion}.get(path)

    @staticmethod
    def _tokenize(h, body) -> None:
        text = (body or {}).get("content", "")
        tokens = ([1] if (body or {}).get("add_special") else []) + [100 + i % 500 for i in range(len(text) // 4)]
        send(h, 200, {"tokens": tokens})

    def _completion(self, h, body) -> None:
        body = body or {}
        if not body.get("stream"):
            return send(h, 200, {"content": "", "tokens_predicted": 0, "timings": self.timings})
        n = int(body.get("n_predict") or 1)
        events = [{"content": "x", "tokens": [5], "stop": False} for _ in range(max(1, n))]
        events.append({"content": "", "stop": True, "timings": self.timings})
        data = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
        send(h, 200, data, "text/event-stream")

    # -- lifetime ----------------------------------------------------------------------------------
    def __enter__(self) -> FakeLlama:
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.close()

    def close(self) -> None:
        self._httpd.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)
        time.sleep(0.05)  # writers see `stopping` within one wait
