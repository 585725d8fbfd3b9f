"""LiveFleet without Qt: where a Start goes, port clashes from LaunchPlan.port, trust of a profile's own program,
and what the server's events do to a slot. Real LaunchPlans (services.launch.plan_launch), real session events
(services.server.StateChanged), real settings and trust; nothing is started (planning runs no program)."""

from __future__ import annotations

import shlex

import pytest

from llm_tuner.core.profile import LaunchProfile
from llm_tuner.core.settings import Settings
from llm_tuner.services.binaries import trust_binary
from llm_tuner.services.logparse import Failure
from llm_tuner.services.supervised import ServerState, StateChanged
from llm_tuner.state.live import LiveFleet, StartFacts


@pytest.fixture
def program(tmp_path):
    """An executable standing in for llama-server: a plan names it, nothing here runs it (a run would leave
    its mark)."""
    prog = tmp_path / "llama-server"
    prog.write_text(f"#!/bin/sh\necho ran >> {tmp_path / 'ran.txt'}\n")
    prog.chmod(0o755)
    return prog


@pytest.fixture
def facts(program):
    return StartFacts(settings=Settings(llama_server_path=str(program)))


def _start(fleet: LiveFleet, facts: StartFacts, command: str, **kw):
    fleet.command = command
    return fleet.start(facts, **kw)


def _recorder(fleet: LiveFleet) -> list:
    seen: list = []
    fleet.add_callback(lambda what, *details: seen.append(what))
    return seen


def test_a_port_another_slot_launched_on_is_refused_before_anything_starts(facts, tmp_path):
    fleet = LiveFleet()
    first = _start(fleet, facts, f"-m {tmp_path / 'chat.gguf'} --port 8123")
    assert first is fleet.slots[0] and first.plan.port == 8123 and first.state == "starting"
    assert first.title() == "chat · port 8123 · starting"
    assert fleet.port_conflict(first.plan) is first

    again = _start(fleet, facts, f"-m {tmp_path / 'code.gguf'} --port 8123")
    assert again is None
    assert fleet.selected.message == ("Port 8123 is already used by “chat” in this app: give this profile another "
                                      "--port (or leave it out and a free port is chosen).")
    assert len(fleet.slots) == 1 and first.state == "starting"  # no second entry, the first untouched

    other = _start(fleet, facts, f"-m {tmp_path / 'code.gguf'} --port 8124")
    assert other is fleet.slots[1] and other is not first and fleet.selected is other
    assert fleet.port_conflict(other.plan) is other and other.plan.port == 8124


def test_a_stopped_slot_frees_its_port_and_a_stopping_one_does_not(facts, tmp_path):
    fleet = LiveFleet()
    slot = _start(fleet, facts, f"-m {tmp_path / 'chat.gguf'} --port 8123")
    fleet.stopping()
    assert slot.state == "stopping" and slot.running
    assert _start(fleet, facts, f"-m {tmp_path / 'chat.gguf'} --port 8123") is None  # still holds the port
    fleet.server_state_changed(slot, StateChanged(ServerState.EXITED, code=0, reason="stopped (SIGINT)"))
    assert not slot.running and slot.message == "The server stopped (SIGINT) (exit code 0). 0 requests kept in the history."
    assert _start(fleet, facts, f"-m {tmp_path / 'chat.gguf'} --port 8123") is slot  # the freed slot is reused


def test_attached_servers_clash_by_their_urls_port_on_this_machine_only(facts, tmp_path):
    fleet = LiveFleet()
    remote = fleet.attach("http://gpu-box:8123")
    assert remote.port == 8123 and remote.title() == "attached gpu-box:8123 · port 8123 · starting"
    local = _start(fleet, facts, f"-m {tmp_path / 'chat.gguf'} --port 8123")
    assert local is not None and local is not remote  # another machine's 8123 is not ours
    fleet.attach("http://localhost:9000/")  # the URL's port, trailing slash and all (no suffix matching)
    assert _start(fleet, facts, f"-m {tmp_path / 'chat.gguf'} --port 9000") is None
    assert "Port 9000 is already used by “attached localhost:9000/”" in fleet.selected.message


