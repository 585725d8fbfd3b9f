"""A router's models, watched: which models a llama-server in router mode knows and which are loaded.

A router (llama-server without -m, with --models-dir/--models-preset) loads a model when a request names it
and may unload it again (--models-max). Live lists them from the server's own endpoints: `GET /props` says
`"role": "router"` once the server is ready, then `GET /models` is read every POLL_S seconds on this module's
thread (never the GUI thread) and a RouterModels event is handed on whenever the list or a model's state
changes. A server that is not a router costs one /props read per readiness; the thread then ends.

Beside the list, per model: its instance's resident memory (the router's child process started with its name
as `--alias`, read with psutil when the router runs on this machine), how long its last load took as seen from
here (the list is read every LOADING_POLL_S while a model loads), and the plan of all of them together
(services.router_presets.live_plan over the arguments the router lists for each): whether the next load fits
beside the loaded ones (`RouterModels.check_load`). `load_model`/`unload_model` are Live's Load and Unload.
"""

from __future__ import annotations

import logging
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import httpx
import psutil

from llm_tuner.core import flags
from llm_tuner.core.memory import LoadCheck, RouterPlan
from llm_tuner.core.server_endpoints import RouterModel
from llm_tuner.core.session import RequestRecord
from llm_tuner.services.client import LlamaClient, ServerError
from llm_tuner.services.router_presets import live_plan
from llm_tuner.services.supervised import ServerState, SupervisedSession

log = logging.getLogger(__name__)

POLL_S = 2.0  # a router's model list changes when a model loads or unloads: seconds, not frames
LOADING_POLL_S = 0.25  # while a model loads: its load time is measured to this


@dataclass(frozen=True)
class ModelUsage:
    """A router model's figures beside its state: its instance's RSS (None: not running, or not on this
    machine) and how long its last load took (None: not seen loading)."""

    name: str
    rss_mib: float | None = None
    load_s: float | None = None


@dataclass(frozen=True)
class RouterModels:
    """The models a router knows (sorted by name), as its `GET /models` last said; `error` when it stopped
    answering (the last list stays with it); each model's usage; the plan of them together (None: none
    made)."""

    models: tuple[RouterModel, ...]
    error: str | None = None
    usage: tuple[ModelUsage, ...] = ()
    plan: RouterPlan | None = None

    def usage_of(self, name: str) -> ModelUsage | None:
        return next((u for u in self.usage if u.name == name), None)

    def running(self) -> list[str]:
        """The models whose instance runs or is starting (what a new load sits beside)."""
        return [m.id for m in self.models if m.status in ("loaded", "loading")]

    def check_load(self, name: str) -> LoadCheck | None:
        """Whether loading `name` fits beside the running models, by the plan (None: no plan)."""
        return None if self.plan is None else self.plan.check_load(name, self.running())

    def unfit_running(self) -> LoadCheck | None:
        """When the running models together overfill a device (another client loaded one): the check of the
        last of them beside the others; None when they fit or there is no plan."""
        running = self.running()
        if self.plan is None or len(running) < 2 or not self.plan.shortfalls(running):
            return None
        return self.plan.check_load(running[-1], running[:-1])


def is_router_props(props: Mapping[str, Any]) -> bool:
    """Whether a `/props` answer is a router's (the embedded build answers `"role": "router"`)."""
    return props.get("role") == "router"


