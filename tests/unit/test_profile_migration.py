"""A profile saved with a build before the 2026-04-26 renames, brought to the embedded build: the recorded
older --help (tests/data/binary/llama-server-help-2026-04.txt, made by make_old_help.py from the real one) against
the real one; renamed flags move, removed ones get their replacement, an ambiguous one is a choice."""

from __future__ import annotations

from pathlib import Path

from llm_tuner.core.build import BuildStamp, build_changes
from llm_tuner.core.cmdline import import_command, parse_help
from llm_tuner.core.cmdline.migrate import apply_migration, command_lines, plan_migration
from llm_tuner.store.db import open_engine
from llm_tuner.store.profiles import ProfileRepository

DATA = Path(__file__).resolve().parents[1] / "data" / "binary"
OLD_HELP = (DATA / "llama-server-help-2026-04.txt").read_text()
NEW_HELP = (DATA / "llama-server-help.txt").read_text()
OLD, NEW = parse_help(OLD_HELP), parse_help(NEW_HELP)
ARGV = ["-m", "/models/q.gguf", "-md", "/models/d.gguf", "--spec-type", "draft-simple", "--draft-max", "8",
        "--mlock", "-c", "8192"]


def _old_profile(argv=ARGV):
    result = import_command(argv, catalog=OLD)
    assert not result.removed and not result.unknown  # the old build accepted every flag
    return result.profile


def test_the_old_build_accepted_what_the_new_one_refuses():
    p = _old_profile()
    assert p.extra_args == ("--draft-max", "8", "--mlock")  # not modelled: kept as written
    assert NEW.lookup("--draft-max").removed.startswith("--spec-draft-n-max or --spec-ngram-mod-n-max")


def test_removed_flags_get_their_replacements_and_the_ambiguous_one_is_a_choice():
    migration = plan_migration(_old_profile(), NEW, OLD)
    by_flag = {m.old: m for m in migration.moves}
    assert set(by_flag) == {"--draft-max", "--mlock"}
    draft = by_flag["--draft-max"]
    assert draft.ambiguous and draft.choices == ("--spec-draft-n-max", "--spec-ngram-mod-n-max")
    assert draft.suggested == "--spec-draft-n-max"  # the profile has a draft model: shown, never applied alone
    assert draft.replacement() is None
    assert migration.ambiguous == (draft,)
    mlock = by_flag["--mlock"]
    assert not mlock.ambiguous and mlock.replacement() == ("--load-mode", "mmap+mlock")


def test_applying_without_a_choice_leaves_the_ambiguous_flag_and_with_one_moves_it_into_a_field():
    p = _old_profile()
    migration = plan_migration(p, NEW, OLD)
    partly, undone = apply_migration(p, migration, NEW)
    assert [m.old for m in undone] == ["--draft-max"]
    assert partly.extra_args == ("--draft-max", "8") and partly.load_mode == "mmap+mlock"
    done, undone = apply_migration(p, migration, NEW, {"--draft-max": "--spec-ngram-mod-n-max"})
    assert undone == ()
    assert done.ngram_mod_n_max == 8 and done.draft_n_max is None and done.extra_args == ()
    done, _ = apply_migration(p, migration, NEW, {"--draft-max": "--spec-draft-n-max"})
    assert done.draft_n_max == 8 and done.model == p.model and done.draft_model == p.draft_model
    before, after = command_lines(p, done, NEW)
    assert "--draft-max 8" in before and "--mlock" in before
    assert "--spec-draft-n-max 8" in after and "--load-mode mmap+mlock" in after and "--draft-max" not in after
    assert import_command(after.split(), catalog=NEW).removed == []  # the new build accepts all of it


def test_a_rename_found_through_the_old_help_alone():
    """A flag the old --help lists that the new one lists under a new name with the same words."""
    old_only = OLD_HELP.replace("--spec-ngram-simple-min-hits N", "--ngram-hits N                 ")
    old = parse_help(old_only)
    p = import_command(["-m", "/m.gguf", "--ngram-hits", "3"], catalog=old).profile
    (move,) = plan_migration(p, NEW, old).moves
    assert move.choices == ("--spec-ngram-simple-min-hits",) and not move.ambiguous
    assert "same description" in move.reason


