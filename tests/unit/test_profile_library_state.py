"""ProfileLibraryState without Qt (the Profile view's named profiles, issue 36): save, new, duplicate, rename,
delete and revert on a real SQLite store, the names and versions as the panel lists them, a name in use
refused, a listing asked before a local change asked again, a pick overtaken by another dropped, a failed
store call said, and the workspace's busy flag while calls are queued."""

from __future__ import annotations

import pytest

from llm_tuner.core.profile import LaunchProfile
from llm_tuner.state.callbacks import run_now
from llm_tuner.state.profile import ProfileState
from llm_tuner.state.profile_library import ProfileLibraryState
from llm_tuner.state.workspace import Workspace
from llm_tuner.store.db import open_engine
from llm_tuner.store.profiles import ProfileNameError, ProfileRepository
from tests.support.held_run import Held


@pytest.fixture
def repo(tmp_path):
    engine = open_engine(tmp_path / "profiles.sqlite")
    yield ProfileRepository(engine)
    engine.dispose()


class Panel:
    """What the panel does with the library's news: the editor shows an opened profile; the rest is kept."""

    def __init__(self, library: ProfileLibraryState) -> None:
        self.library = library
        self.events: list[tuple] = []
        library.add_callback(self)

    def __call__(self, what: str, *details) -> None:
        self.events.append((what, *details))
        if what == "open":
            self.library.profile.show(*details)

    def said(self, what: str) -> list[tuple]:
        return [d for w, *d in self.events if w == what]


def _library(repo, run=run_now) -> tuple[ProfileLibraryState, Panel, Workspace]:
    workspace = Workspace()
    library = ProfileLibraryState(repo, ProfileState(workspace), workspace, run=run)
    return library, Panel(library), workspace


def test_save_lists_the_name_and_its_version_and_says_so(repo):
    library, panel, workspace = _library(repo)
    statuses: list[str] = []
    workspace.add_callback(lambda what, *d: statuses.append(d[0]) if what == "status_message" else None)
    library.profile.profile = LaunchProfile(model="/m/qwen.gguf", ctx_size=8192)
    library.save_as("qwen")
    assert library.names == ["qwen"] and library.selected == "qwen" and workspace.profile_names == ("qwen",)
    assert library.current_name == "qwen" and not library.profile.dirty
    assert [v.version for v in panel.said("versions")[-1][0]] == [1] and sorted(library.versions) == [1]
    assert statuses == ["Saved qwen version 1."]
    assert panel.said("settled") and not library.store_busy and not workspace.profile_store_busy
    library.profile.profile = LaunchProfile(model="/m/qwen.gguf", ctx_size=16384)
    library.save_as("qwen")
    assert sorted(library.versions) == [1, 2] and repo.latest("qwen").profile.ctx_size == 16384


def test_new_duplicate_rename_delete_and_revert(repo):
    library, panel, _ws = _library(repo)
    library.profile.profile = LaunchProfile(model="/m/a.gguf", ctx_size=4096)
    library.save_as("a")
    library.new_profile("a")  # in use: refused, nothing saved
    assert isinstance(panel.said("refused")[0][0], ProfileNameError) and repo.names() == ["a"]
    library.new_profile("fresh")  # the edited profile's model, nothing else
    assert (
        repo.latest("fresh").profile == LaunchProfile(model="/m/a.gguf") and library.current_name == "fresh"
    )
    library.reload_names()
    assert library.names == ["a", "fresh"]

    library.load("a")
    library.profile.profile = LaunchProfile(model="/m/a.gguf", ctx_size=999)  # edited, not saved
    library.duplicate("a copy")  # the saved settings, not the edit
    assert repo.latest("a copy").profile.ctx_size == 4096 and library.profile.profile.ctx_size == 4096
    assert library.unique_name("a copy") == "a copy 2"

    library.rename("b")
    assert (
        library.names == ["a", "b", "fresh"]
        and library.selected == "b"
        and repo.names() == ["a", "b", "fresh"]
    )
    assert ("recompute", True) in panel.events
    library.delete_current()
    assert library.names == ["a", "fresh"] and library.current_name is None and library.versions == {}
    assert repo.names() == ["a", "fresh"]

    library.load("a")
    library.profile.profile = LaunchProfile(model="/m/a.gguf", ctx_size=2048)
    library.save_as("a")
    library.revert_to(1)
    assert library.profile.profile.ctx_size == 4096 and sorted(library.versions) == [1, 2, 3]
    assert repo.latest("a").profile.ctx_size == 4096


def test_a_listing_asked_before_a_local_change_is_asked_again(repo):
    run = Held()
    library, _panel, workspace = _library(repo, run)
    library.reload_names()
    assert workspace.profile_store_busy and library.jobs.doing == "List the profiles"
    library.profile.profile = LaunchProfile(model="/m/q.gguf")
    library.save_as("q")  # a local change after the listing was asked
    assert library.names == ["q"]
    run.answer(0)  # the listing from before the save: stale, asked again behind the save
    assert library.names == ["q"] and len(run.asked) == 3
    run.answer(1)  # the save
    run.answer(2)  # the listing again: now with q
    assert library.names == ["q"]
    for i in range(3, len(run.asked)):
        run.answer(i)
    assert not workspace.profile_store_busy and not library.store_busy


def test_a_pick_overtaken_by_another_is_dropped_and_a_loaded_one_is_checked(repo):
    repo.save("a", LaunchProfile(model="/m/a.gguf"))
    repo.save("b", LaunchProfile(model="/m/b.gguf"))
    run = Held()
    library, panel, _ws = _library(repo, run)
    library.load("a")
    library.load("b")
    run.answer(0)  # a's answer: the user picked b since
    assert library.current_name is None and not panel.said("loaded")
    run.answer(1)
    assert library.current_name == "b" and panel.said("loaded")[0][0].name == "b"
    assert library.profile.profile.model == "/m/b.gguf" and sorted(library.versions) == [1]


def test_a_failed_store_call_is_said_and_the_list_read_again(repo):
    class Busy(ProfileRepository):
        def delete(self, name: str) -> None:
            raise OSError("database is locked")

    library, panel, workspace = _library(Busy(repo.engine))
    library.profile.profile = LaunchProfile(model="/m/a.gguf")
    library.save_as("a")
    library.delete_current()
    what, exc = panel.said("failed")[0]
    assert what == "delete 'a'" and str(exc) == "database is locked"
    assert library.names == ["a"] and not workspace.profile_store_busy  # what the store really holds


def test_an_imported_command_opens_no_saved_profile(repo):
    library, panel, _ws = _library(repo)
    library.profile.profile = LaunchProfile(model="/m/a.gguf")
    library.save_as("a")
    library.unselect()
    assert (
        library.selected is None
        and library.profile.saved_profile is None
        and panel.said("versions")[-1] == [[]]
    )
