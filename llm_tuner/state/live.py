"""The Live view's fleet as plain state: the servers it watches (slots), the one shown, where a Start goes,
port clashes, the llama-server a launch runs and whether that program is trusted.

Several servers can run at once (a chat model and a code model on two ports): each launch or attach is a
*slot* with its own requests, log and message. Start uses the shown slot when it is free, else a free one,
else a new one (a running server keeps running); a port another running slot listens on is refused before
anything starts. LivePanel binds its widgets to a LiveFleet and runs each slot's server through a ServerBridge
(Qt); it feeds the bridge's events back here (`server_state_changed`, `request_finished`, `log_lines`).

Listeners get `notify(what, *details)` with `what` one of: "added" (slot), "selected" (slot: the views show
it now), "titles" (a name, port or state in the list changed), "message" (slot), "state" (slot), "command"
(the arguments Start launches were set here; the line shows `shown_command`: a running server's own), "note"
(text: why the edited profile is not the command), "refusal" (refused_for_advice: the last Start was refused, or
no longer is, for advice errors: "Launch anyway" shows), "watch" (the watch flags on or off). `watch` and
`refused_for_advice` are declared properties (callbacks.Declared): said once per change.

A slot's state is a services.supervised.ServerState, whose properties are the one definition of running,
stopping and coming up; here are its one colour (`STATE_COLOURS`) and its words (`ServerSlot.display_state`,
`status_text`, the message line), which Live, the status bar and Chat all read.
"""

from __future__ import annotations

import shlex
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from llm_tuner.core import flags
from llm_tuner.core.advice import Advice
from llm_tuner.core.cmdline import FlagCatalog, profile_to_argv
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.core.settings import Settings
from llm_tuner.services import preflight
from llm_tuner.services.binaries import SERVER, BinaryError, BinaryInfo, locate, require_trusted
from llm_tuner.services.demo_model import find_demo_model
from llm_tuner.services.launch import LaunchPlan, plan_launch
from llm_tuner.services.supervised import ServerState, StateChanged
from llm_tuner.state.callbacks import Declared, Observable

# The newest request records a slot keeps in memory (a busy server answers ~15/s for hours); the store keeps
# them all and the Requests tab reads them back on demand.
RECENT_RECORDS = 10_000
LOG_LINES = 20_000  # the newest server log lines a slot keeps (the log view keeps as many)
# an attached URL's host that is this machine
LOOPBACK = ("127.0.0.1", "localhost", "::1", "0.0.0.0", "::", "")
FIRST_MESSAGE = "Start a server to watch it: health, device plots and every request."
STATE_COLOURS = {ServerState.IDLE: "#777", ServerState.STARTING: "#b8860b", ServerState.LOADING: "#b8860b",
                 ServerState.READY: "#2e7d32", ServerState.STOPPING: "#b8860b", ServerState.GONE: "#c62828",
                 ServerState.EXITED: "#777"}  # the one colour of each state, in Live and the status bar