def test_nothing_to_migrate_for_a_profile_of_the_new_build():
    p = import_command(["-m", "/m.gguf", "--spec-draft-n-max", "4", "-c", "4096"], catalog=NEW).profile
    assert not plan_migration(p, NEW, OLD)


def test_a_saved_version_keeps_its_build_and_the_builds_help_text(tmp_path):
    repo = ProfileRepository(open_engine(tmp_path / "db.sqlite"))
    stamp = BuildStamp(key="f:aaaa h:bbbb p:1", file_sha256="a" * 64, help_sha256="b" * 64, package_version="1",
                       path="/opt/old/llama-server", driver="550.54", cuda="12.4")
    saved = repo.save("q", _old_profile(), build=stamp, help_text=OLD_HELP)
    assert repo.latest("q").build == stamp
    assert repo.help_text("b" * 64) == OLD_HELP
    dup = repo.duplicate("q", "q copy")
    assert dup.build == stamp
    later = repo.save("q", _old_profile(ARGV + ["-t", "4"]))  # a version saved without a known build
    assert later.build is None
    assert repo.revert("q", saved.version).build == stamp
    new = stamp.model_copy(update={"file_sha256": "c" * 64, "key": "f:cccc h:dddd p:2", "help_sha256": "d" * 64,
                                   "driver": "580.65", "cuda": "13.0"})
    changes = build_changes(stamp, new)
    assert changes[0].startswith("llama-server build aaaaaaaa (1) -> cccccccc (1)")
    assert "its --help changed" in changes[1] and "GPU driver 550.54 -> 580.65" in changes and "CUDA 12.4 -> 13.0" in changes
    assert build_changes(stamp, stamp) == []


# -- LLAMA_ARG_* variables: llama-server reads a flag from its variable too, so a profile's environment moves ---------


def _env_profile(env: dict[str, str]):
    p = import_command(["-m", "/models/q.gguf", "-md", "/models/d.gguf", "--spec-type", "draft-simple"],
                       catalog=OLD).profile
    return p.model_copy(update={"env": {"HOME": "/home/u", **env}})


def test_a_removed_flags_variable_is_a_move_with_the_same_choice_rule():
    """LLAMA_ARG_DRAFT_MAX makes the new build refuse to start as --draft-max does: the split is a choice,
    keyed by the variable's name, never picked; the variable of a flag with a fixed replacement moves to the
    replacement's variable; a variable the new build still reads (and any other variable) stays."""
    p = _env_profile({"LLAMA_ARG_DRAFT_MAX": "8", "LLAMA_ARG_MLOCK": "1", "LLAMA_ARG_CTX_SIZE": "8192"})
    migration = plan_migration(p, NEW, OLD)
    by_name = {m.old: m for m in migration.moves}
    assert set(by_name) == {"LLAMA_ARG_DRAFT_MAX", "LLAMA_ARG_MLOCK"}
    draft = by_name["LLAMA_ARG_DRAFT_MAX"]
    assert draft.env == "LLAMA_ARG_DRAFT_MAX" and draft.tokens == ("--draft-max", "8")
    assert draft.ambiguous and draft.choices == ("--spec-draft-n-max", "--spec-ngram-mod-n-max")
    assert draft.suggested == "--spec-draft-n-max" and draft.env_replacement() is None
    assert migration.ambiguous == (draft,)
    assert "LLAMA_ARG_DRAFT_MAX=8 (--draft-max 8)  ->  choose:" in draft.text()
    mlock = by_name["LLAMA_ARG_MLOCK"]
    assert mlock.env_replacement() == ({"LLAMA_ARG_LOAD_MODE": "mmap+mlock"}, ())
    assert mlock.text() == "LLAMA_ARG_MLOCK=1 (--mlock)  ->  LLAMA_ARG_LOAD_MODE=mmap+mlock"

    partly, undone = apply_migration(p, migration, NEW)
    assert undone == (draft,)  # left as it is until chosen
    assert partly.env == {"HOME": "/home/u", "LLAMA_ARG_DRAFT_MAX": "8", "LLAMA_ARG_CTX_SIZE": "8192",
                          "LLAMA_ARG_LOAD_MODE": "mmap+mlock"}
    done, undone = apply_migration(p, migration, NEW, {"LLAMA_ARG_DRAFT_MAX": "--spec-draft-n-max"})
    assert undone == ()
    assert done.env == {"HOME": "/home/u", "LLAMA_ARG_CTX_SIZE": "8192", "LLAMA_ARG_LOAD_MODE": "mmap+mlock",
                        "LLAMA_ARG_SPEC_DRAFT_N_MAX": "8"}
    assert done.extra_args == p.extra_args  # the command line is not touched by a variable's move
    before, after = command_lines(p, done, NEW)
    assert before.startswith("LLAMA_ARG_DRAFT_MAX=8 ") and "LLAMA_ARG_SPEC_DRAFT_N_MAX=8" in after
    assert "LLAMA_ARG_DRAFT_MAX" not in after and "HOME" not in after


