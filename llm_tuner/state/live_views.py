"""The Live view's sub-views as plain state: the Requests tab's feed, the History tab's sessions, the Models
tab of a router, the log console's filter and the Devices tab's note. LivePanel's views (ui/panels/
live_requests.py, live_history.py, live_models.py, log_console.py, live_devices.py) bind them; their
widgets, timers and table models stay Qt's.

RequestsFeed: finished requests queued and handed to the table in batches (at most once every `every_s`
while the table shows, at once when hidden or forced), the words above the table (the hint, "newest N of
M"), and "Show all": the session's requests read back from the history (through `run`) and merged with the
newest received. Listeners get "reading" (declared: the read runs), "note" (text: why the read could not
be done) and "all" (rows, received: every request of the session, to show without a ring).

SessionHistory: the sessions this app launched or attached, newest first, as rows of cells (declared
"rows"), read from the history through `run`; a session still running says so; "error": why a read failed
(the panel's job also reports it on the app's error surface).

LogLines: the server's output as the log console keeps it: the newest `max_lines` received (a ring), the
level filter and the search, which lines pass them, and the count; the console's table model and view stay
Qt's.

RouterModelsState: a router's models (services.router_watch.RouterModels, as last read), each one's row
(state, load time, memory, plan, speed), the summary and the warning of running models that do not fit
(declared "rows", "summary", "warning", "message"), whether Load or Unload applies to a model, and the
plan's refusal of a Load that does not fit (unless overridden). The HTTP calls stay the view's
(qt.router_actions), which hands their outcome here (`loaded`, `done`).
"""

from __future__ import annotations

import shlex
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from llm_tuner.core.devices import DeviceInventory
from llm_tuner.core.memory.router import RouterPlan
from llm_tuner.core.session import RequestRecord, SessionInfo
from llm_tuner.services.process import signal_name
from llm_tuner.services.router_watch import RouterModels, model_speeds
from llm_tuner.state.callbacks import Declared, Observable, Run, run_now

ROWS_EVERY_S = 1.0  # while the table shows, new rows land at most this often
UNBOUNDED = 2**62  # "Show all": no ring until the next session
NO_REQUESTS = (
    "No requests yet. Press “Send test prompt”, or point any client (a chat UI, curl, your editor) at the "
    "server's URL: every request appears here with its prompt and generation speed."
)
NOT_IN_HISTORY = "This session is not in the history: only the newest requests can be shown."


class RequestHistory(Protocol):
    """Where every request of a session is kept (store.sessions.SessionRepository)."""

    def requests(self, session_id: int) -> list[RequestRecord]: ...


@dataclass(frozen=True)
class RequestsLabels:
    """The Requests tab's words and which of its parts show, for `rows` shown of `total`."""

    hint: bool  # no rows: the hint says how requests come
    trimmed: bool  # older requests are not in the table: the note and "Show all" show
    note: str
    fit: bool  # "Fit columns" has rows to fit


def requests_labels(rows: int, total: int) -> RequestsLabels:
    trimmed = total > rows
    note = (
        f"Showing the newest {rows:,} of {total:,} requests (a busy server stays light). Every request is "
        "kept in the session history: “Show all” reads them back."
        if trimmed
        else ""
    )
    return RequestsLabels(hint=rows == 0, trimmed=trimmed, note=note, fit=rows > 0)


def all_requests(stored: Sequence[Any], received: int, recent: Sequence[Any]) -> list[Any]:
    """Every request of the session: `stored` as read from the history, `received` how many the view has had
    so far, `recent` the newest of those. The history is written before a request reaches the view, so it may
    hold a few the view has yet to receive (they come as usual) and lack none but the newest few it received
    while the history was read (taken from `recent`)."""
    rows = list(stored[:received])
    missing = received - len(rows)
    recent = list(recent)
    return rows + (recent[len(recent) - missing :] if missing > 0 else [])