def test_start_goes_to_the_selected_slot_when_free_else_a_free_one_else_a_new_one(facts, tmp_path):
    fleet = LiveFleet()
    seen = _recorder(fleet)
    a = _start(fleet, facts, f"-m {tmp_path / 'a.gguf'}")
    assert a is fleet.slots[0] and "added" not in seen  # the first slot was free
    b = _start(fleet, facts, f"-m {tmp_path / 'b.gguf'}")
    assert b is fleet.slots[1] and seen.count("added") == 1 and fleet.selected is b  # a runs: a new slot
    fleet.server_state_changed(a, StateChanged(ServerState.EXITED, code=0, reason="stopped"))
    assert fleet.selected is b and b.running
    c = _start(fleet, facts, f"-m {tmp_path / 'c.gguf'}")
    assert c is a and len(fleet.slots) == 2 and c.name == "c"  # the free slot, not a third one
    assert a.plan.port != b.plan.port  # each launch without --port got its own free port
    fleet.select_index(1)
    assert fleet.selected is b and seen[-2:] == ["selected", "titles"]


def test_a_profiles_own_program_runs_only_once_trusted(facts, program, tmp_path):
    fork = tmp_path / "fork" / "llama-server"  # a profile's own build: not the one Settings names
    fork.parent.mkdir()
    fork.write_text(program.read_text())
    fork.chmod(0o755)
    fleet = LiveFleet()
    profile = LaunchProfile(binary=str(fork), model=str(tmp_path / "m.gguf"))
    fleet.use_profile(profile)
    assert fleet.from_editor and fleet.command.startswith("--model ")
    own = StartFacts(settings=facts.settings, profile=profile)
    with pytest.raises(ValueError, match="not been confirmed"):
        fleet.build_plan(own)
    assert fleet.start(own) is None and fleet.selected.state == "idle"
    assert fleet.selected.message.startswith("Not started: ") and fleet.selected.message_error
    trust_binary(fork, facts.settings, save=False)
    assert fleet.build_plan(own).binary == str(fork)
    fleet.command += " -c 512"  # typed over: no longer the profile's command, so not its program either
    assert not fleet.from_editor and fleet.build_plan(own).binary == str(program)  # Settings' llama-server
    assert not (tmp_path / "ran.txt").exists()  # planning ran nothing


def test_the_probed_binary_comes_first_then_settings_and_none_found_is_said(facts, monkeypatch, tmp_path):
    from llm_tuner.services.binaries import SERVER, BinaryInfo, default_catalog

    monkeypatch.delenv("LLM_TUNER_LLAMA_SERVER", raising=False)  # nothing from this machine's install
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr("llm_tuner.services.binaries.embedded_bin_dir", lambda: None)
    fleet = LiveFleet()
    fleet.command = "-m m.gguf"
    with pytest.raises(ValueError, match="No llama-server found: set its path in Settings"):
        fleet.build_plan(StartFacts())
    catalog = default_catalog()
    probed = BinaryInfo(kind=SERVER, path=tmp_path / "probed-server", source="PATH", catalog=catalog)
    with_probe = StartFacts(settings=facts.settings, binaries={SERVER: probed})
    assert fleet.choose_binary(with_probe) == (str(probed.path), catalog)
    assert fleet.build_plan(with_probe).binary == str(probed.path)
    broken = BinaryInfo(kind=SERVER, path=probed.path, error="--help failed")
    assert fleet.choose_binary(StartFacts(settings=facts.settings, binaries={SERVER: broken})) == (
        facts.settings.llama_server_path, None)  # an unusable probe: Settings' path, its --help not read here


def test_advice_errors_refuse_a_start_until_forced(facts):
    fleet = LiveFleet()
    seen = _recorder(fleet)
    assert _start(fleet, facts, "-c 2048") is None  # no model: llama-server would refuse it
    assert fleet.refused_for_advice and "refusal" in seen
    assert fleet.selected.message.startswith("Not started: llama-server would refuse")
    assert fleet.selected.state == "idle" and fleet.selected.plan is None
    slot = _start(fleet, facts, "-c 2048", force=True)
    assert slot is not None and slot.state == "starting" and not fleet.refused_for_advice


