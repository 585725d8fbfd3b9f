"""BuildsAB without Qt (Compare's "vs another build" row, issue 36): the saved profiles to choose from, the A/B
refused until both are chosen, its words while it runs, and the re-tune offered for a build the profile is
slower on, asked of the Tune tab through the workspace. A real SQLite store and a real stored build A/B
(tests/support/stored_builds)."""

from __future__ import annotations

import pytest

from llm_tuner.core.profile import LaunchProfile
from llm_tuner.services.bench.builds import SIDE_A, SIDE_B
from llm_tuner.state.callbacks import declared
from llm_tuner.state.compare_builds import CHOOSE_FIRST, BuildsAB
from llm_tuner.state.workspace import Workspace
from llm_tuner.store.db import open_engine
from llm_tuner.store.profiles import ProfileRepository
from llm_tuner.store.runs import RunRepository
from tests.support.stored_builds import OTHER, stored_ab


@pytest.fixture
def engine(tmp_path):
    engine = open_engine(tmp_path / "builds.sqlite")
    yield engine
    engine.dispose()


def _state(engine) -> tuple[BuildsAB, Workspace]:
    workspace = Workspace()
    return BuildsAB(ProfileRepository(engine), workspace), workspace


def test_the_saved_profiles_are_listed_and_an_ab_needs_a_profile_and_another_build(engine):
    state, _ws = _state(engine)
    assert set(declared(BuildsAB)) == {"names", "running", "status", "retune"}
    ProfileRepository(engine).save("q", LaunchProfile(model="/m/q.gguf"))
    ProfileRepository(engine).save("a", LaunchProfile(model="/m/a.gguf"))
    state.load_names()
    assert state.names == ("a", "q")
    _ws.profile_names = ("a", "q", "q ub256")  # the Profile tab saved another one (the quick start's step 6)
    assert state.names == ("a", "q", "q ub256")
    assert state.ab_work("", OTHER, 1) is None and state.status == CHOOSE_FIRST
    assert state.ab_work("q", "  ", 1) is None
    work = state.ab_work("gone", OTHER, 1)  # the profile was deleted meanwhile: the job says so
    with pytest.raises(ValueError, match="no saved profile named 'gone'"):
        work(None, lambda *_a: None, lambda: False)


def test_a_store_that_cannot_be_read_says_why():
    class Locked:
        def names(self) -> list[str]:
            raise OSError("database is locked")

    state = BuildsAB(Locked(), Workspace())
    state.load_names()
    assert state.status == "The saved profiles could not be read: database is locked" and state.names == ()


def test_the_ab_says_how_it_goes_and_a_slower_build_offers_a_retune(engine):
    state, workspace = _state(engine)
    asked: list[tuple] = []
    workspace.add_callback(lambda what, *d: asked.append(d) if what == "tune" else None)
    state.started("q", f" {OTHER} ")
    assert state.running and state.status == "starting…" and state.pending == ("q", OTHER)
    state.progressed("x" * 300)
    assert state.status == "x" * 160
    slower = stored_ab(RunRepository(engine), {SIDE_A: 40.0, SIDE_B: 30.0})  # generation 25 % slower on B
    state.succeeded(slower)
    assert state.status.startswith("done: B against A: ") and state.status_tip == slower.text
    assert (
        state.retune == ("q", OTHER)
        and "slower on this build" in state.retune_tip
        and OTHER in state.retune_tip
    )
    state.finished()
    assert not state.running
    state.ask_retune()
    assert asked == [("q", OTHER)]

    state.started("q", OTHER)  # another A/B: the offer goes until it says
    assert state.retune is None and state.retune_tip == ""
    state.failed(RuntimeError("the other build crashed"))
    assert state.status == "The build A/B failed: the other build crashed"
    same = stored_ab(RunRepository(engine), {SIDE_A: 40.0, SIDE_B: 40.1})  # within noise: nothing to re-tune
    state.show_verdict(same, "q", OTHER)
    assert state.retune is None
    state.ask_retune()
    assert asked == [("q", OTHER)]  # nothing asked
