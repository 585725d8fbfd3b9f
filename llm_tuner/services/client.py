"""HTTP client for llama-server: /health /props /slots /metrics /completion /tokenize.

Thin and synchronous (httpx); callers run it off the GUI thread.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx


class ServerError(Exception):
    """The server answered with an error body: `{"error": {"code", "message", "type"}}`."""

    def __init__(self, status: int, message: str, kind: str | None = None) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message
        self.kind = kind


@dataclass(frozen=True)
class Health:
    status_code: int | None  # None: nothing listening
    ready: bool
    message: str


class LlamaClient:
    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 600.0) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, headers=headers,
                                  timeout=httpx.Timeout(timeout, connect=5.0))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LlamaClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- helpers --------------------------------------------------------------------------------
    def _check(self, r: httpx.Response) -> httpx.Response:
        if r.status_code >= 400:
            try:
                err = r.json().get("error", {})
                raise ServerError(r.status_code, err.get("message", r.text[:200]), err.get("type"))
            except ValueError:
                raise ServerError(r.status_code, r.text[:200]) from None
        return r

    # -- endpoints ------------------------------------------------------------------------------
    def health(self, timeout: float = 2.0) -> Health:
        try:
            r = self._http.get("/health", timeout=timeout)
        except httpx.HTTPError as exc:
            return Health(None, False, f"not reachable: {exc.__class__.__name__}")
        if r.status_code == 200:
            return Health(200, True, "ok")
        try:
            message = r.json().get("error", {}).get("message", r.text[:100])
        except ValueError:
            message = r.text[:100]
        return Health(r.status_code, False, message)

    def wait_ready(self, timeout: float = 120.0, poll_s: float = 0.2, alive=lambda: True) -> Health:
        """Poll /health until 200, the timeout, or `alive()` turning False (the process died)."""
        deadline = time.monotonic() + timeout
        h = self.health()
        while not h.ready and time.monotonic() < deadline and alive():
            time.sleep(poll_s)
            h = self.health()
        return h

    def props(self) -> dict:
        return self._check(self._http.get("/props")).json()

    def slots(self) -> list[dict]:
        return self._check(self._http.get("/slots")).json()

    def metrics_text(self) -> str:
        return self._check(self._http.get("/metrics")).text

    def tokenize(self, text: str, add_special: bool = False) -> list[int]:
        r = self._check(self._http.post("/tokenize", json={"content": text, "add_special": add_special}))
        return list(r.json()["tokens"])

    def detokenize(self, tokens: list[int]) -> str:
        return self._check(self._http.post("/detokenize", json={"tokens": tokens})).json()["content"]

    def completion(self, prompt, n_predict: int = 16, **params) -> dict:
        """Non-streaming /completion; returns the server's JSON (with its `timings`)."""
        body = {"prompt": prompt, "n_predict": n_predict, "stream": False, **params}
        return self._check(self._http.post("/completion", json=body)).json()

    def completion_stream(self, prompt, n_predict: int = 16, **params) -> Iterator[dict]:
        """Streaming /completion: yields each server-sent JSON chunk (the last has `timings`)."""
        body = {"prompt": prompt, "n_predict": n_predict, "stream": True, **params}
        with self._http.stream("POST", "/completion", json=body) as r:
            if r.status_code >= 400:
                r.read()
                self._check(r)
            for line in r.iter_lines():
                if line.startswith("data: "):
                    payload = line[6:].strip()
                    if payload and payload != "[DONE]":
                        yield json.loads(payload)
