"""The Profile view's named profiles as plain state: the saved names and the open one's versions, and what
save, new, duplicate, rename, delete and revert do to them, every store call through the `Run` given.

The panel's `Run` puts every call on one worker thread of its own, so calls keep their order; this state
updates what it already knows at once (the name, the list) and takes the store's answers when they come. A
real WAL SQLite file takes 0.5-10 ms per call on a busy machine (benchmarks/profile_store_latency.py), which
the GUI thread must not wait for. A listing asked for before a local change (save, new, duplicate, rename,
delete) is stale: it is asked again. While a call is queued or running the workspace's
`profile_store_busy` is True (a Run of the Benchmarks tab waits for it).

The edited profile, its name and its saved settings are ProfileState's (`profile`); what the editor shows is
the panel's, which listens here. Listeners get `notify(what, *details)` with `what` one of: "names"
(selected: the list again, and the name it selects or None), "versions" (the open profile's versions,
newest first), "open" (profile, name: the editor shows these settings under this name and publishes them),
"recompute" (publish: the name changed, the title and, with publish, the workspace follow), "loaded"
(saved: a profile the user picked was read), "refused" (the ProfileNameError of a name in use), "failed"
(what, exception: a store call failed; the list is read again), "settled" (no call is left).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from llm_tuner.core.profile import LaunchProfile, SavedProfile, unique_name
from llm_tuner.core.settings import Settings
from llm_tuner.services.builds import save_profile
from llm_tuner.state.callbacks import Jobs, Observable, Run, run_now
from llm_tuner.state.profile import ProfileState
from llm_tuner.state.workspace import Workspace
from llm_tuner.store.profiles import ProfileNameError, ProfileRepository


class ProfileLibraryState(Observable):
    """The saved profiles' names, the open one's versions, and the library's actions."""

    def __init__(
        self,
        repo: ProfileRepository,
        profile: ProfileState,
        workspace: Workspace,
        *,
        settings: Callable[[], Settings] = Settings,
        run: Run = run_now,
    ) -> None:
        super().__init__()
        self.repo = repo
        self.profile = profile
        self.workspace = workspace
        self.settings = settings
        self.jobs = Jobs(run)  # the store calls, with their words
        self.names: list[str] = []
        self.selected: str | None = None  # the name the list selects
        self.versions: dict[int, SavedProfile] = {}  # version number -> the listed history of the open one
        self._edits = 0  # local changes to the names list; a listing asked for before one is stale
        self._pending = 0

    @property
    def current_name(self) -> str | None:
        return self.profile.current_name

    def unique_name(self, base: str) -> str:
        """`base`, or `base 2`, `base 3`... whichever no listed profile uses (no SQL: the loaded list)."""
        return unique_name(base, self.names)

    # -- the store -----------------------------------------------------------------------------------------
    @property
    def store_busy(self) -> bool:
        """True while a store call is queued or running."""
        return self._pending > 0

    def _store(
        self, work: Callable[[], Any], on_done: Callable[[Any], None] | None = None, *, what: str
    ) -> None:
        self._pending += 1
        self.workspace.profile_store_busy = True

        def done(result: Any) -> None:
            try:
                if on_done is not None:
                    on_done(result)
            finally:
                self._finished()

        def failed(exc: BaseException) -> None:
            try:
                self._failed(what, exc)
            finally:
                self._finished()

        self.jobs(what.capitalize(), work, done, failed)

    def _finished(self) -> None:
        self._pending -= 1
        if self._pending == 0:
            self.workspace.profile_store_busy = False
            self.notify("settled")

    def _failed(self, what: str, exc: BaseException) -> None:
        self.notify("failed", what, exc)
        self.reload_names(select=self.current_name)  # show what the store really holds

    def _name_taken(self, name: str) -> bool:
        if name in self.names:
            self.notify("refused", ProfileNameError(f"a profile named {name!r} exists already"))
            return True
        return False

    def _open(self, profile: LaunchProfile, name: str | None) -> None:
        self.profile.saved_profile = profile
        self.notify("open", profile, name)

    # -- actions ---------------------------------------------------------------------------------------------
    def save_as(self, name: str) -> None:
        """Save the edited settings as the newest version of `name`, with the build they are meant for."""
        self._edits += 1
        repo, profile, settings = self.repo, self.profile.profile, self.settings()
        self._open(profile, name.strip() or name)  # publishes the name (bench and Live label by it)
        self.show_name(self.current_name)
        self._store(
            lambda: save_profile(repo, name, profile, settings=settings), self._saved, what=f"save {name!r}"
        )

    def _saved(self, saved: SavedProfile) -> None:
        if self.current_name == saved.name:
            self.reload_versions()
        self.workspace.post_status(f"Saved {saved.name} version {saved.version}.")

    def new_profile(self, name: str) -> None:
        """A new profile of the edited profile's model, saved as its first version."""
        self._edits += 1
        if self._name_taken(name):
            return
        repo, profile = self.repo, LaunchProfile(model=self.profile.profile.model)

        def work() -> SavedProfile:
            if repo.latest(name) is not None:
                raise ProfileNameError(f"a profile named {name!r} exists already")
            return repo.save(name, profile)

        self._open(profile, name)
        self.show_name(name)
        self.show_versions([])
        self._store(work, self._saved, what=f"create {name!r}")

    def duplicate(self, new: str) -> None:
        """A new profile whose first version is the current one's saved settings (or the editor's,
        unsaved)."""
        self._edits += 1
        if self._name_taken(new):
            return
        repo, old, profile = self.repo, self.current_name, self.profile.profile
        saved = self.profile.saved_profile

        def work() -> SavedProfile:
            if old is None or repo.latest(old) is None:
                return repo.save(new, profile)
            return repo.duplicate(old, new)

        self._open(saved if (old is not None and saved is not None) else profile, new)
        self.show_name(new)
        self.show_versions([])
        self._store(work, self._saved, what=f"duplicate as {new!r}")

    def rename(self, new: str) -> None:
        self._edits += 1
        old = self.current_name
        if old is None or new == old:
            return
        if self._name_taken(new):
            return
        repo = self.repo
        self.profile.current_name = new
        self.names = [new if n == old else n for n in self.names]
        self.show_name(new)
        self.notify("recompute", True)
        self._store(
            lambda: repo.rename(old, new), lambda _r: self.reload_names(select=new), what=f"rename {old!r}"
        )

    def delete_current(self) -> None:
        self._edits += 1
        name, repo = self.current_name, self.repo
        if name is None:
            return
        self.profile.current_name, self.profile.saved_profile = None, None
        self.names = [n for n in self.names if n != name]
        self.show_name(None)
        self.show_versions([])
        self.notify("recompute", False)
        self._store(lambda: repo.delete(name), lambda _r: self.reload_names(), what=f"delete {name!r}")

    def revert_to(self, version: int) -> None:
        """Save version `version`'s settings as the newest version; the editor shows them at once."""
        name, repo = self.current_name, self.repo
        old = self.versions.get(version)
        if name is None:
            return
        if old is not None:
            self._open(old.profile, name)
        self._store(lambda: repo.revert(name, version), self._reverted, what=f"revert {name!r}")

    def _reverted(self, saved: SavedProfile) -> None:
        if self.current_name != saved.name:
            return
        if self.profile.profile != saved.profile:  # the version was not listed yet: show what the store saved
            self._open(saved.profile, saved.name)
        self.reload_versions()

    # -- lists -----------------------------------------------------------------------------------------------
    def show_name(self, name: str | None) -> None:
        """List `name` (if new) and select it without loading it (the editor already shows it)."""
        if name is not None and name not in self.names:
            self.names = sorted([*self.names, name], key=str.lower)
        self.selected = name if name is not None and name in self.names else None
        self.notify("names", self.selected)
        self.workspace.profile_names = tuple(self.names)

    def reload_names(self, select: str | None = None) -> None:
        """Read the names from the store; select `select` without reloading its settings."""
        edits, repo = self._edits, self.repo
        self._store(
            lambda: repo.names(),
            lambda names: self._names_read(names, select, edits),
            what="list the profiles",
        )

    def _names_read(self, names: Sequence[str], select: str | None, edits: int) -> None:
        if edits != self._edits:  # a save/rename/delete came after the question: ask again (runs after it)
            self.reload_names(select=self.current_name)
            return
        self.names = list(names)
        self.show_name(select if select in names else None)

    def load(self, name: str) -> None:
        """The user picked a profile: read its newest version and its history."""
        if not name:
            return
        self.selected = name
        repo = self.repo
        self._store(lambda: (repo.latest(name), repo.versions(name)), self.loaded, what=f"load {name!r}")

    def loaded(self, result: tuple[SavedProfile | None, Sequence[SavedProfile]]) -> None:
        """A profile and its versions, read (or saved by a migration): shown unless the user picked
        another."""
        saved, versions = result
        if saved is None or self.selected != saved.name:
            return  # deleted meanwhile, or the user picked another one
        self._open(saved.profile, saved.name)
        self.show_versions(versions)
        self.notify("loaded", saved)

    def reload_versions(self) -> None:
        name, repo = self.current_name, self.repo
        if not name:
            self.show_versions([])
            return
        self._store(
            lambda: repo.versions(name),
            lambda vs: self.show_versions(vs) if self.current_name == name else None,
            what=f"list the versions of {name!r}",
        )

    def show_versions(self, versions: Sequence[SavedProfile]) -> None:
        self.versions = {v.version: v for v in versions}
        self.notify("versions", list(versions))

    def unselect(self) -> None:
        """An imported command is edited: no saved profile is open."""
        self.profile.saved_profile = None
        self.selected = None
        self.show_versions([])
