"""ProfileState without Qt (issue 36): the Profile view's rules as a panel drives them. The fields' texts in,
the profile (or each problem) out; modified or not; the model file's facts read through a `Run` (a stale answer
dropped); the advice and the checks that stop a launch, published to the workspace. Real GGUF files
(tests/support/random_gguf), real paths, the default flag catalog."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from llm_tuner.core.devices import DeviceInventory, HostInfo
from llm_tuner.core.profile import LaunchProfile
from llm_tuner.state.profile import FIRST_STEP, NO_TRAPS, ProfileState
from llm_tuner.state.workspace import Workspace
from tests.support.random_gguf import write_qwen3_dense


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return write_qwen3_dense(tmp_path_factory.mktemp("profile_state") / "dense.gguf", n_ctx_train=4096)


class Later:
    """A `Run` that answers when the test says (as a background job would, later)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Callable[[], Any], Callable[[Any], None]]] = []

    def __call__(self, work, done, _failed) -> None:
        self.calls.append((work, done))

    def answer(self, i: int) -> None:
        work, done = self.calls[i]
        done(work())


def state_with(workspace: Workspace | None = None, **kw) -> ProfileState:
    return ProfileState(workspace or Workspace(), **kw)


def test_the_fields_make_a_profile_or_name_each_problem():
    ws = Workspace()
    state = state_with(ws)
    profile, errors = state.read_fields({"model": "/m.gguf", "ctx_size": 4096}, [], "# note\nexport A=1\nB=2",
                                        "--mlock -tbq 4")
    assert errors == [] and profile is not None
    assert profile.env == {"A": "1", "B": "2"} and profile.extra_args == ("--mlock", "-tbq", "4")
    assert profile.ctx_size == 4096 and state.invalid_fields == () and ws.profile_problem is None
    profile, errors = state.read_fields({"model": "/m.gguf"}, [("context (tokens)", "needs a whole number")],
                                        "NOVALUE", "--alias 'open", [("--mirostat", "needs a number")])
    assert profile is None
    assert [where for where, _p in errors] == ["context (tokens)", "environment", "extra arguments", "--mirostat"]
    assert "close the quote" in errors[2][1]
    assert state.invalid_fields == ("context (tokens)", "environment", "extra arguments", "--mirostat")
    assert ws.profile_problem is not None and ws.profile_problem.startswith(
        "Fix context (tokens), environment, extra arguments, --mirostat in the Profile tab first")
    assert state.copy_refusal() == ("Nothing to copy until context (tokens), environment, extra arguments, "
                                    "--mirostat are fixed (marked in red)")
    _p, errors = state.read_fields({}, [], "A=1\0", "")
    assert errors[0][0] == "environment" and "NUL" in errors[0][1]


def test_modified_is_against_what_the_store_holds():
    state = state_with()
    assert state.title_parts() == ("", "unsaved profile", "")
    saved = LaunchProfile(model="/m.gguf", ctx_size=4096)
    state.show(saved, "gemma")
    state.saved_profile = saved
    assert not state.dirty and state.title_parts() == ("", "gemma", "")
    state.profile = saved.model_copy(update={"ctx_size": 8192})
    assert state.dirty and state.title_parts() == ("", "gemma", " (modified)")


def test_an_untouched_profile_names_the_first_step_and_a_set_one_the_error(tmp_path):
    """A new window: no model is the first step, not a red error; Start still refuses it (the workspace's
    errors). A profile the user set up without a model gets the error."""
    ws = Workspace()
    state = state_with(ws)
    state.recompute()
    rows = state.advice_rows()
    assert rows[0].severity is None and rows[0].text == FIRST_STEP
    assert [a.id for a in ws.profile_errors] == ["no-model"]
    state.show(LaunchProfile(ctx_size=4096), None)
    state.recompute()
    assert state.advice_rows()[0].text.startswith("ERROR: no model")


