"""AppContext: what the composition root hands every panel (services, store, shared state).

`AppState` is the Qt face of the Qt-free `state.workspace.Workspace`: its attributes (`binaries`, `profile`,
`profile_name`, ...) read and write the workspace's declared properties (every write goes through their
setters, so it is said once), and each workspace topic is re-emitted as the signal panels connect. The signals
that views emit themselves (a status message, "bench runs changed", a compare request, new settings, a saved
profile, log lines) reach the workspace too: a Qt-free listener hears them either way, and each is said once.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Signal
from sqlalchemy import Engine

from llm_tuner.core.devices import DeviceInventory
from llm_tuner.core.settings import Settings
from llm_tuner.services.binaries import BinaryInfo
from llm_tuner.services.rpc import WorkerPool
from llm_tuner.state.callbacks import declared
from llm_tuner.state.live import ServerSlot
from llm_tuner.state.workspace import REQUESTS, Workspace

# workspace topic -> (the AppState signal that says it, how many of the topic's details it carries)
_SIGNALS: dict[str, tuple[str, int]] = {
    "binaries": ("binaries_probed", 1),
    "inventory": ("inventory_detected", 1),
    "model": ("model_selected", 1),
    "profile": ("profile_changed", 1),
    "profile_meta": ("profile_meta_changed", 0),
    "settings": ("settings_changed", 1),
    "status_message": ("status_message_posted", 1),
    "bench_runs": ("bench_runs_changed", 0),
    "compare": ("compare_requested", 2),
    "tune": ("tune_requested", 2),
    "server": ("server_shown", 0),
    "profile_saved": ("profile_saved", 1),
    "server_log_lines": ("server_log_lines_posted", 1),
    "select_model_requested": ("select_model_requested", 1),
    "profile_variant_requested": ("profile_variant_requested", 2),
    **{r: (r, 0) for r in REQUESTS},
}
# signals a view may emit itself -> (its topic, the workspace's call that says it)
_FROM_SIGNAL: dict[str, tuple[str, str]] = {
    "status_message_posted": ("status_message", "post_status"),
    "bench_runs_changed": ("bench_runs", "runs_changed"),
    "compare_requested": ("compare", "request_compare"),
    "tune_requested": ("tune", "request_tune"),
    "profile_saved": ("profile_saved", "profile_saved"),
    "server_log_lines_posted": ("server_log_lines", "post_server_log_lines"),
}


class AppState(QObject):
    """Shared selection and facts that several panels react to (the workspace's Qt face). Signals are past
    tense; the requests (`launch_requested`, ...) are said by the Server menu and heard by the owning view."""

    binaries_probed = Signal(object)  # dict[str, BinaryInfo]
    inventory_detected = Signal(object)  # DeviceInventory
    model_selected = Signal(object)  # pathlib.Path | None
    profile_changed = Signal(object)  # LaunchProfile (the one being edited), or its name changed
    profile_meta_changed = Signal()  # profile_name, profile_problem or profile_errors changed
    settings_changed = Signal(object)  # Settings
    status_message_posted = Signal(str)
    bench_runs_changed = Signal()  # a benchmark run was stored, finished or deleted
    compare_requested = Signal(int, int)  # run ids A, B (History -> Compare)
    server_shown = Signal()  # the Live tab's selected server (or its state), or the servers, changed
    profile_saved = Signal(object)  # a SavedProfile another view saved (a tune's winner)
    server_log_lines_posted = Signal(list)  # a benchmark's or tune's server log lines (logparse.LogLine)
    store_settled = Signal()  # the edited profile's store calls have all finished (store_busy went False)
    launch_requested = Signal()
    stop_requested = Signal()
    test_prompt_requested = Signal()
    copy_command_requested = Signal()
    new_server_requested = Signal()
    benchmark_requested = Signal()
    save_profile_requested = Signal()
    compare_newest_requested = Signal()
    select_model_requested = Signal(object)  # pathlib.Path: the Models list picks it
    profile_variant_requested = Signal(str, object)  # a name suffix, {field: value}: the Profile tab saves it
    # a saved profile's name and a llama-server: re-tune it as the base, run by that build (Compare -> Tune)
    tune_requested = Signal(str, str)

    # attributes read and written through the workspace's declared properties: binaries, inventory, settings,
    # model_path, profile, profile_name, profile_problem, profile_errors, profile_store_busy (set below)
    binaries: dict[str, BinaryInfo]
    inventory: DeviceInventory | None

    def __init__(self, workspace: Workspace | None = None) -> None:
        super().__init__()
        self.workspace = workspace if workspace is not None else Workspace()
        self._relaying: set[str] = set()  # topics being said now (a signal and its topic say each other once)
        self.workspace.add_callback(self._on_workspace_notified)
        for name, (topic, call) in _FROM_SIGNAL.items():
            getattr(self, name).connect(lambda *args, t=topic, c=call: self._relay_to_workspace(t, c, args))
        self.settings_changed.connect(self._on_settings_changed)

    def _on_workspace_notified(self, topic: str, *details: Any) -> None:
        if topic == "profile_store":
            if not details[0]:
                self.store_settled.emit()
            return
        if topic in self._relaying or topic not in _SIGNALS:
            return
        name, n = _SIGNALS[topic]
        self._relaying.add(topic)
        try:
            getattr(self, name).emit(*details[:n])
        finally:
            self._relaying.discard(topic)

    def _relay_to_workspace(self, topic: str, call: str, args: tuple) -> None:
        """A view emitted the signal itself: the workspace says it to its Qt-free listeners."""
        if topic in self._relaying:
            return
        self._relaying.add(topic)
        try:
            getattr(self.workspace, call)(*args)
        finally:
            self._relaying.discard(topic)

    def _on_settings_changed(self, settings: Settings) -> None:
        if "settings" not in self._relaying:
            self._relaying.add("settings")
            try:
                self.workspace.settings = settings
            finally:
                self._relaying.discard("settings")

    # -- the selected server, as the Live tab published it ----------------------------------------------
    @property
    def server(self) -> ServerSlot | None:
        return self.workspace.server

    @property
    def server_api_key(self) -> str | None:
        return self.workspace.server_api_key

    @property
    def servers(self) -> tuple[ServerSlot, ...]:
        return self.workspace.servers

    @property
    def store_busy(self) -> bool:
        """True while a profile save is on its way to the store (a Run waits)."""
        return self.workspace.profile_store_busy

    # the names panels and tests have always called
    def set_binaries(self, binaries: dict[str, BinaryInfo]) -> None:
        self.workspace.binaries = binaries

    def set_inventory(self, inventory: DeviceInventory) -> None:
        self.workspace.inventory = inventory

    def select_model(self, path) -> None:
        self.workspace.model_path = path

    def set_profile(self, profile) -> None:
        self.workspace.profile = profile


def _forward(name: str) -> property:
    def read(self: AppState) -> Any:
        return getattr(self.workspace, name)

    def write(self: AppState, value: Any) -> None:
        setattr(self.workspace, name, value)

    return property(read, write, doc=f"The workspace's {name} (a write notifies its topic once).")


for _name in declared(Workspace):
    setattr(AppState, _name, _forward(_name))


class AppContext:
    """The services and shared state every panel is built with. `settings` is the workspace's: assigning
    it says "settings" (the views that depend on it follow)."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        state: AppState | None = None,
        workers: WorkerPool | None = None,
        probe_generation: int = 0,
    ) -> None:
        self.engine = engine
        self.state = state if state is not None else AppState()
        self.state.workspace.settings = settings
        self.workers = workers if workers is not None else WorkerPool()  # local RPC workers this app started
        self.probe_generation = probe_generation  # the newest binaries probe (qt.probes): only it publishes

    @property
    def settings(self) -> Settings:
        return self.state.workspace.settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        self.state.workspace.settings = settings