class RequestsFeed(Observable):
    """The Requests tab's queue of finished requests and its "Show all"."""

    reading = Declared[bool](False, topic="reading")

    def __init__(self, *, max_rows: int = 10_000, every_s: float = ROWS_EVERY_S, run: Run = run_now) -> None:
        super().__init__()
        self.ring_rows = max_rows  # the newest requests the table keeps
        self.every_s = every_s
        self.run = run
        self.pending: list[Any] = []
        self._landed = float("-inf")  # when rows last landed (monotonic)

    def add(self, record: Any) -> None:
        """Queue one finished request; it goes to the table with a later batch."""
        self.pending.append(record)

    def take(self, *, visible: bool, force: bool = False, now: float | None = None) -> list[Any]:
        """The queued rows as one batch: now when the table is hidden or `force`, else at most once every
        `every_s` (empty: the rows wait for a later batch)."""
        if not self.pending:
            return []
        now = time.monotonic() if now is None else now
        if not force and visible and now - self._landed < self.every_s:
            return []
        self._landed = now
        pending, self.pending = self.pending, []
        return pending

    def clear(self) -> None:
        """Another session is shown: what was queued for the last one goes."""
        self.pending = []

    def read_all(
        self,
        repo: RequestHistory | None,
        session_id: int | None,
        current: Callable[[], tuple[int, Sequence[Any]] | None],
    ) -> None:
        """Read session `session_id`'s requests back from the history `repo` (through `run`: it can be 100k
        rows), then say "all" with every request; `current()` gives (requests received, the newest of them)
        for the session shown, or None when the view shows another one by then."""
        if repo is None or session_id is None:
            self.notify("note", NOT_IN_HISTORY)
            return
        self.reading = True

        def done(stored: list[RequestRecord]) -> None:
            self.reading = False
            now = current()
            if now is not None:
                received, recent = now
                self.notify("all", all_requests(stored, received, recent), received)

        def failed(exc: BaseException) -> None:
            self.reading = False
            self.notify("note", f"The history could not be read: {exc}")

        self.run(lambda: repo.requests(session_id), done, failed)


# -- Devices -----------------------------------------------------------------------------------------------
def devices_note(inventory: DeviceInventory | None) -> str:
    """What the Devices tab's plots show for the detected devices (None: still detecting)."""
    if inventory is None:
        return "Detecting devices…"
    if not inventory.devices:
        return (
            "No GPU found: the plots show the host CPU and RAM (and the server's share). Temperature, power "
            "and clocks are GPU figures: not shown."
        )
    return (
        "One curve per GPU (a card under two backends is one GPU: CUDA0 + Vulkan0); red shading marks "
        "throttling."
    )


# -- the log console -------------------------------------------------------------------------------------
LEVEL_ORDER = {"error": 0, "warn": 1, "info": 2, "output": 2, "cont": 2, "debug": 3}
LOG_FILTERS = (("Errors", 0), ("Warnings and errors", 1), ("Info", 2), ("Everything", 3))
MARK = {"error": "E", "warn": "W", "info": "I", "debug": "D", "output": " ", "cont": " "}


class LogLine(Protocol):
    """A line of the server's output (services.logparse.LogLine)."""

    @property
    def level(self) -> str: ...

    @property
    def text(self) -> str: ...


def format_line(line: LogLine) -> str:
    """A line as the console shows and copies it: its level's mark, then its text."""
    return f"{MARK.get(line.level, ' ')} {line.text}"


class LogLines:
    """The lines received (the newest `max_lines`) and which of them the level filter and search let
    through."""

    def __init__(self, max_lines: int = 20_000) -> None:
        self.max_lines = max_lines
        self.lines: deque[LogLine] = deque(maxlen=max_lines)
        self.most = LOG_FILTERS[-1][1]  # the least urgent level shown (3: everything)
        self.needle = ""  # the search, lower case ('': none)

    def set_filter(self, most: int, search: str) -> list[LogLine]:
        """A new level filter or search: the received lines that pass it now."""
        self.most, self.needle = most, search.lower()
        return self.passing(self.lines)

    def passing(self, lines: Sequence[LogLine] | deque[LogLine]) -> list[LogLine]:
        most, needle = self.most, self.needle
        return [
            x
            for x in lines
            if LEVEL_ORDER.get(x.level, 2) <= most and (not needle or needle in x.text.lower())
        ]

    def add(self, lines: Sequence[LogLine]) -> list[LogLine]:
        """A batch received: kept, and those of it that pass the filter (to show)."""
        self.lines.extend(lines)
        return self.passing(lines)

    def clear(self) -> None:
        self.lines.clear()

    @property
    def count_text(self) -> str:
        return f"{len(self.lines)} lines"