def test_the_model_files_facts_come_through_run_and_a_stale_answer_is_dropped(tmp_path, model):
    ws = Workspace()
    ws.inventory = DeviceInventory(host=HostInfo(memory_total_mib=65536, memory_available_mib=60000,
                                                 cores_physical=8))
    run = Later()
    state = state_with(ws, run=run)
    heard: list[str] = []
    state.add_callback(lambda what, *_d: heard.append(what))
    missing = tmp_path / "gone.gguf"
    state.show(LaunchProfile(model=str(missing)), None)
    state.recompute()
    assert state.facts.exists is None and "model-file-missing" not in {a.id for a in state.advice}
    state.show(LaunchProfile(model=str(model), ctx_size=8192), None)  # another model before the answer
    state.recompute()
    assert len(run.calls) == 2
    run.answer(0)  # the first file's answer comes late: dropped
    assert state.facts.exists is None and state.facts.key[0] == str(model)
    heard.clear()
    run.answer(1)
    assert state.facts.exists is True and state.facts.info is not None and heard[-2:] == ["advice", "speed"]
    assert state.plan is not None  # the plan of this machine, for the advice and the speed line
    assert "ctx-over-trained" in {a.id for a in state.advice}  # 8192 over the header's 4096
    state.recompute()
    assert len(run.calls) == 2  # the same (model, binary): not read again
    state.show(LaunchProfile(model=str(missing)), None)
    state.recompute()
    run.answer(2)
    assert [a.id for a in ws.profile_errors] == ["model-file-missing"]


def test_publishing_tells_the_workspace_and_an_echo_is_ours():
    ws = Workspace()
    state = state_with(ws)
    state.show(LaunchProfile(model="/m.gguf"), "gemma")
    state.publish()
    assert ws.profile is state.profile and ws.profile_name == "gemma"
    assert state.is_echo(ws.profile) and state.is_echo(None)
    assert not state.is_echo(LaunchProfile(model="/m.gguf"))  # the Plan's change: shown here


def test_removed_flags_are_fixed_and_the_program_is_judged(tmp_path):
    state = state_with()
    state.show(LaunchProfile(model="/m.gguf", extra_args=("--mlock",)), None)
    assert state.can_fix()
    fixed = state.fixed()
    assert fixed.load_mode == "mmap+mlock" and "--mlock" not in fixed.extra_args
    state.show(LaunchProfile(), None)
    state.recompute()
    assert not state.can_fix() and state.program_state() == "none"
    for binary, expected in (("bin/llama-server", "relative"), (str(tmp_path / "nothing"), "missing")):
        state.show(LaunchProfile(binary=binary), None)
        assert state.program_state() == expected


def test_no_advice_says_so():
    state = state_with()
    state.advice = []
    assert [r.text for r in state.advice_rows()] == [NO_TRAPS]


def test_the_all_flags_sections_words_and_search():
    """state.profile_flags: the header counts the flags the section adds, a fork's flag is listed as not in
    --help, and a search keeps a row when every word is in it (a hand-made field's flag only while searching)."""
    from llm_tuner.services.binaries import default_catalog
    from llm_tuner.state.profile_flags import header_text, row_matches, search_words, unlisted_text

    catalog = default_catalog()
    assert header_text(None) == "All flags" and header_text(catalog).startswith("All flags: ")
    assert unlisted_text(("-fa", "on"), catalog) == ""
    text = unlisted_text(("-fa", "on", "-tbq", "4"), catalog)
    assert text.startswith("Not in this llama-server's --help") and text.endswith("-tbq 4")
    words = search_words("  Rope  FREQ ")
    assert words == ["rope", "freq"]
    assert row_matches("--rope-freq-base rope base frequency", words)
    assert not row_matches("--rope-scaling", words)
    assert row_matches("--ctx-size", []) and not row_matches("--ctx-size", [], hand_made=True)
    assert row_matches("--ctx-size context", ["ctx"], hand_made=True)
