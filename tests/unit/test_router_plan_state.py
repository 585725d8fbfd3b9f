"""RouterPlanState without Qt (the Plan tab's router box, issue 36): a router profile's models planned together
on two planned GPUs, hidden for a plain profile, a stale answer dropped, the presets file written from saved
profiles and read back into a real SQLite store. Real GGUF files (tests/support/router_models)."""

from __future__ import annotations

import pytest

from llm_tuner.core.cmdline import import_command
from llm_tuner.core.devices import DeviceInventory, HostInfo
from llm_tuner.services.router_presets import read_presets
from llm_tuner.state.callbacks import declared, run_now
from llm_tuner.state.plan import PlanState
from llm_tuner.state.router_plan import RouterPlanState, RouterTable
from llm_tuner.store.db import open_engine
from llm_tuner.store.profiles import ProfileRepository
from tests.support.held_run import Held
from tests.support.router_models import write_three

HOST = DeviceInventory(host=HostInfo(memory_total_mib=65536, memory_available_mib=60000))
ROUTER = "--models-dir {folder} -c 32768 -ngl 99 --cache-ram 0"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_three(tmp_path_factory.mktemp("router-state"), ("a", "b"))


@pytest.fixture
def repo(tmp_path):
    engine = open_engine(tmp_path / "profiles.sqlite")
    yield ProfileRepository(engine)
    engine.dispose()


def _states(run=run_now, profiles=None) -> tuple[PlanState, RouterPlanState]:
    plan = PlanState(inventory=lambda: HOST)
    plan.add_planned_device("CUDA0", "CUDA", 24576)
    plan.add_planned_device("CUDA1", "CUDA", 24576)
    return plan, RouterPlanState(plan, profiles=profiles, run=run)


def test_a_routers_models_are_planned_together_and_a_plain_profile_hides_the_box(folder):
    plan, state = _states()
    events: list[str] = []
    state.add_callback(lambda what, *d: events.append(what))
    assert set(declared(RouterPlanState)) == {"shown", "table", "lines", "summary"}
    plan.use_profile(import_command("-m /nowhere.gguf -c 512").profile)
    assert not state.shown and state.table == RouterTable() and not state.can_write
    plan.use_profile(import_command(ROUTER.format(folder=folder)).profile)
    assert state.shown and state.can_write and set(state.named) == {"a", "b"}
    assert state.table.headers == ("Model", "CUDA0 (MiB)", "CUDA1 (MiB)", "Host (MiB)")
    assert [r[0] for r in state.table.rows] == ["a", "b", "available", "margin"]
    assert float(state.table.rows[0][1]) < float(state.table.rows[1][1])  # b's deeper K/V
    assert state.table.rows[2][1] == state.table.rows[2][2] and 0 < float(state.table.rows[2][1]) <= 24576
    assert "Sets that fit together: {a, b}" in state.lines and "--models-max 2" in state.lines
    assert state.summary.startswith("2 model(s), each planned with its own arguments")
    assert events.count("table") == 1 and events.count("shown") == 1
    plan.use_profile(import_command("-m /nowhere.gguf -c 512").profile)
    assert not state.shown


def test_the_same_profile_and_devices_ask_nothing_and_an_older_answer_is_dropped(folder, tmp_path):
    run = Held()
    plan, state = _states(run)
    profile = import_command(ROUTER.format(folder=folder)).profile
    plan.use_profile(profile)
    assert len(run.asked) == 1 and state.jobs.doing == "Planning the router's models"
    state.refresh()  # a control of the single-model plan moved: the router's models are as they were
    assert len(run.asked) == 1
    plan.add_planned_device("CUDA2", "CUDA", 8192)  # the devices changed: asked again
    assert len(run.asked) == 2
    run.answer(1)
    assert state.table.headers[1:4] == ("CUDA0 (MiB)", "CUDA1 (MiB)", "CUDA2 (MiB)")
    run.answer(0)  # the older answer arrives late: dropped
    assert "CUDA2 (MiB)" in state.table.headers

    plan.use_profile(import_command(f"--models-dir {tmp_path / 'nowhere'} -c 512").profile)
    run.answer(2)
    assert state.summary.startswith("The router's models could not be read:")
    assert state.table == RouterTable() and state.lines == ""


def test_the_presets_file_takes_saved_profiles_and_reads_back_as_profiles(folder, tmp_path, repo):
    plan, state = _states(profiles=repo)
    plan.use_profile(import_command(ROUTER.format(folder=folder)).profile)
    repo.save("a", import_command(f"-m {folder / 'a.gguf'} -c 4096 -ctk q8_0 -ctv q8_0 -fa on").profile)
    out = tmp_path / "models.ini"
    state.write_presets(str(out))
    assert state.jobs.doing == f"Writing the presets file {out}"
    written = read_presets(out)
    assert written.models["a"]["cache-type-k"] == "q8_0"  # its saved profile's K/V settings
    assert "n-gpu-layers" in written.models["b"] and "cache-type-k" not in written.models["b"]  # the solver's
    assert state.summary == f"Presets written to {out} (from the saved profiles a)."

    state.open_presets(str(out))
    assert set(state.opened) == {"a", "b"} and state.summary == f"{out}: 2 model(s) saved as profiles: a, b."
    assert repo.latest("b").profile.model == str(folder / "b.gguf")
    assert repo.latest("a").version == 1  # read back, "a" equals its saved profile: no second version

    state.write_presets(str(tmp_path / "no-such-dir" / "models.ini"))
    assert "was not written:" in state.summary
    state.open_presets(str(tmp_path / "missing.ini"))
    assert "could not be read:" in state.summary


def test_without_a_store_a_presets_file_is_only_read(folder, tmp_path):
    plan, state = _states()
    plan.use_profile(import_command(ROUTER.format(folder=folder)).profile)
    out = tmp_path / "models.ini"
    state.write_presets(str(out))
    assert state.summary == f"Presets written to {out}."
    state.open_presets(str(out))
    assert set(state.opened) == {"a", "b"} and "2 model(s) read: a, b." in state.summary