# -- History ---------------------------------------------------------------------------------------------
HISTORY_HEADERS = ("#", "Started", "Mode", "Requests", "Exit", "Reason", "Command")
Cell = tuple[str, str | None]  # (text, tooltip)


class SessionLister(Protocol):
    """The session history (store.sessions.SessionRepository)."""

    def history(self, limit: int = 100) -> list[SessionInfo]: ...


def exit_cell(s: SessionInfo, *, running: bool) -> Cell:
    """The History's Exit column for a session: a readable value and a tooltip with the reason."""
    if s.ended_unix is None:
        if running:
            return "running", None
        return "not recorded", "The app ended before this server's exit was recorded."
    if s.exit_code is not None:
        return signal_name(s.exit_code) or str(s.exit_code), s.exit_reason
    if s.mode == "attach":
        return "—", s.exit_reason or "Detached: the server was started elsewhere and kept running."
    return "did not start", s.exit_reason or "The server process did not start."


def session_row(s: SessionInfo, *, running: bool) -> tuple[Cell, ...]:
    """One session's cells: number, start, mode, requests, exit, reason and command."""
    command = shlex.join(s.argv) if s.argv else None
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.started_unix))
    return (
        (str(s.id), None),
        (started, None),
        (s.mode, None),
        (str(s.n_requests), None),
        exit_cell(s, running=running),
        (s.exit_reason or "—", s.exit_reason),
        (command or s.url or "—", command),
    )


class SessionHistory(Observable):
    """The History tab: every server session, newest first (`limit` of them)."""

    rows = Declared[tuple[tuple[Cell, ...], ...]]((), topic="rows")
    error = Declared[str]("", topic="error")  # why the last read failed ('': it did not)

    def __init__(
        self,
        repo: SessionLister | None,
        running: Callable[[], set[int]] = set,
        *,
        run: Run = run_now,
        limit: int = 200,
    ) -> None:
        super().__init__()
        self.repo = repo
        self.running = running  # the ids of the sessions still running (asked when the history arrives)
        self.run = run
        self.limit = limit

    def load(self) -> None:
        """Read the history again (through `run`); without a store there is none."""
        repo = self.repo
        if repo is None:
            return
        self.run(lambda: repo.history(self.limit), self.show, self._failed)

    def _failed(self, exc: BaseException) -> None:
        self.error = f"The server history could not be read: {exc}"

    def show(self, sessions: Sequence[SessionInfo]) -> None:
        ours = self.running()
        self.error = ""
        self.rows = tuple(session_row(s, running=s.id in ours) for s in sessions)


# -- a router's Models ------------------------------------------------------------------------------------
MODELS_HEADERS = ("Model", "State", "Loaded in", "Memory (RSS)", "Plan", "Speed", "Found in", "File")
# The router reads --models-autoload from its own command line only (server-models.cpp is_autoload: a presets
# file's [*] passes it to the instances, not to the router)
AUTOLOAD_HINT = (
    "Loads by other clients cannot be refused here: started with --no-models-autoload, the router loads a "
    "model only when asked (Load), never because a request names it."
)
BUSY = ("loaded", "loading")  # an instance that Unload stops and Load leaves alone


def plan_text(plan: RouterPlan | None, name: str) -> str:
    """What the plan counts for a model's instance, per device."""
    m = plan.model(name) if plan is not None else None
    if m is None:
        return "—"
    if m.plan is None:
        return f"no plan: {m.error}"
    return ", ".join(f"{dev} {mib:.0f}" for dev, mib in m.use_mib.items() if mib >= 0.5) + " MiB"


