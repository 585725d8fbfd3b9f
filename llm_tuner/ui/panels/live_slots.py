"""ServerSlot: one server the Live panel watches (a launch or an attach) and what its views show."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from llm_tuner.qt.server_bridge import ServerBridge

# The newest request records a slot keeps in memory (a busy server answers ~15/s for hours); the store keeps
# them all and the Requests tab reads them back on demand.
RECENT_RECORDS = 10_000
LOG_LINES = 20_000  # the newest server log lines a slot keeps (the log view keeps as many)


@dataclass(eq=False)
class ServerSlot:
    """One watched server in the panel: its bridge and what the views show when it is selected."""

    bridge: ServerBridge
    name: str = "server"
    plan: object = None  # LaunchPlan of the last launch (None for an attach)
    attach: tuple | None = None
    state: str = "idle"
    url: str | None = None
    message: str = ""
    message_error: bool = False
    notes: str = ""
    records: deque = field(default_factory=lambda: deque(maxlen=RECENT_RECORDS))  # the newest; all are in the store
    n_requests: int = 0  # finished in its current session (more than `records` once the ring is full)
    log_lines: deque = field(default_factory=lambda: deque(maxlen=LOG_LINES))
    restart_pending: bool = False
    never_ready: bool = False  # the last launch ended before the server was ever ready

    @property
    def running(self) -> bool:
        return self.bridge.running

    @property
    def display_state(self) -> str:
        """The state as people read it: a launch that failed before it was ready "did not start"."""
        return "did not start" if self.state == "exited" and self.never_ready else self.state

    def clear(self) -> None:
        """Forget the previous session's requests and log (a new launch or attach)."""
        self.records, self.n_requests, self.log_lines = deque(maxlen=RECENT_RECORDS), 0, deque(maxlen=LOG_LINES)

    def title(self) -> str:
        port = self.url.rsplit(":", 1)[-1].split("/")[0] if self.url else "–"
        return f"{self.name} · port {port} · {self.display_state}"