def test_a_failed_start_did_not_start_and_puts_its_command_back(facts, tmp_path):
    fleet = LiveFleet()
    model = tmp_path / "gone.gguf"
    slot = _start(fleet, facts, f"-m {model} -c 512")
    fleet.set_command("-m other.gguf")  # the profile edited meanwhile
    failure = Failure("model_missing", f"the model file {model} does not exist", "evidence")
    assert not fleet.server_state_changed(slot, StateChanged(ServerState.EXITED, code=1, failure=failure))
    assert slot.display_state == "did not start" and slot.never_ready and not slot.running
    assert slot.message == f"The server did not start: the model file {model} does not exist" and slot.message_error
    assert shlex.split(fleet.command)[:3] == ["-m", str(model), "-c"]  # the failed session's own command
    fleet.new_server()
    fleet.set_command("-m other.gguf")
    fleet.select(slot)  # shown again: its command comes back with its message
    assert shlex.split(fleet.command)[:2] == ["-m", str(model)]


def test_restart_relaunches_once_the_server_exited(facts, tmp_path):
    fleet = LiveFleet()
    slot = _start(fleet, facts, f"-m {tmp_path / 'chat.gguf'}")
    assert not fleet.server_state_changed(slot, StateChanged(ServerState.READY, url=slot.plan.url))
    assert slot.message.startswith(f"Ready at {slot.plan.url}.")
    fleet.request_finished(slot, object())
    fleet.stopping(restart=True)
    assert slot.restart_pending and slot.state == "stopping"
    assert fleet.server_state_changed(slot, StateChanged(ServerState.EXITED, code=0, reason="stopped"))
    assert slot.state == "starting" and not slot.restart_pending and slot.n_requests == 0 and not slot.records


def test_quitting_asks_about_launched_servers_only(facts, tmp_path):
    fleet = LiveFleet()
    assert fleet.quit_question() is None
    slot = _start(fleet, facts, f"-m {tmp_path / 'chat.gguf'} --port 8123")
    assert fleet.quit_question() == "A server is running (chat, 127.0.0.1:8123).\nStop it and quit?"
    fleet.attach("http://127.0.0.1:9000")
    assert "A server is running (chat," in fleet.quit_question()  # an attached one is only watched
    fleet.stopping()  # the attached one (shown now)
    fleet.select(slot)
    fleet.stopping()
    assert fleet.quit_question() is None  # already stopping: nothing to ask


def test_the_profile_names_the_server_and_its_env_travels_with_it(facts, tmp_path):
    fleet = LiveFleet()
    profile = LaunchProfile(model=str(tmp_path / "qwen.gguf"), env={"LLAMA_ARG_THREADS": "2"})
    fleet.use_profile(profile)
    unsaved = fleet.start(StartFacts(settings=facts.settings, profile=profile))
    assert unsaved.name == "qwen (unsaved)" and unsaved.plan.env_set == {"LLAMA_ARG_THREADS": "2"}
    named = fleet.start(StartFacts(settings=facts.settings, profile=profile, profile_name="chat"))
    assert named.name == "chat" and named is not unsaved
    fleet.set_command(f"-m {tmp_path / 'typed.gguf'}")
    typed = fleet.start(StartFacts(settings=facts.settings, profile=profile, profile_name="chat"))
    assert typed.name == "typed" and typed.plan.env_set == {}  # typed over: neither its name nor its env


def test_a_profile_problem_refuses_its_command_not_a_typed_one(facts, tmp_path):
    fleet = LiveFleet()
    profile = LaunchProfile(model=str(tmp_path / "m.gguf"))
    fleet.use_profile(profile)
    bad = StartFacts(settings=facts.settings, profile=profile, profile_problem="Fix context (tokens) first.")
    assert fleet.start(bad) is None and fleet.selected.message == "Fix context (tokens) first."
    fleet.set_command(f"-m {tmp_path / 'm.gguf'} -c 512")
    assert fleet.start(bad) is not None
