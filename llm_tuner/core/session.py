"""A server session (one launch or one attach) and its per-request records: plain frozen models.

The store returns these; services build them from log events (precise, the server's own figures
rounded to 2 decimals) or from /slots + /metrics deltas in attach mode (`approximate=True`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# What one request's figures can be. Beyond these a server (or something posing as one) lies: the figure is
# not kept as a measurement (a benchmark repetition with one is a failed request, saying which; a watched
# request keeps its other figures and names the dropped one). 2**31 tokens is far past any context llama.cpp
# takes.
MAX_TOKENS = 2**31
MAX_MS = 7 * 24 * 3600 * 1000.0  # a week for one request
MAX_TOKENS_PER_S = 1e8
COUNT_KEYS = ("cache_n", "prompt_n", "predicted_n", "draft_n", "draft_n_accepted")
MS_KEYS = ("prompt_ms", "predicted_ms", "ttft_ms", "latency_ms")
RATE_KEYS = ("prompt_per_second", "predicted_per_second")
# What a request keeps of the server's own `timings` object (a /completion answer's, or the last event of a
# streamed reply, /v1/chat/completions included), under the server's names; draft_* are there only when it
# drafted.
TIMINGS_KEYS = ("cache_n", "prompt_n", "prompt_ms", "prompt_per_second", "predicted_n", "predicted_ms",
                "predicted_per_second", "draft_n", "draft_n_accepted")


def server_timings(timings: Mapping[str, Any]) -> dict[str, Any]:
    """The figures a request keeps from the server's `timings` object, by their own names (absent: None).
    The one reading of that object: benchmark repetitions and chat replies both take their figures here."""
    return {key: timings.get(key) for key in TIMINGS_KEYS}


def implausible(key: str, value: object) -> str | None:
    """Why `value` cannot be the server's `key` of one request (None: it can, or it is absent)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{key} is {str(value)[:40]!r}, not a number"
    if not math.isfinite(value):
        return f"{key} is {value}"
    if value < 0:
        return f"{key} is negative ({value:g})"
    limit = MAX_TOKENS if key in COUNT_KEYS else MAX_MS if key in MS_KEYS else MAX_TOKENS_PER_S
    if value > limit:
        return f"{key} is {value:.3g}, beyond any real request (at most {limit:.3g})"
    if key in COUNT_KEYS and value != int(value):
        return f"{key} is {value:g}, not a whole count"
    return None


def implausible_timings(timings: Mapping[str, Any]) -> list[str]:
    """What is wrong with a server's `timings` object for one request (empty: nothing found)."""
    if not isinstance(timings, Mapping):
        return [f"timings is {type(timings).__name__}, not an object"]
    return [p for k in COUNT_KEYS + MS_KEYS + RATE_KEYS if (p := implausible(k, timings.get(k))) is not None]


@dataclass(frozen=True)
class RequestRecord:
    """One finished request. Key names follow the server's `timings`; unknown values are None."""

    time_unix: float  # when the request finished (wall clock)
    slot: int | None
    task: int | None
    cache_n: int | None  # prompt tokens reused from the cache
    prompt_n: int | None  # prompt tokens processed
    prompt_ms: float | None
    prompt_per_second: float | None
    predicted_n: int | None
    predicted_ms: float | None
    predicted_per_second: float | None
    draft_n: int | None = None
    draft_n_accepted: int | None = None
    ttft_ms: float | None = None
    latency_ms: float | None = None
    approximate: bool = False  # from /slots and /metrics deltas, not from the log
    model: str | None = None  # the router's model that served it (router mode; from its instance's log lines)
    # figures the server gave that no real request has (see implausible): dropped to None, named here
    implausible: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        dropped = []
        for key in COUNT_KEYS + MS_KEYS + RATE_KEYS:
            problem = implausible(key, getattr(self, key))
            if problem is not None:
                dropped.append(problem)
                object.__setattr__(self, key, None)
            elif key in COUNT_KEYS and getattr(self, key) is not None:
                object.__setattr__(self, key, int(getattr(self, key)))
        for key in ("slot", "task"):  # ids: anything that does not fit a database integer is no id
            v = getattr(self, key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not -(2**63) <= v < 2**63):
                object.__setattr__(self, key, None)
        if dropped:
            object.__setattr__(self, "implausible", tuple(self.implausible) + tuple(dropped))

    @classmethod
    def from_timings(cls, timings: Mapping[str, Any], time_unix: float) -> RequestRecord:
        """One reply's record from the server's own `timings` (see server_timings): the figures the Requests
        table shows for the same request from the server's log. TTFT is the server's prompt time and latency
        its prompt plus generation time, as the log's record has them (services.logparse.RequestTimings); a
        figure no real request has is dropped and named (see implausible)."""
        figures = server_timings(timings)
        prompt_ms, predicted_ms = figures["prompt_ms"], figures["predicted_ms"]
        both = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (prompt_ms, predicted_ms))
        return cls(time_unix=time_unix, slot=None, task=None, **figures, ttft_ms=prompt_ms,
                   latency_ms=prompt_ms + predicted_ms if both else None)

    @property
    def draft_acceptance(self) -> float | None:
        return (self.draft_n_accepted or 0) / self.draft_n if self.draft_n else None

    def to_json(self) -> dict[str, Any]:
        return {"time": self.time_unix, "slot": self.slot, "task": self.task, "cache_n": self.cache_n,
                "prompt_n": self.prompt_n, "prompt_ms": self.prompt_ms, "prompt_per_second": self.prompt_per_second,
                "predicted_n": self.predicted_n, "predicted_ms": self.predicted_ms,
                "predicted_per_second": self.predicted_per_second, "draft_n": self.draft_n,
                "draft_n_accepted": self.draft_n_accepted, "ttft_ms": self.ttft_ms, "latency_ms": self.latency_ms,
                "approximate": self.approximate, **({"implausible": list(self.implausible)} if self.implausible else {})}


@dataclass(frozen=True)
class SessionInfo:
    """One launch (or attach) of a server, as kept in the session history."""

    id: int
    started_unix: float
    argv: tuple[str, ...]
    mode: str = "launch"  # "launch" or "attach"
    url: str | None = None
    profile_version_id: int | None = None
    ended_unix: float | None = None
    exit_code: int | None = None
    exit_reason: str | None = None
    telemetry_summary: dict[str, Any] = field(default_factory=dict)
    n_requests: int = 0