@dataclass(eq=False)
class ServerSlot:
    """One watched server (a launch or an attach) and what the views show when it is selected."""

    name: str = "server"
    plan: LaunchPlan | None = None  # the last launch (None for an attach)
    attach: tuple[str, str | None] | None = None  # (url, log path) of an attach
    state: ServerState = ServerState.IDLE  # the session's state as its events said
    url: str | None = None
    message: str = ""
    message_error: bool = False
    notes: str = ""
    # the newest; all are in the store
    records: deque[Any] = field(default_factory=lambda: deque(maxlen=RECENT_RECORDS))
    n_requests: int = 0  # finished in its current session (more than `records` once the ring is full)
    log_lines: deque[Any] = field(default_factory=lambda: deque(maxlen=LOG_LINES))
    restart_pending: bool = False
    never_ready: bool = False  # the last launch ended before the server was ever ready
    router_models: object | None = None  # services.router_watch.RouterModels: a router's models, as last read

    @property
    def server_state(self) -> ServerState:
        return ServerState(self.state)

    @property
    def running(self) -> bool:
        """Launched or attached and not yet ended (ServerState.running: stopping and gone included)."""
        return self.server_state.running

    @property
    def port(self) -> int | None:
        """The port it listens on: the launch's own (LaunchPlan.port), or the attached URL's."""
        if self.plan is not None:
            return self.plan.port
        try:
            return urlsplit(self.url).port if self.url else None
        except ValueError:  # a URL with a port that is no number
            return None

    @property
    def display_state(self) -> str:
        """The state as people read it: a launch that failed before it was ready "did not start"; an attached
        server that stopped answering is "not answering"."""
        state = self.server_state
        if state is ServerState.EXITED and self.never_ready:
            return "did not start"
        return "not answering" if state is ServerState.GONE else str(state)

    @property
    def colour(self) -> str:
        return STATE_COLOURS[self.server_state]

    def status_text(self) -> str:
        """Whether it takes requests, in one sentence ("" when it does): what Chat and the status bar say."""
        state = self.server_state
        if state is ServerState.READY:
            return ""
        if state is ServerState.IDLE:
            return "No server is running. Start one in the Live tab (F5)."
        if state.coming_up:
            return f"{self.name} is starting: it takes requests once it is ready."
        if state is ServerState.STOPPING:
            return f"{self.name} is stopping."
        if state is ServerState.GONE:
            return (f"{self.name} is not answering at {self.url}: it may have stopped or hung. It is watched "
                    "a few seconds more, then given up.")
        return f"{self.name} is not running ({self.display_state}). Start it in the Live tab (F5)."

    def clear(self) -> None:
        """Forget the previous session's requests and log (a new launch or attach)."""
        self.records, self.n_requests, self.log_lines = deque(maxlen=RECENT_RECORDS), 0, deque(maxlen=LOG_LINES)
        self.router_models = None

    def title(self) -> str:
        port = self.port
        return f"{self.name} · port {port if port is not None else '–'} · {self.display_state}"


@dataclass(frozen=True)
class StartFacts:
    """What Start reads from the rest of the app when it is pressed: the settings (trusted programs, paths),
    the probed binaries, and the profile being edited as the Profile tab published it."""

    settings: Settings = field(default_factory=Settings)
    binaries: Mapping[str, BinaryInfo] = field(default_factory=dict)
    profile: LaunchProfile | None = None
    profile_name: str | None = None  # its saved name (None: unsaved)
    profile_problem: str | None = None  # why it must not run now (an invalid field)
    profile_errors: tuple[Advice, ...] = ()  # its advice errors: Start refuses them unless forced


@dataclass(frozen=True)
class ProfileCommand:
    """The edited profile as a command line (shown in the arguments) and the environment that goes with it."""

    text: str
    env: dict[str, str]


