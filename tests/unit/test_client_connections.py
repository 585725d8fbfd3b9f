"""A router (llama-server without -m) closes the connection after each answer it passes on from a model's
instance, while its headers promise keep-alive (`Keep-Alive: timeout=5, max=100`, no `Connection: close`; seen on
the embedded build). A client that sent its next request on that connection before the close arrived got
"Server disconnected without sending a response": a router benchmark failed about 1 run in 5. The client of a
router's model opens a connection per request."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import pytest

from llm_tuner.services.client import LlamaClient

ANSWER = json.dumps({"tokens": [1, 2, 3]}).encode()


class ClosingServer:
    """Answers every request with keep-alive headers, then closes the connection `linger_s` later without
    reading further, as the router does: a request already sent on it is lost."""

    def __init__(self, linger_s: float = 0.1) -> None:
        self.linger_s = linger_s
        self.connections = 0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="closing-server", daemon=True)

    def __enter__(self) -> ClosingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            self.connections += 1
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                head, _, body = data.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(body) < length:
                    body += conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nKeep-Alive: timeout=5, max=100\r\n"
                             + f"Content-Length: {len(ANSWER)}\r\n\r\n".encode() + ANSWER)
                time.sleep(self.linger_s)  # the next request, if sent on this connection, arrives here: lost


def test_a_router_models_client_opens_a_connection_per_request_and_loses_none():
    with ClosingServer() as server, LlamaClient(server.url, model="tiny-a", timeout=10) as client:
        assert [client.tokenize("hello") for _ in range(3)] == [[1, 2, 3]] * 3
    assert server.connections == 3


def test_the_race_it_avoids_a_client_that_keeps_the_connection_loses_the_next_request():
    """The failure without a model (a plain server keeps its connections): the second request goes out on the
    connection the server is closing. Shows the double reproduces the router's behaviour."""
    with ClosingServer() as server, LlamaClient(server.url, timeout=10) as client:
        assert client.tokenize("hello") == [1, 2, 3]
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):  # a FIN, or a reset (unread data)
            client.tokenize("hello")