class RouterWatch:
    """Polls a session's router models until `ended` is set; `on_models` gets each change (on this thread)."""

    def __init__(self, session: SupervisedSession, on_models: Callable[[RouterModels], None],
                 ended: threading.Event, *, poll_s: float = POLL_S,
                 planner: Callable[[tuple[RouterModel, ...]], RouterPlan | None] | None = None) -> None:
        self.session = session
        self.on_models = on_models
        self.ended = ended
        self.poll_s = poll_s
        self.planner = planner or self._plan
        self.last: RouterModels | None = None
        self._planned: tuple[tuple[str, tuple[str, ...]], ...] | None = None  # the (name, args) planned for
        self._plan_now: RouterPlan | None = None
        self._loading_since: dict[str, float] = {}
        self._load_s: dict[str, float] = {}
        self._thread = threading.Thread(target=self._loop, name="llm-tuner:router-models", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _loop(self) -> None:
        client: LlamaClient | None = None
        try:
            while not self.ended.wait(0 if client is None else self._interval()):
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

    def _interval(self) -> float:
        loading = self.last is not None and any(m.status == "loading" for m in self.last.models)
        return min(self.poll_s, LOADING_POLL_S) if loading else self.poll_s

    def _plan(self, models: tuple[RouterModel, ...]) -> RouterPlan | None:
        plan = self.session.plan
        return live_plan(models, plan.binary if plan is not None else None)

    def _read(self, client: LlamaClient) -> None:
        try:
            models = tuple(client.models())
        except (httpx.HTTPError, ServerError, ValueError) as exc:
            if self.last is None or self.last.error is not None:
                return
            now = replace(self.last, error=f"the server's model list could not be read: {exc}")
        else:
            now = RouterModels(models, None, self._usage(models), self._plan_for(models))
        if now != self.last:
            self.last = now
            self.on_models(now)

    def _plan_for(self, models: tuple[RouterModel, ...]) -> RouterPlan | None:
        key = tuple((m.id, tuple(a for a in m.args if not a.isdigit())) for m in models)  # ports change
        if key != self._planned:
            self._planned = key
            try:
                self._plan_now = self.planner(models)
            except Exception as exc:  # noqa: BLE001 - the list still shows; only the fit check is missing
                log.info("no plan for the router's models: %s", exc)
                self._plan_now = None
        return self._plan_now

    def _usage(self, models: tuple[RouterModel, ...]) -> tuple[ModelUsage, ...]:
        now = time.monotonic()
        for m in models:
            if m.status == "loading":
                self._loading_since.setdefault(m.id, now)
            elif m.id in self._loading_since:
                started = self._loading_since.pop(m.id)
                if m.loaded:
                    self._load_s[m.id] = round(now - started, 2)
        rss = instance_rss_mib(self.session.pid) if self.session.kind == "launch" else {}
        return tuple(ModelUsage(m.id, rss.get(m.id) if m.status in ("loaded", "loading") else None,
                                self._load_s.get(m.id)) for m in models)


def instance_rss_mib(router_pid: int | None) -> dict[str, float]:
    """Each running model instance of a router (its child llama-server, named by its `--alias`) -> its RSS in
    MiB (rounded to whole MiB, so a list that did not change compares equal). Empty when the router is
    gone."""
    if router_pid is None:
        return {}
    out: dict[str, float] = {}
    try:
        children = psutil.Process(router_pid).children(recursive=True)
    except psutil.Error:
        return {}
    for child in children:
        try:
            name = flags.value_of(child.cmdline(), "alias")
            if name:
                out[name] = float(round(child.memory_info().rss / 2**20))
        except psutil.Error:
            continue
    return out


class LoadFailed(Exception):
    """A router's model instance ended before it was loaded."""


def load_model(url: str, name: str, api_key: str | None = None, *, wait_s: float = 0.0,
               cancelled: Callable[[], bool] = lambda: False, poll_s: float = 0.1) -> float | None:
    """Ask a router to load a model (Live's Load). ServerError in the router's words when it refuses. With
    `wait_s`, follow `GET /models` until it is loaded and return how long the load took (seconds; None when
    `cancelled` or the wait ran out first); LoadFailed when its instance ended instead."""
    with LlamaClient(url, api_key=api_key, timeout=10.0) as client:
        t0 = time.monotonic()
        client.load_model(name)
        while wait_s and time.monotonic() - t0 < wait_s and not cancelled():
            m = next((m for m in client.models() if m.id == name), None)
            if m is not None and m.loaded:
                return round(time.monotonic() - t0, 2)
            if m is None or m.failed or (m.status == "unloaded" and time.monotonic() - t0 > 1.0):
                raise LoadFailed(f"{name} was not loaded: its instance ended (the router's log says why)")
            time.sleep(poll_s)
    return None


def unload_model(url: str, name: str, api_key: str | None = None) -> None:
    """Ask a router to unload a model (Live's Unload)."""
    with LlamaClient(url, api_key=api_key, timeout=10.0) as client:
        client.unload_model(name)


@dataclass(frozen=True)
class ModelSpeed:
    """A router model's speed from the requests that named it: how many, and their median rates (tokens/s)."""

    requests: int
    generation_per_s: float | None
    prompt_per_s: float | None

    def text(self) -> str:
        parts = [f"{self.generation_per_s:.1f} t/s generation" if self.generation_per_s else "",
                 f"{self.prompt_per_s:.0f} t/s prompt" if self.prompt_per_s else ""]
        return f"{', '.join(p for p in parts if p) or 'no rates'} ({self.requests} request(s))"


def model_speeds(records: Iterable[RequestRecord]) -> dict[str, ModelSpeed]:
    """Request records -> each router model's ModelSpeed (records without a model, a plain server's, are left
    out)."""
    by: dict[str, list[RequestRecord]] = {}
    for r in records:
        if r.model:
            by.setdefault(r.model, []).append(r)

    def med(rates: Iterable[float | None]) -> float | None:
        values = [v for v in rates if v]
        return statistics.median(values) if values else None

    return {name: ModelSpeed(len(rs), med(r.predicted_per_second for r in rs),
                             med(r.prompt_per_second for r in rs))
            for name, rs in by.items()}