class RouterModelsState(Observable):
    """A router's models as the Live tab's Models view shows them, and the rules of its Load and Unload."""

    rows = Declared[tuple[tuple[str, ...], ...]]((), topic="rows")
    summary = Declared[str]("", topic="summary")
    warning = Declared[str]("", topic="warning")  # running models that overfill a device ('': none)
    message = Declared[str]("", topic="message")  # a refusal with its figures, or what the router answered

    def __init__(self) -> None:
        super().__init__()
        self.listed: RouterModels | None = None
        self.url: str | None = None  # where Load and Unload go (None: nowhere)
        self.api_key: str | None = None
        self.records: Sequence[RequestRecord] = ()
        self.load_s: dict[str, float] = {}  # loads asked here, timed by the job that followed them

    def show(
        self,
        listed: RouterModels | None,
        *,
        url: str | None = None,
        api_key: str | None = None,
        records: Sequence[RequestRecord] = (),
    ) -> None:
        """A RouterModels event (None: not a router, or not known yet); `records`: the server's recent
        requests (each model's speed)."""
        self.listed, self.url, self.api_key, self.records = listed, url, api_key, records
        self._show()

    def _show(self) -> None:
        listed = self.listed
        models = listed.models if listed is not None else ()
        plan = listed.plan if listed is not None else None
        speeds = model_speeds(self.records)
        rows = []
        for m in models:
            usage = listed.usage_of(m.id) if listed is not None else None
            speed = speeds.get(m.id)
            load_s = self.load_s.get(m.id, usage.load_s if usage is not None else None)
            rows.append(
                (
                    m.id,
                    m.status + (" (failed)" if m.failed else ""),
                    f"{load_s:.1f} s" if load_s is not None else "—",
                    f"{usage.rss_mib:.0f} MiB" if usage is not None and usage.rss_mib is not None else "—",
                    plan_text(plan, m.id),
                    speed.text() if speed is not None else "—",
                    m.source or "—",
                    m.path or "—",
                )
            )
        loaded = [m.id for m in models if m.loaded]
        text = (
            (
                f"{len(models)} model(s); loaded: {', '.join(loaded) or 'none'}. The router loads a model "
                'when a request names it (its "model" field), or with Load.'
            )
            if models
            else ""
        )
        if plan is not None and plan.models_max is not None:
            text += f" The plan: at most {plan.models_max} at once fit (--models-max)."
        if listed is not None and listed.error:
            text = f"{text} {listed.error}".strip()
        overfull = listed.unfit_running() if listed is not None else None
        self.rows = tuple(rows)
        self.summary = text
        self.warning = (
            f"The running models do not fit together: {overfull.text()} {AUTOLOAD_HINT}"
            if overfull is not None
            else ""
        )

    def status_of(self, name: str | None) -> str | None:
        models = self.listed.models if self.listed is not None else ()
        return next((m.status for m in models if m.id == name), None)

    def can_load(self, name: str | None) -> bool:
        status = self.status_of(name)
        return self.url is not None and status is not None and status not in BUSY

    def can_unload(self, name: str | None) -> bool:
        return self.url is not None and self.status_of(name) in BUSY

    def ask_load(self, name: str | None, *, override: bool = False) -> bool:
        """Whether to ask the router to load `name`: the plan first; a load that would not fit beside the
        running models is refused with the figures unless `override`."""
        if name is None or self.url is None:
            return False
        check = self.listed.check_load(name) if self.listed is not None else None
        if check is not None and check.fits is False and not override:
            self.message = (
                f'Not loaded: {check.text()}. Unload a model first, or tick "Load even if the '
                'plan says it does not fit".'
            )
            return False
        self.message = f"Loading {name}…" + (f" ({check.text()})" if check is not None else "")
        return True

    def ask_unload(self, name: str | None) -> bool:
        if name is None or self.url is None:
            return False
        self.message = f"Unloading {name}…"
        return True

    def loaded(self, name: str, seconds: float) -> None:
        """A Load asked here saw its model loaded after `seconds`."""
        self.load_s[name] = seconds
        self._show()

    def done(self, name: str, action: str, error: object | None) -> None:
        """What the router answered to a Load or an Unload."""
        if error:
            self.message = f"The router did not {action} {name}: {error}"
        elif action == "load":
            took = self.load_s.get(name)
            self.message = f"{name} is loaded" + (f" (in {took:.1f} s)." if took is not None else ".")
        else:
            self.message = f"The router unloads {name}; the list follows within seconds."

    def loaded_names(self) -> list[str]:
        """The models shown as loaded (for tests and status lines)."""
        return [row[0] for row in self.rows if row[1] == "loaded"]
