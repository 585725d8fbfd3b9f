"""A server session (one launch or one attach) and its per-request records: plain frozen models.

The store returns these; services build them from log events (precise, the server's own figures
rounded to 2 decimals) or from /slots + /metrics deltas in attach mode (`approximate=True`).
"""

from __future__ import annotations

from dataclasses import dataclass, field


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

    @property
    def draft_acceptance(self) -> float | None:
        return (self.draft_n_accepted or 0) / self.draft_n if self.draft_n else None

    def to_json(self) -> dict:
        return {"time": self.time_unix, "slot": self.slot, "task": self.task, "cache_n": self.cache_n,
                "prompt_n": self.prompt_n, "prompt_ms": self.prompt_ms, "prompt_per_second": self.prompt_per_second,
                "predicted_n": self.predicted_n, "predicted_ms": self.predicted_ms,
                "predicted_per_second": self.predicted_per_second, "draft_n": self.draft_n,
                "draft_n_accepted": self.draft_n_accepted, "ttft_ms": self.ttft_ms, "latency_ms": self.latency_ms,
                "approximate": self.approximate}


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
    telemetry_summary: dict = field(default_factory=dict)
    n_requests: int = 0
