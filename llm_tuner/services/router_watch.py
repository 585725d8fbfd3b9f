"""A router's models, watched: which models a llama-server in router mode knows and which are loaded.

A router (llama-server without -m, with --models-dir/--models-preset) loads a model when a request names it and
may unload it again (--models-max). Live lists them from the server's own endpoints: `GET /props` says
`"role": "router"` once the server is ready, then `GET /models` is read every POLL_S seconds on this module's
thread (never the GUI thread) and a RouterModels event is handed on whenever the list or a model's state
changes. A server that is not a router costs one /props read per readiness; the thread then ends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from llm_tuner.core.server_endpoints import RouterModel
from llm_tuner.services.client import LlamaClient, ServerError
from llm_tuner.services.supervised import ServerState, SupervisedSession

POLL_S = 2.0  # a router's model list changes when a model loads or unloads: seconds, not frames


@dataclass(frozen=True)
class RouterModels:
    """The models a router knows (sorted by name), as its `GET /models` last said; `error` when it stopped
    answering (the last list stays with it)."""

    models: tuple[RouterModel, ...]
    error: str | None = None


def is_router_props(props: dict) -> bool:
    """Whether a `/props` answer is a router's (the embedded build answers `"role": "router"`)."""
    return props.get("role") == "router"


class RouterWatch:
    """Polls a session's router models until `ended` is set; `on_models` gets each change (on this thread)."""

    def __init__(self, session: SupervisedSession, on_models: Callable[[RouterModels], None],
                 ended: threading.Event, *, poll_s: float = POLL_S) -> None:
        self.session = session
        self.on_models = on_models
        self.ended = ended
        self.poll_s = poll_s
        self.last: RouterModels | None = None
        self._thread = threading.Thread(target=self._loop, name="llm-tuner:router-models", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _loop(self) -> None:
        client: LlamaClient | None = None
        try:
            while not self.ended.wait(0 if client is None else self.poll_s):
                if self.session.state != ServerState.READY or not self.session.url:
                    self.ended.wait(0.2)
                    continue
                if client is None or client.base_url != self.session.url.rstrip("/"):
                    if client is not None:
                        client.close()
                    client = None
                    try:
                        client = LlamaClient(self.session.url, api_key=self.session.api_key, timeout=5.0)
                        if not is_router_props(client.props()):
                            return  # a server of one model: nothing to list
                    except (httpx.HTTPError, httpx.InvalidURL, ServerError, ValueError):
                        if client is not None:
                            client.close()
                        client = None
                        self.ended.wait(self.poll_s)
                        continue
                self._read(client)
        finally:
            if client is not None:
                client.close()

    def _read(self, client: LlamaClient) -> None:
        try:
            now = RouterModels(tuple(client.models()))
        except (httpx.HTTPError, ServerError, ValueError) as exc:
            if self.last is None or self.last.error is not None:
                return
            now = RouterModels(self.last.models, f"the server's model list could not be read: {exc}")
        if now != self.last:
            self.last = now
            self.on_models(now)
