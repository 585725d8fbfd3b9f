"""Issue 12 item 1: a fork's or an older build's flag spellings survive import, save/load and every
rendering for a binary that knows only them (fork --help: tests/data/binary/README.md, ik-llama-server-help.txt)."""

from __future__ import annotations

from llm_tuner.core.cmdline import import_command, parse_help, profile_to_argv, respell, validate
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.services.launch import plan_from_profile, plan_launch
from tests.conftest import DATA

UPSTREAM = parse_help((DATA / "binary" / "llama-server-help.txt").read_text())
FORK = parse_help((DATA / "binary" / "ik-llama-server-help.txt").read_text())
CASE_B = "llama-server -m q.gguf -c 65536 -ngl 99 --cache-type-k-draft q8_0 --cache-type-v-draft q8_0"


def test_the_fork_catalog_knows_only_the_old_spelling():
    assert FORK.lookup("--cache-type-k-draft") is not None and FORK.lookup("-ctkd") is not None
    assert FORK.lookup("--spec-draft-type-k") is None
    assert UPSTREAM.lookup("--spec-draft-type-k") is not None


def test_import_keeps_the_users_spelling_and_the_fork_accepts_the_command():
    profile = import_command(CASE_B, UPSTREAM).profile
    assert profile.draft_cache_type_k == "q8_0" and profile.draft_cache_type_v == "q8_0"  # what the user meant
    argv, _env = profile_to_argv(profile)
    assert argv[argv.index("--cache-type-k-draft") + 1] == "q8_0" and "--spec-draft-type-k" not in argv
    for catalog in (FORK, UPSTREAM):  # both binaries list the user's spelling: it stays
        argv, _env = profile_to_argv(profile, catalog)
        assert "--cache-type-k-draft" in argv and "--cache-type-v-draft" in argv
    assert validate(profile, FORK).unknown == []  # our own check no longer says "unknown flag"


def test_spellings_survive_save_and_load():
    profile = import_command(CASE_B, UPSTREAM).profile
    loaded = LaunchProfile.model_validate_json(profile.to_json())
    assert loaded == profile and loaded.spellings == {"draft_cache_type_k": "--cache-type-k-draft",
                                                       "draft_cache_type_v": "--cache-type-v-draft"}


def test_a_profile_in_upstreams_spelling_is_written_as_the_fork_lists_it():
    profile = LaunchProfile(model="q.gguf", draft_cache_type_k="q8_0", draft_cache_type_v="q8_0")
    argv, _env = profile_to_argv(profile, FORK)
    assert "--spec-draft-type-k" not in argv and FORK.lookup(argv[argv.index("q8_0") - 1]) is not None
    assert validate(profile, FORK).unknown == []
    # argv given as text (a benchmark's extra flags, a launch): respelled for the binary, values untouched
    raw = ["-m", "q.gguf", "--spec-draft-type-k", "q8_0", "-tbq", "4", "--cache-type-v-draft", "q8_0"]
    out = respell(raw, FORK)
    assert out[2] in ("-ctkd", "--cache-type-k-draft") and out[3:] == raw[3:]
    assert respell(raw, UPSTREAM) == raw and respell(raw, None) == raw


def test_launch_uses_the_chosen_binarys_spelling(tmp_path):
    profile = LaunchProfile(model="q.gguf", draft_cache_type_k="q8_0")
    plan = plan_from_profile(tmp_path / "llama-server", profile, catalog=FORK, watch=False, port=8080)
    assert "--spec-draft-type-k" not in plan.user_args and "q8_0" in plan.user_args
    pasted = plan_launch(tmp_path / "llama-server", ["-m", "q.gguf", "--spec-draft-type-k", "f16"], catalog=FORK,
                         watch=False)
    assert "--spec-draft-type-k" not in pasted.user_args
