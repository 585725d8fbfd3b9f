"""The workspace: what the whole app shares (napari's ViewerModel, glue's application state), Qt-free.

The probed binaries and devices, the settings, the model picked in the Models list, the profile being edited
with its name, its problem and its advice errors, the server the Live tab shows: declared, typed properties
(`callbacks.Declared`) whose assignment notifies its topic once, only when the value changed. Beside them the
requests one view makes of another (launch, benchmark, compare two runs, say a status message): a method
that notifies a topic, which the view that owns the action listens to.

Panels talk only through this object, never through another panel's widgets or methods (a test over
`llm_tuner/ui/` fails on one that does). `qt.context.AppState` wraps it for Qt: it forwards the attributes and
re-emits each topic as its signal.

Topics (`notify(topic, *details)`):
  binaries, inventory, model, profile, profile_meta (name, problem or errors), settings, profile_store (busy)
  server (slot): the shown server, or its state, URL or router models, or the list of servers, changed
  status_message (text), bench_runs, compare (run a, run b), profile_saved (a SavedProfile), server_log_lines
  (lines), profile_names (the saved profiles), complete_runs (the History's complete runs), compared (the
  runs Compare shows), and the requests launch_requested, stop_requested, test_prompt_requested,
  copy_command_requested, new_server_requested, benchmark_requested, save_profile_requested,
  compare_newest_requested, select_model_requested (path), profile_variant_requested (name suffix, field
  changes)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llm_tuner.core.advice import Advice
from llm_tuner.core.devices import DeviceInventory
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.core.settings import Settings
from llm_tuner.services.binaries import BinaryInfo
from llm_tuner.state.callbacks import Declared, Observable
from llm_tuner.state.live import ServerSlot

# the requests a view makes of the one that owns the action (menu actions, shortcuts, the quick start)
REQUESTS = (
    "launch_requested",
    "stop_requested",
    "test_prompt_requested",
    "copy_command_requested",
    "new_server_requested",
    "benchmark_requested",
    "save_profile_requested",
    "compare_newest_requested",
)


class Workspace(Observable):
    """The app's shared facts and selection, and the requests between views (see the module's text)."""

    binaries = Declared[dict[str, BinaryInfo]](topic="binaries", factory=dict)
    inventory = Declared[DeviceInventory | None](None, topic="inventory")
    settings = Declared[Settings](topic="settings", factory=Settings)
    model_path = Declared[Path | None](None, topic="model")
    profile = Declared[LaunchProfile | None](None, topic="profile")  # the one being edited
    profile_name = Declared[str | None](None, topic="profile_meta")  # its saved name (None: unsaved)
    # why the edited profile must not run now (a field whose text is not a value)
    profile_problem = Declared[str | None](None, topic="profile_meta")
    profile_errors = Declared[list[Advice]](
        topic="profile_meta", factory=list
    )  # its advice errors: launch refuses
    # a profile save is still on its way to the store (a Run waits for it to read the saved version)
    profile_store_busy = Declared[bool](False, topic="profile_store")
    # the saved profiles' names, as the Profile tab lists them
    profile_names = Declared[tuple[str, ...]]((), topic="profile_names")
    # the History's complete runs as (id, label), the newest first (a run going, failed or cancelled is not)
    complete_runs = Declared[tuple[tuple[int, str], ...]]((), topic="complete_runs")
    compared = Declared[tuple[int, int] | None](None, topic="compared")  # the runs (A, B) Compare shows

    def __init__(self, settings: Settings | None = None) -> None:
        super().__init__()
        if settings is not None:
            self.settings = settings
        self._server: ServerSlot | None = None
        self._server_api_key: str | None = None
        self._servers: tuple[ServerSlot, ...] = ()

    # -- the edited profile --------------------------------------------------------------------------
    def publish_profile(self, profile: LaunchProfile, name: str | None) -> None:
        """The Profile tab's edit: its settings and saved name. "profile" is said when either changed (a
        rename keeps the settings but the views label runs and servers by the name)."""
        renamed = name != self.profile_name
        self.profile_name = name
        if self.profile is not profile and self.profile != profile:
            self.profile = profile
        elif renamed:
            self.notify("profile", profile)

    def publish_checks(self, problem: str | None, errors: Sequence[Advice]) -> None:
        """Why the edited profile must not run (a field's problem) and its advice errors, at once."""
        self.profile_problem = problem
        self.profile_errors = list(errors)

    # -- the shown server ----------------------------------------------------------------------------
    @property
    def server(self) -> ServerSlot | None:
        """The server the Live tab shows (Chat talks to it, the status bar names it)."""
        return self._server

    @property
    def server_api_key(self) -> str | None:
        return self._server_api_key

    @property
    def servers(self) -> tuple[ServerSlot, ...]:
        return self._servers

    def show_server(
        self, slot: ServerSlot | None, api_key: str | None = None, servers: Sequence[ServerSlot] = ()
    ) -> None:
        """The Live tab's selected server and every server it watches. A slot changes in place (its state,
        URL, router models), so each call is said."""
        self._server, self._server_api_key, self._servers = slot, api_key, tuple(servers)
        self.notify("server", slot)

    # -- events and requests between views -------------------------------------------------------------
    def post_status(self, text: str) -> None:
        """A line for the status bar."""
        self.notify("status_message", text)

    def runs_changed(self) -> None:
        """A benchmark run was stored, finished or deleted (History, Compare, calibrations follow)."""
        self.notify("bench_runs")

    def request_compare(self, run_a: int, run_b: int) -> None:
        self.notify("compare", run_a, run_b)

    def request_tune(self, profile_name: str, binary: str) -> None:
        """Re-tune a saved profile as the base, run by this llama-server (Compare's build row -> Tune)."""
        self.notify("tune", profile_name, binary)

    def profile_saved(self, saved: Any) -> None:
        """A profile version was saved by another view (a tune's winner): the Profile lists show it."""
        self.notify("profile_saved", saved)

    def post_server_log_lines(self, lines: Sequence[Any]) -> None:
        """A benchmark's or a tune trial's server log lines, for the one log dock."""
        self.notify("server_log_lines", lines)

    def request(self, what: str) -> None:
        """One of REQUESTS (the Server menu's actions): the view that owns it acts."""
        if what not in REQUESTS:
            raise ValueError(f"{what!r} is not a request (one of {', '.join(REQUESTS)})")
        self.notify(what)

    def request_launch(self) -> None:
        self.request("launch_requested")

    def request_stop(self) -> None:
        self.request("stop_requested")

    def request_test_prompt(self) -> None:
        self.request("test_prompt_requested")

    def request_copy_command(self) -> None:
        self.request("copy_command_requested")

    def request_new_server(self) -> None:
        self.request("new_server_requested")

    def request_benchmark(self) -> None:
        self.request("benchmark_requested")

    def request_save_profile(self) -> None:
        """Save the edited profile under its name (a new one: named after its model)."""
        self.request("save_profile_requested")

    def request_compare_newest(self) -> None:
        """Compare the newest two runs (B the newest), as Compare's own choice by runs makes them."""
        self.request("compare_newest_requested")

    def request_select_model(self, path: Path) -> None:
        """Pick this model file in the Models list (the Models view selects it, or picks it unlisted)."""
        self.notify("select_model_requested", path)

    def request_profile_variant(self, suffix: str, changes: dict[str, Any]) -> None:
        """Duplicate the saved edited profile as "<its name> <suffix>" with these fields changed; save it."""
        self.notify("profile_variant_requested", suffix, dict(changes))