class LiveFleet(Observable):
    """The slots, the selected one, the arguments Start launches and the rules of a start."""

    watch = Declared[bool](True, topic="watch")  # add the watch flags (--metrics, --log-jsonl)
    # the last Start was refused for advice errors ("Start anyway" shows)
    refused_for_advice = Declared[bool](False, topic="refusal")

    def __init__(self) -> None:
        super().__init__()
        self.slots: list[ServerSlot] = []
        self.command = ""  # the llama-server arguments Start launches (the panel's edit sets it as typed)
        self.profile_command: ProfileCommand | None = None
        self.selected: ServerSlot = self.new_slot()

    # -- slots ----------------------------------------------------------------------------------------
    def new_slot(self) -> ServerSlot:
        slot = ServerSlot(name=f"server {len(self.slots) + 1}", message=FIRST_MESSAGE)
        self.slots.append(slot)
        self.notify("added", slot)
        return slot

    def select(self, slot: ServerSlot) -> None:
        """Show `slot`; a launch of it that failed puts its own command back in the arguments (with its
        message)."""
        self.selected = slot
        if slot.server_state is ServerState.EXITED and slot.message_error and slot.plan is not None:
            self.set_command(shlex.join(slot.plan.user_args))
        self.notify("selected", slot)

    def select_index(self, index: int) -> None:
        if 0 <= index < len(self.slots) and self.slots[index] is not self.selected:
            self.select(self.slots[index])
            self.notify("titles")

    def slot_for_start(self) -> ServerSlot:
        """The start policy: the selected slot when it is free, else a free one, else a new one (servers keep
        running; one stopping still holds its port)."""
        if not self.selected.running:
            return self.selected
        for s in self.slots:
            if not s.running:
                return s
        return self.new_slot()

    def port_conflict(self, plan: LaunchPlan) -> ServerSlot | None:
        """The running slot that listens on the port `plan` asks for: a launch's LaunchPlan.port, or an
        attached server's URL port when that server is on this machine (a remote one's port is not ours)."""
        for s in self.slots:
            if not s.running or s.port != plan.port:
                continue
            if s.plan is not None or (urlsplit(s.url or "").hostname or "") in (*LOOPBACK, plan.host):
                return s
        return None

    def new_server(self) -> ServerSlot:
        """"New server": an empty slot, shown, for the next Start; the running ones keep running."""
        slot = self.new_slot()
        self.select(slot)
        self.show_message("A new server: pick a profile or model (or edit the arguments) and press Start. "
                          "The other servers keep running; choose them in the Server list.")
        self.notify("titles")
        return slot

    def quit_question(self) -> str | None:
        """The question to ask before quitting while servers this app launched run (quitting stops them), or
        None. Attached servers are only watched and keep running; one already stopping needs no answer."""
        running = [s for s in self.slots if s.plan is not None and s.server_state.stoppable]
        if not running:
            return None
        # host:port without "http://": a dialog would break the line after the slashes
        names = "; ".join(f"{s.name}, {s.url.split('//')[-1].rstrip('/')}" if s.url else s.name for s in running)
        if len(running) == 1:
            return f"A server is running ({names}).\nStop it and quit?"
        return f"{len(running)} servers are running ({names}).\nStop them and quit?"

    def show_message(self, text: str, *, error: bool = False, slot: ServerSlot | None = None) -> None:
        slot = slot or self.selected
        slot.message, slot.message_error = text, error
        self.notify("message", slot)

    def _set_state(self, slot: ServerSlot, state: ServerState) -> None:
        slot.state = state
        self.notify("state", slot)

    # -- the command Start launches -------------------------------------------------------------------
    def set_command(self, text: str) -> None:
        if text != self.command:
            self.command = text
            self.notify("command")

    def use_profile(self, profile: LaunchProfile | None) -> None:
        """The profile being edited becomes the command Start launches next (its env travels with it); a
        running server keeps its own command."""
        if profile is None:
            return
        try:
            argv, env = profile_to_argv(profile)
        except Exception as exc:  # noqa: BLE001 - an incomplete profile: keep the current command, say why
            self.notify("note", f"The profile cannot be turned into a command yet: {exc}")
            return
        text = shlex.join(argv)
        self.profile_command = ProfileCommand(text, dict(env))
        self.set_command(text)

    def use_model(self, path: str | Path | None, *, profile_shown: bool) -> None:
        """A model picked without a profile panel publishing becomes `-m PATH`; with one, the profile's whole
        command (which now has this model) already arrived through `use_profile`."""
        if path is not None and not profile_shown:
            self.set_command(shlex.join(flags.argv_for("model", str(path))))

    def prefill(self, model_path: str | Path | None) -> None:
        """An empty command gets the selected model, else the demo model when there is one."""
        if self.command.strip():
            return
        model = model_path
        if model is None:
            try:
                model = find_demo_model()
            except Exception:  # noqa: BLE001 - no demo model: the edit stays empty with its hint
                model = None
        if model is not None:
            self.set_command(shlex.join(flags.argv_for("model", str(model))))

    @property
    def command_locked(self) -> bool:
        """The selected server runs: the arguments line shows its own command, which no edit can change."""
        return self.selected.running

    @property
    def shown_command(self) -> str:
        """What the arguments line shows: the selected server's own command while it runs (an attached
        server's is not known here: ""), else the command Start launches (the edited profile's, or what was
        typed)."""
        slot = self.selected
        if slot.running:
            return shlex.join(slot.plan.user_args) if slot.plan is not None else ""
        return self.command

    @property
    def from_editor(self) -> bool:
        """The command is the edited profile's as published (not typed over by the user)."""
        return self.profile_command is not None and self.profile_command.text == self.command

    # -- what a launch runs ---------------------------------------------------------------------------
    @staticmethod
    def choose_binary(facts: StartFacts) -> tuple[str | None, FlagCatalog | None]:
        """The llama-server to run and its flag catalog: the probed one when it works, else the one Settings
        or the embedded build give (its --help not read here)."""
        info = facts.binaries.get(SERVER)
        if info is not None and info.ok:
            return str(info.path), info.catalog
        loc = locate(SERVER, facts.settings)
        return (str(loc.path), None) if loc else (None, None)

    def build_plan(self, facts: StartFacts) -> LaunchPlan:
        """The LaunchPlan of the command; ValueError says in plain words why there is none. The edited
        profile's own program (a fork, another build) runs only once the user confirmed it (trust)."""
        binary, catalog = self.choose_binary(facts)
        if binary is None:
            raise ValueError("No llama-server found: set its path in Settings (or install the `server` extra).")
        try:
            args = shlex.split(self.command)
        except ValueError as exc:
            raise ValueError(f"The arguments cannot be read ({exc}): check the quotes.") from exc
        if not args:
            raise ValueError("Give llama-server arguments (at least -m MODEL), or pick a model in the Models list.")
        from_editor = self.from_editor
        env = self.profile_command.env if from_editor and self.profile_command else {}
        own = facts.profile.binary if from_editor and facts.profile is not None else None
        if own:
            try:
                require_trusted(own, facts.settings)
            except BinaryError as exc:
                raise ValueError(f"Not started: {exc}") from None
            binary, catalog = own, None  # its --help is not read on the GUI thread: only --metrics is added
        return plan_launch(binary, args, env, catalog=catalog, watch=self.watch)

    def copy_plan(self, facts: StartFacts) -> LaunchPlan:
        """What Copy command copies: the shown server's own launch while it runs, else what Start would run
        (ValueError as `build_plan`)."""
        slot = self.selected
        if slot.plan is not None and slot.running:
            return slot.plan
        return self.build_plan(facts)

    def server_name(self, args: list[str], facts: StartFacts) -> str:
        """The profile's name when the command is the edited profile's, else the model file's stem (marked
        "unsaved" for the edited profile before it has a name: it is not the saved profile of that name)."""
        from_editor = self.from_editor
        if from_editor and facts.profile_name:
            return facts.profile_name
        model = flags.value_of(args, "model")
        if model:
            return Path(model).stem + (" (unsaved)" if from_editor else "")
        return f"server {len(self.slots)}"

    def preflight_errors(self, facts: StartFacts) -> list[Advice]:
        """The advice errors of what Start would launch: the edited profile's (the Profile tab found them, the
        model file included), else those of the typed arguments (core rules only: no file I/O here)."""
        if self.from_editor:
            return list(facts.profile_errors)
        return preflight.preflight_errors(argv=shlex.split(self.command), catalog=self.choose_binary(facts)[1],
                                          look=preflight.ModelLook(None))

    def _set_refused(self, refused: bool) -> None:
        self.refused_for_advice = refused  # said as "refusal" when it changed

    # -- actions --------------------------------------------------------------------------------------
    def start(self, facts: StartFacts, *, force: bool = False) -> ServerSlot | None:
        """Prepare a launch of the command: the slot it goes to (shown, in state "starting", its `plan` set),
        or None when it is refused (the message says why; nothing changed in any slot). Advice errors refuse
        it unless `force` (the "Launch anyway" the refusal offers). The caller runs `slot.plan`."""
        if facts.profile_problem and self.from_editor:
            self.show_message(facts.profile_problem, error=True)
            return None
        try:
            plan = self.build_plan(facts)
        except ValueError as exc:
            self.show_message(str(exc), error=True)
            return None
        errors = [] if force else self.preflight_errors(facts)
        self._set_refused(bool(errors))
        if errors:
            self.show_message("Not started: " + preflight.refusal_text(errors, "Launch anyway"), error=True)
            return None
        busy = self.port_conflict(plan)
        if busy is not None:  # refused before anything starts: the slot keeps what it showed
            self.show_message(f"Port {plan.port} is already used by “{busy.name}” in this app: give this "
                              "profile another --port (or leave it out and a free port is chosen).", error=True)
            return None
        slot = self.slot_for_start()
        slot.clear()
        slot.plan, slot.attach = plan, None
        slot.name = self.server_name(list(plan.user_args), facts)
        slot.notes = "<br>".join(plan.notes())
        slot.state, slot.url, slot.never_ready = ServerState.STARTING, plan.url, False
        self.select(slot)
        self.show_message(f"Starting: {plan.command_line()}")
        self.notify("titles")
        return slot

    def attach(self, url: str, log_path: str | None = None) -> ServerSlot:
        """Prepare watching a server started elsewhere: the slot it goes to (shown, "starting")."""
        slot = self.slot_for_start()
        slot.clear()
        slot.plan, slot.attach = None, (url, log_path)
        slot.name = f"attached {url.split('//')[-1]}"
        slot.notes = ("" if log_path else "No log file: request records come from /slots and /metrics "
                      "and are approximate (marked ≈).")
        slot.state, slot.url = ServerState.STARTING, url
        self.select(slot)
        self.notify("titles")
        return slot

    def stopping(self, *, restart: bool = False) -> ServerSlot:
        """The selected server was asked to stop (and, with `restart`, to start again once it exited)."""
        slot = self.selected
        if restart:
            slot.restart_pending = True
        self._set_state(slot, ServerState.STOPPING)
        self.notify("titles")
        return slot

    # -- what the server said -------------------------------------------------------------------------
    def server_state_changed(self, slot: ServerSlot, ev: StateChanged) -> bool:
        """A session event of `slot`: its state, URL and message. True when a restart is due now (it exited
        with one pending): the caller launches `slot.plan` again."""
        state = ServerState(ev.state)
        was_ready = slot.server_state in (ServerState.READY, ServerState.GONE)
        slot.state = state
        if state is ServerState.STARTING:
            slot.never_ready = False
        elif state is ServerState.EXITED:
            slot.never_ready = not was_ready and ev.failure is not None
        slot.url = ev.url or slot.url
        restart = False
        if state is ServerState.READY:
            self.show_message(f"Ready at {ev.url}. Requests from any client appear in the Requests tab.", slot=slot)
        elif state is ServerState.LOADING:
            self.show_message("Loading the model…", slot=slot)
        elif state is ServerState.GONE:
            self.show_message(f"{slot.url} stopped answering: the server may have stopped or hung. It is "
                              "watched a few seconds more, then given up.", error=True, slot=slot)
        elif state is ServerState.EXITED:
            if ev.failure is not None:
                # a server that never got ready (port taken, model missing, out of memory) did not start
                what = "stopped" if was_ready else "did not start"
                self.show_message(f"The server {what}: {ev.failure.message}", error=True, slot=slot)
                if slot is self.selected and slot.plan is not None:  # the failed session's own command, not
                    self.set_command(shlex.join(slot.plan.user_args))  # the profile edited since
            else:
                self.show_message(f"The server {ev.reason or 'exited'} (exit code {ev.code}). "
                                  f"{slot.n_requests} requests kept in the history.", slot=slot)
            if slot.restart_pending:
                slot.restart_pending = False
                if slot.plan is not None:
                    slot.clear()
                    slot.state = ServerState.STARTING
                    if slot is self.selected:
                        self.select(slot)
                    restart = True
        self.notify("state", slot)
        self.notify("titles")
        return restart

    def request_finished(self, slot: ServerSlot, record: object) -> None:
        slot.records.append(record)
        slot.n_requests += 1

    def log_lines(self, slot: ServerSlot, lines: list[Any]) -> None:
        slot.log_lines.extend(lines)
