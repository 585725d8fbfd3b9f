"""MigrationState without Qt (the Profile tab's build banner, issue 36): a profile saved with an older build,
its flags' moves as rows, a choice never made for the user, the diff with and without it, Apply saving a new
version in a real SQLite store, and an answer about a profile no longer open dropped. The recorded --help of
two real llama-server builds (tests/data/binary)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_tuner.core.build import BuildStamp
from llm_tuner.core.cmdline import import_command, parse_help
from llm_tuner.core.cmdline.migrate import plan_migration
from llm_tuner.services.builds import ProfileBuildCheck
from llm_tuner.state.callbacks import declared
from llm_tuner.state.profile_migrate import NOTHING_SAVED, POINTS_HERE, MigrationState
from llm_tuner.state.workspace import Workspace
from llm_tuner.store.db import open_engine
from llm_tuner.store.profiles import ProfileRepository
from tests.support.held_run import Held

DATA = Path(__file__).resolve().parents[1] / "data" / "binary"
OLD = BuildStamp(key="f:aaaaaaaaaaaa h:1 p:-", file_sha256="a" * 64, help_sha256="1" * 64)
NEW = BuildStamp(key="f:bbbbbbbbbbbb h:2 p:-", file_sha256="b" * 64, help_sha256="2" * 64)
ARGS = ["-m", "/m.gguf", "--spec-type", "ngram-mod", "--draft-max", "48", "--no-mmap"]


@pytest.fixture
def engine(tmp_path):
    engine = open_engine(tmp_path / "profiles.sqlite")
    yield engine
    engine.dispose()


def _check(engine, name: str = "ng") -> ProfileBuildCheck:
    old_help = (DATA / "llama-server-help-2026-04.txt").read_text()
    new = parse_help((DATA / "llama-server-help.txt").read_text())
    profile = import_command(ARGS, catalog=parse_help(old_help)).profile
    saved = ProfileRepository(engine).save(name, profile, build=OLD, help_text=old_help)
    return ProfileBuildCheck(
        saved,
        OLD,
        NEW,
        ("llama-server build aaaaaaaa -> bbbbbbbb",),
        plan_migration(profile, new, parse_help(old_help)),
        new,
        True,
    )


def _state(engine, run=None) -> tuple[MigrationState, Workspace, list[str]]:
    workspace = Workspace()
    said: list[str] = []
    workspace.add_callback(lambda what, *d: said.append(d[0]) if what == "status_message" else None)
    state = MigrationState(engine, workspace, **({"run": run} if run is not None else {}))
    return state, workspace, said


def test_the_moves_are_rows_the_choice_is_the_users_and_apply_saves_a_version(engine):
    state, _ws, said = _state(engine)
    assert set(declared(MigrationState)) == {"shown", "headline", "reviewable", "diff", "result", "applying"}
    migrated: list = []
    state.add_callback(lambda what, *d: migrated.append(d[0]) if what == "migrated" else None)
    state.show_check(_check(engine))
    assert state.shown and state.reviewable and "ng v1 was saved with another build" in state.headline
    choice = next(r for r in state.rows if r.kind == "choice")
    assert choice.old == "--draft-max" and choice.label == "--draft-max 48  ->"
    assert [c for _t, c in choice.options] == ["--spec-draft-n-max", "--spec-ngram-mod-n-max"]
    assert choice.options[1][0].endswith(POINTS_HERE)  # ngram-mod drafting: the ngram flag
    assert any(r.kind == "move" and "--load-mode none" in r.text for r in state.rows)
    assert "--load-mode none" in state.diff.split("\n")[1]
    assert state.diff.endswith("(left as they are until chosen: --draft-max)")
    state.choose("--draft-max", "--spec-ngram-mod-n-max")
    assert "--spec-ngram-mod-n-max 48" in state.diff and "until chosen" not in state.diff
    state.apply()
    assert not state.applying
    new_version, versions = migrated[0]
    assert new_version.version == 2 and len(versions) == 2
    assert new_version.profile.ngram_mod_n_max == 48 and new_version.profile.load_mode == "none"
    assert said == ["Migrated ng: saved as version 2."]


def test_apply_without_the_choice_saves_what_it_can_and_says_what_is_left(engine):
    state, _ws, said = _state(engine)
    state.show_check(_check(engine))
    state.choose("--draft-max", "--spec-draft-n-max")
    state.choose("--draft-max", None)  # back to "choose…"
    state.apply()
    assert said == ["Migrated ng: saved as version 2; still to choose: --draft-max."]


def test_a_build_change_alone_has_nothing_to_review_and_the_same_build_no_banner(engine):
    state, _ws, said = _state(engine)
    check = _check(engine)
    state.show_check(check)
    state.show_check(
        ProfileBuildCheck(
            check.saved,
            OLD,
            NEW,
            ("llama-server build aaaaaaaa -> bbbbbbbb",),
            type(check.migration)(),
            check.new_catalog,
            True,
        )
    )
    assert (
        state.shown and not state.reviewable and state.diff == ""
    )  # a build change alone: nothing to review
    state.apply()  # nothing to migrate: nothing asked
    assert said == [] and state.result == ""
    state.show_check(ProfileBuildCheck(check.saved, OLD, OLD, ()))
    assert not state.shown  # the same build, no move: no banner


def test_an_answer_about_a_profile_no_longer_open_is_dropped(engine):
    run = Held()
    state, _ws, _said = _state(engine, run)
    first, second = _check(engine, "first"), _check(engine, "second")
    state.check(first.saved)
    assert state.jobs.doing == "Checking first's llama-server build"
    state.check(second.saved)
    run.done(1, second)
    run.done(0, first)  # late: another profile is open
    assert state.check_result is second and "second v1" in state.headline
    state.check(first.saved)
    run.fail(2, OSError("no llama-server"))
    assert not state.shown and state.result == "The build could not be checked: no llama-server"


def test_apply_that_fails_says_so_and_lets_the_user_try_again(engine):
    run = Held()
    state, _ws, _said = _state(engine, run)
    state.show_check(_check(engine))
    state.apply()
    assert state.applying and state.jobs.doing == "Migrating ng to this build"
    run.done(0, (None, [], ()))  # the choices left the settings as they were
    assert not state.applying and state.result == NOTHING_SAVED
    state.apply()
    run.fail(1, OSError("database is locked"))
    assert not state.applying and state.result == "Not migrated: database is locked"


def test_no_status_line_before_any_benchmark(engine):
    state, _ws, said = _state(engine)
    state.say_changed_since_last_run()  # an empty history: no build to compare with
    assert said == []
