"""The server's own view: `/metrics` counters -> rates between scrapes, `/slots` progress.

Also the attach-mode request watcher: with no log to read, a finished request is inferred from a slot
going idle (`/slots`) and timed from the `/metrics` counter deltas over the same interval. Those
records are marked `approximate` (several requests finishing between two polls share the deltas).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from llm_tuner.core.server_endpoints import SlotState, parse_metrics, parse_slots
from llm_tuner.services.client import LlamaClient
from llm_tuner.services.telemetry.sampler import ServerSample

# parse_metrics: core's, one parser
__all__ = ["ApproxRequest", "ServerReader", "SlotWatcher", "endpoint_off", "parse_metrics"]
log = logging.getLogger(__name__)


def endpoint_off(exc: BaseException) -> bool:
    """The server will never answer this endpoint (/metrics, /slots), so asking again is useless: 501 (started
    without --metrics, or with --no-slots), or a router (no model of its own), which answers them only for a
    model named in the request (400 "model name is missing")."""
    status = getattr(exc, "status", None)
    return status == 501 or (status == 400 and "model name is missing" in str(getattr(exc, "message", "")))


class ServerReader:
    """Callable: one ServerSample from /metrics and /slots. `client` is a LlamaClient (or a test double).

    Rates come from counter deltas (`prompt_tokens_total` / `prompt_seconds_total`), not from the
    server's own rate gauges, which reset on every scrape and would be stolen by any other scraper.
    """

    def __init__(self, client: LlamaClient) -> None:
        self.client = client
        self._prev: dict[str, float] | None = None
        self.metrics_available: bool | None = None
        self.slots_available: bool | None = None
        self.last_metrics: dict[str, float] = {}
        self.last_slots: list[SlotState] = []

    def __call__(self) -> list[ServerSample]:
        t = time.time()
        m: dict[str, float] = {}
        if self.metrics_available is not False:
            try:
                m = parse_metrics(self.client.metrics_text())
                self.metrics_available = True
            except Exception as exc:
                if endpoint_off(exc):
                    self.metrics_available = False
                else:
                    raise
        slots: list[SlotState] = []
        if self.slots_available is not False:
            try:
                slots = parse_slots(self.client.slots())
                self.slots_available = True
            except Exception as exc:
                if endpoint_off(exc):
                    self.slots_available = False
                else:
                    raise
        self.last_slots = slots
        pp = tg = None
        if m and self._prev:
            dp = m.get("prompt_seconds_total", 0) - self._prev.get("prompt_seconds_total", 0)
            dg = m.get("tokens_predicted_seconds_total", 0) - self._prev.get("tokens_predicted_seconds_total", 0)
            if dp > 0:
                pp = (m.get("prompt_tokens_total", 0) - self._prev.get("prompt_tokens_total", 0)) / dp
            if dg > 0:
                tg = (m.get("tokens_predicted_total", 0) - self._prev.get("tokens_predicted_total", 0)) / dg
        if m:
            self._prev = m
            self.last_metrics = m
        progress = [(s.id, s.n_decoded, s.n_remain) for s in slots if s.is_processing]
        return [ServerSample(
            t=t, prompt_tokens_per_s=pp, predicted_tokens_per_s=tg,
            requests_processing=m.get("requests_processing"), requests_deferred=m.get("requests_deferred"),
            prompt_tokens_total=m.get("prompt_tokens_total"), tokens_predicted_total=m.get("tokens_predicted_total"),
            slots_busy=sum(1 for s in slots if s.is_processing) if slots else None,
            slots_total=len(slots) or None, slot_progress=tuple(progress))]


@dataclass(frozen=True)
class ApproxRequest:
    """A request seen only through /slots and /metrics (attach mode without a log): less precise."""

    slot: int | None  # None: a server that does not number its slots
    task: int | None
    cache_n: int | None
    prompt_n: int | None
    predicted_n: int | None
    prompt_ms: float | None
    predicted_ms: float | None

    @property
    def prompt_per_second(self) -> float | None:
        return 1e3 * self.prompt_n / self.prompt_ms if self.prompt_n and self.prompt_ms else None

    @property
    def predicted_per_second(self) -> float | None:
        if self.predicted_n and self.predicted_n > 1 and self.predicted_ms:
            return 1e3 * (self.predicted_n - 1) / self.predicted_ms
        return None


def _generated_when_idle(busy: SlotState, idle: SlotState) -> int | None:
    """The tokens a finished task generated, from the slot seen busy (prompt + n_decoded tokens held) and then
    idle with the same task (prompt + generated - 1 held); None when the slot was not seen both ways."""
    if idle is busy or idle.is_processing or idle.task != busy.task:
        return None
    if busy.n_tokens is None or busy.n_decoded is None or idle.n_tokens is None:
        return None
    # seen before its first token (its prompt perhaps not yet processed): n_tokens is it
    if busy.n_decoded == 0:
        prompt = busy.n_tokens
    elif busy.n_prompt_processed is not None and busy.n_prompt_cache is not None:
        # the prompt the slot holds, fixed once generation runs (busy n_tokens - n_decoded can be one off: a
        # poll may read them between the two updates of one step)
        prompt = busy.n_prompt_processed + busy.n_prompt_cache
    else:
        prompt = busy.n_tokens - busy.n_decoded
    generated = idle.n_tokens - prompt + 1
    return generated if generated >= busy.n_decoded else None


def _uncounted(idle: SlotState) -> SlotState:
    """An idle slot as the record of a task never seen running: its reset counters become unknown."""
    return dataclasses.replace(idle, n_decoded=None, n_prompt_processed=None, n_prompt_cache=None)


def _count(x: float) -> int | None:
    """A counter delta as a count; None for what no counter gives (NaN, ±Inf, a count no database keeps)."""
    return int(x) if math.isfinite(x) and abs(x) < 2**63 else None


class SlotWatcher:
    """Feed it each (slots, metrics) poll; it returns the requests that finished since the previous poll.

    A request's figures are the /metrics counter changes between the last poll before it was seen
    and the poll that saw it finish; shared evenly when several finished in the same interval.
    """

    def __init__(self) -> None:
        self._busy: dict[int | None, SlotState] = {}
        self._start_m: dict[int | None, Mapping[str, float]] = {}
        self._last_task: dict[int | None, int | None] = {}
        self._prev_m: Mapping[str, float] = {}
        self._primed = False

    def update(self, slots: Iterable[Mapping[str, Any]], metrics: Mapping[str, float]) -> list[ApproxRequest]:
        """`slots`: the decoded /slots JSON; `metrics`: parse_metrics of /metrics ({} without --metrics)."""
        # (last busy, final, metrics at start)
        finished: list[tuple[SlotState, SlotState, Mapping[str, float]]] = []
        for s in parse_slots(slots):
            sid = s.id
            was = self._busy.get(sid)
            if s.is_processing:
                if was is not None and was.task != s.task:
                    finished.append((was, was, self._start_m.get(sid, self._prev_m)))
                    was = None
                if was is None:
                    self._start_m[sid] = self._prev_m
                self._busy[sid] = s
            elif was is not None:
                finished.append((was, s if s.task == was.task else was, self._start_m.get(sid, self._prev_m)))
                del self._busy[sid]
            elif self._primed and s.task is not None and s.task != self._last_task.get(sid):
                # started and ended between two polls: an idle slot's counters are reset (n_decoded and
                # n_prompt_tokens_processed read 0), so only /metrics can count this request
                unknown = _uncounted(s)
                finished.append((unknown, unknown, self._prev_m))
            self._last_task[sid] = s.task
        self._primed = True
        share = len(finished) or 1

        def biggest(*values: int | None) -> int | None:
            known = [v for v in values if v is not None]
            return max(known) if known else None

        done: list[ApproxRequest] = []
        for was, s, m0 in finished:
            dm = {k: metrics.get(k, 0) - m0.get(k, 0) for k in metrics} if metrics and m0 else {}
            prompt_n = biggest(was.n_prompt_processed, s.n_prompt_processed)
            cache_n = biggest(was.n_prompt_cache, s.n_prompt_cache)
            # at the last poll that saw it busy: a lower bound
            predicted_n = biggest(was.n_decoded, s.n_decoded)
            final = _generated_when_idle(was, s)
            if final is not None:  # the idle slot still holds the whole task: its generated count, exactly
                predicted_n = final
            elif s is not was:
                log.debug("slot %s: no exact count from busy %s then idle %s", was.id, was, s)
            if share == 1 and dm:  # one request in the interval: the counters are exact
                prompt_n = _count(dm.get("prompt_tokens_total", prompt_n or 0))
                predicted_n = _count(dm.get("tokens_predicted_total", predicted_n or 0))
                if "prompt_tokens_cached_total" in dm:
                    cache_n = _count(dm["prompt_tokens_cached_total"])
            done.append(ApproxRequest(
                slot=was.id, task=was.task, cache_n=cache_n, prompt_n=prompt_n,
                predicted_n=predicted_n,
                prompt_ms=dm["prompt_seconds_total"] * 1e3 / share if dm.get("prompt_seconds_total") else None,
                predicted_ms=(dm["tokens_predicted_seconds_total"] * 1e3 / share
                              if dm.get("tokens_predicted_seconds_total") else None)))
        if metrics:
            self._prev_m = metrics
        return done
