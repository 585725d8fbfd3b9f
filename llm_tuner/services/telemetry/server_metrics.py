"""The server's own view: `/metrics` counters -> rates between scrapes, `/slots` progress.

Also the attach-mode request watcher: with no log to read, a finished request is inferred from a slot
going idle (`/slots`) and timed from the `/metrics` counter deltas over the same interval. Those
records are marked `approximate` (several requests finishing between two polls share the deltas).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from llm_tuner.services.telemetry.sampler import ServerSample

_LINE = re.compile(r"^llamacpp:([a-zA-Z_]+)(\{[^}]*\})?\s+(\S+)")


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text -> {name without the `llamacpp:` prefix: value}. Labelled series are skipped."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m and not m.group(2):
            try:
                out[m.group(1)] = float(m.group(3))
            except ValueError:
                pass
    return out


class ServerReader:
    """Callable: one ServerSample from /metrics and /slots. `client` is a LlamaClient (or a test double).

    Rates come from counter deltas (`prompt_tokens_total` / `prompt_seconds_total`), not from the
    server's own rate gauges, which reset on every scrape and would be stolen by any other scraper.
    """

    def __init__(self, client) -> None:
        self.client = client
        self._prev: dict[str, float] | None = None
        self.metrics_available: bool | None = None
        self.slots_available: bool | None = None
        self.last_metrics: dict[str, float] = {}
        self.last_slots: list[dict] = []

    def __call__(self) -> list[ServerSample]:
        t = time.time()
        m: dict[str, float] = {}
        if self.metrics_available is not False:
            try:
                m = parse_metrics(self.client.metrics_text())
                self.metrics_available = True
            except Exception as exc:  # noqa: BLE001
                if getattr(exc, "status", None) == 501:  # started without --metrics
                    self.metrics_available = False
                else:
                    raise
        slots: list[dict] = []
        if self.slots_available is not False:
            try:
                slots = self.client.slots()
                self.slots_available = True
            except Exception as exc:  # noqa: BLE001
                if getattr(exc, "status", None) == 501:  # --no-slots
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
        progress = []
        for s in slots:
            if s.get("is_processing"):
                nt = (s.get("next_token") or [{}])[0]
                progress.append((s.get("id"), nt.get("n_decoded"), nt.get("n_remain")))
        return [ServerSample(
            t=t, prompt_tokens_per_s=pp, predicted_tokens_per_s=tg,
            requests_processing=m.get("requests_processing"), requests_deferred=m.get("requests_deferred"),
            prompt_tokens_total=m.get("prompt_tokens_total"), tokens_predicted_total=m.get("tokens_predicted_total"),
            slots_busy=sum(1 for s in slots if s.get("is_processing")) if slots else None,
            slots_total=len(slots) or None, slot_progress=tuple(progress))]


@dataclass(frozen=True)
class ApproxRequest:
    """A request seen only through /slots and /metrics (attach mode without a log): less precise."""

    slot: int
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


class SlotWatcher:
    """Feed it each (slots, metrics) poll; it returns the requests that finished since the previous poll.

    A request's figures are the /metrics counter changes between the last poll before it was seen
    and the poll that saw it finish; shared evenly when several finished in the same interval.
    """

    def __init__(self) -> None:
        self._busy: dict[int, dict] = {}
        self._start_m: dict[int, dict[str, float]] = {}
        self._last_task: dict[int, int | None] = {}
        self._prev_m: dict[str, float] = {}
        self._primed = False

    def update(self, slots: list[dict], metrics: dict[str, float]) -> list[ApproxRequest]:
        finished: list[tuple[dict, dict, dict]] = []  # (last busy snapshot, final snapshot, metrics at start)
        for s in slots:
            sid = s.get("id")
            was = self._busy.get(sid)
            task = s.get("id_task")
            if s.get("is_processing"):
                if was is not None and was.get("id_task") != task:
                    finished.append((was, was, self._start_m.get(sid, self._prev_m)))
                    was = None
                if was is None:
                    self._start_m[sid] = self._prev_m
                self._busy[sid] = s
            elif was is not None:
                finished.append((was, s if task == was.get("id_task") else was, self._start_m.get(sid, self._prev_m)))
                del self._busy[sid]
            elif self._primed and task is not None and task != self._last_task.get(sid):
                finished.append((s, s, self._prev_m))  # started and ended between two polls
            self._last_task[sid] = task
        self._primed = True
        share = len(finished) or 1

        def biggest(a, b, key):
            vals = [x.get(key) for x in (a, b) if x.get(key) is not None]
            return max(vals) if vals else None

        done: list[ApproxRequest] = []
        for was, s, m0 in finished:
            dm = {k: metrics.get(k, 0) - m0.get(k, 0) for k in metrics} if metrics and m0 else {}
            decoded = [((x.get("next_token") or [{}])[0]).get("n_decoded") for x in (was, s)]
            decoded = [d for d in decoded if d is not None]
            prompt_n = biggest(was, s, "n_prompt_tokens_processed")
            cache_n = biggest(was, s, "n_prompt_tokens_cache")
            predicted_n = max(decoded) if decoded else None
            if share == 1 and dm:  # one request in the interval: the counters are exact
                prompt_n = int(dm.get("prompt_tokens_total", prompt_n or 0))
                predicted_n = int(dm.get("tokens_predicted_total", predicted_n or 0))
                if "prompt_tokens_cached_total" in dm:
                    cache_n = int(dm["prompt_tokens_cached_total"])
            done.append(ApproxRequest(
                slot=was.get("id"), task=was.get("id_task"), cache_n=cache_n, prompt_n=prompt_n,
                predicted_n=predicted_n,
                prompt_ms=dm["prompt_seconds_total"] * 1e3 / share if dm.get("prompt_seconds_total") else None,
                predicted_ms=(dm["tokens_predicted_seconds_total"] * 1e3 / share
                              if dm.get("tokens_predicted_seconds_total") else None)))
        if metrics:
            self._prev_m = metrics
        return done