def test_a_replacement_without_a_variable_goes_on_the_command_line():
    """--spec-ngram-mod-n-max has no LLAMA_ARG_* variable in the new build: the chosen replacement is a flag."""
    p = _env_profile({"LLAMA_ARG_DRAFT_MAX": "8"})
    migration = plan_migration(p, NEW, OLD)
    (move,) = migration.moves
    assert "on the command line" in move.text("--spec-ngram-mod-n-max")
    done, undone = apply_migration(p, migration, NEW, {"LLAMA_ARG_DRAFT_MAX": "--spec-ngram-mod-n-max"})
    assert undone == () and "LLAMA_ARG_DRAFT_MAX" not in done.env
    assert done.ngram_mod_n_max == 8  # lifted into its field, as a flag's move is


def test_variables_without_the_old_help_and_switches_set_off():
    """Without the old build's --help: the new --help still names a removed flag's variable, and the table of
    removed flags knows LLAMA_ARG_MLOCK. A switch's variable set false set nothing: no move; a toggle's false
    value is its negative spelling (--no-mmap -> --load-mode none)."""
    p = _env_profile({"LLAMA_ARG_DRAFT_MIN": "2", "LLAMA_ARG_MLOCK": "0", "LLAMA_ARG_MMAP": "false",
                      "LLAMA_ARG_NOT_A_FLAG": "x"})
    by_name = {m.old: m for m in plan_migration(p, NEW, None).moves}
    assert set(by_name) == {"LLAMA_ARG_DRAFT_MIN", "LLAMA_ARG_MMAP"}
    assert by_name["LLAMA_ARG_DRAFT_MIN"].choices == ("--spec-draft-n-min", "--spec-ngram-mod-n-min")
    assert by_name["LLAMA_ARG_MMAP"].env_replacement() == ({"LLAMA_ARG_LOAD_MODE": "none"}, ())
    with_old = {m.old: m for m in plan_migration(p, NEW, OLD).moves}
    assert with_old["LLAMA_ARG_MMAP"].tokens == ("--no-mmap",)


def test_a_profile_of_the_new_build_with_variables_has_nothing_to_migrate():
    p = _env_profile({"LLAMA_ARG_SPEC_DRAFT_N_MAX": "4", "LLAMA_ARG_LOAD_MODE": "none",
                      "LLAMA_ARG_MODEL": "/models/with space.gguf"})
    assert not plan_migration(p, NEW, OLD) and not plan_migration(p, NEW, None)


def test_a_variables_value_stays_whole():
    """A renamed flag's variable keeps its value as one word (a path with spaces), and its move says so."""
    old_only = OLD_HELP + "\n--old-draft-path FNAME                  a path (env: LLAMA_ARG_OLD_DRAFT_PATH)\n"
    p = _env_profile({}).model_copy(update={"env": {"LLAMA_ARG_OLD_DRAFT_PATH": "/models/my draft.gguf"}})
    (move,) = plan_migration(p, NEW, parse_help(old_only)).moves
    assert move.tokens == ("--old-draft-path", "/models/my draft.gguf") and not move.resolvable
    assert "no replacement found" in move.reason
    done, undone = apply_migration(p, plan_migration(p, NEW, parse_help(old_only)), NEW)
    assert undone == () and done.env == {}  # no replacement: dropped, as a flag with none is


def test_the_cli_takes_a_choice_for_a_variable_by_its_name():
    from llm_tuner.cli.profile_migrate import parse_choices

    assert parse_choices(["LLAMA_ARG_DRAFT_MAX=spec-draft-n-max", "draft-max=spec-ngram-mod-n-max"]) == {
        "LLAMA_ARG_DRAFT_MAX": "--spec-draft-n-max", "--draft-max": "--spec-ngram-mod-n-max"}
