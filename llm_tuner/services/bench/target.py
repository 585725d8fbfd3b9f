"""What a benchmark measures (ServerTarget) and the callbacks a run reports through: a leaf of services.bench,
so the runner (runner.py) and the loop over a group's runs (group.py) share them without importing each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

ProgressFn = Callable[[float | None, str], None]
CancelFn = Callable[[], bool]


@dataclass
class ServerTarget:
    """What to benchmark: llama-server arguments (the runner starts it) or an attached URL."""

    argv: list[str] = field(default_factory=list)  # without the binary
    env: dict[str, str] = field(default_factory=dict)
    label: str = ""
    profile_version_id: int | None = None
    attached_url: str | None = None
    api_key: str | None = None
    memory_predicted_mib: dict[str, float] | None = None
    binary: str | None = None  # a profile's own llama-server (or fork); None: the configured one
