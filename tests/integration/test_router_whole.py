"""Issue 40 with the real llama-server in router mode: three models loaded together, each instance's measured
memory beside its plan; a presets file written from profiles starts a router whose instances get each profile's
arguments (the router's own log says so) and reads back as the same profiles; every model of a router measured
with one spec in one action."""

from __future__ import annotations

import re

import pytest

from llm_tuner.core.bench_spec import BenchSpec
from llm_tuner.core.cmdline import import_command, profile_to_argv
from llm_tuner.core.router_presets import profile_argv
from llm_tuner.services.launch import plan_launch
from llm_tuner.services.router_presets import presets_for, profiles_in, write_presets
from llm_tuner.services.router_watch import RouterModels, load_model
from llm_tuner.services.server import ServerSession
from llm_tuner.services.supervised import ServerState, StateChanged
from llm_tuner.services.watch import WatchedServer
from tests.integration.test_server_session import Events
from tests.support.router_models import write_three

pytestmark = [pytest.mark.server, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    return write_three(tmp_path_factory.mktemp("three"))


def _start(server_binary, args: str, events: Events) -> WatchedServer:
    argv, env = profile_to_argv(import_command(args).profile)
    plan = plan_launch(server_binary, argv, env)
    watched = WatchedServer(ServerSession(plan, events), telemetry=False)
    watched._user_on_event = events
    watched.start()
    events.wait_for(lambda e: isinstance(e, StateChanged) and e.state == ServerState.READY, timeout=120)
    return watched


def _all_loaded(names):
    return lambda e: (isinstance(e, RouterModels) and all(
        m.loaded and (u := e.usage_of(m.id)) is not None and u.rss_mib for m in e.models if m.id in names)
        and {m.id for m in e.models if m.loaded} >= set(names))


def test_three_models_loaded_together_each_instance_measured_beside_its_plan(three, server_binary):
    events = Events()
    watched = _start(server_binary, f"--models-dir {three} --models-max 3 -c 8192 -np 1 -t 2 --cache-ram 0",
                     events)
    try:
        url = watched.session.url
        for name in ("a", "b", "c"):
            load_model(url, name)
        listed = events.wait_for(_all_loaded(("a", "b", "c")), timeout=120)
    finally:
        watched.stop()
    plan = listed.plan
    assert plan is not None and [m.name for m in plan.models] == ["a", "b", "c"]
    assert plan.models_max is not None and plan.models_max >= 3  # this host holds all three, as it did
    for name in ("a", "b", "c"):
        host = plan.model(name).plan.device("Host")
        predicted = host.total_mib - host.prompt_cache_mib  # allocated + mapped: what its RSS is compared with
        rss = listed.usage_of(name).rss_mib
        assert abs(rss - predicted) <= 0.35 * predicted + 48, (name, rss, predicted)
    # the deeper model's K/V (32k... here 8k tokens over 6 and 12 layers) shows in both the plan and the process
    rss = {n: listed.usage_of(n).rss_mib for n in ("a", "b", "c")}
    assert rss["a"] < rss["b"] < rss["c"]


def _spawned_args(lines: list[str]) -> dict[str, list[str]]:
    """The router's own log: "spawning server instance with name=X on port P", then "... with args:" and one
    line per argument."""
    out: dict[str, list[str]] = {}
    name = None
    collecting = False
    for text in lines:
        if m := re.search(r"spawning server instance with name=(\S+) on port", text):
            name, collecting = m.group(1), False
        elif "spawning server instance with args:" in text and name:
            collecting = True
            out[name] = []
        elif collecting and name:
            m = re.search(r"srv\s+\S+:\s{3}(\S.*)$", text) or re.search(r"^\s{2}(\S.*)$", text)
            if m is None:
                collecting = False
                continue
            out[name].append(m.group(1).strip())
    return out


def test_a_presets_file_written_from_profiles_starts_each_model_with_its_profiles_arguments(
        three, server_binary, tmp_path):
    profiles = {
        "quant-kv": import_command(f"-m {three / 'a.gguf'} -c 1024 -np 1 -ctk q8_0 -ctv q8_0 -fa on").profile,
        "wide-batch": import_command(f"-m {three / 'b.gguf'} -c 2048 -np 1 -ub 256 -fa on").profile,
    }
    two = presets_for(profiles)
    assert two.global_options == {"parallel": "1", "flash-attn": "on"}  # what the two profiles share goes to [*]
    path = write_presets(tmp_path / "models.ini", presets_for(profiles, {"plain": str(three / "c.gguf")}))
    assert "[*]" not in path.read_text()  # "plain" shares nothing with them: [*] would change its arguments

    back = profiles_in(path)  # the round trip: the same arguments as the profiles
    assert sorted(profile_argv(back["quant-kv"])) == sorted(profile_argv(profiles["quant-kv"]))
    assert sorted(profile_argv(back["wide-batch"])) == sorted(profile_argv(profiles["wide-batch"]))

    events = Events()
    watched = _start(server_binary, f"--models-preset {path} --models-max 3 -t 2", events)
    try:
        for name in ("quant-kv", "wide-batch", "plain"):
            load_model(watched.session.url, name)
        events.wait_for(_all_loaded(("quant-kv", "wide-batch", "plain")), timeout=120)
        lines = [e.text for e in list(events.items) if isinstance(getattr(e, "text", None), str)]
    finally:
        watched.stop()
    spawned = _spawned_args(lines)
    assert set(spawned) >= {"quant-kv", "wide-batch", "plain"}, spawned

    def pairs(args: list[str]) -> set[tuple[str, str]]:
        return set(zip(args, args[1:], strict=False))

    assert {("--cache-type-k", "q8_0"), ("--cache-type-v", "q8_0"), ("--ctx-size", "1024"),
            ("--flash-attn", "on")} <= pairs(spawned["quant-kv"])
    assert {("--ubatch-size", "256"), ("--ctx-size", "2048"), ("--flash-attn", "on")} <= pairs(spawned["wide-batch"])
    assert ("--model", str(three / "c.gguf")) in pairs(spawned["plain"])
    assert ("--flash-attn", "on") not in pairs(spawned["plain"])  # no profile of its own: none of theirs


def test_every_model_of_a_router_benchmarked_side_by_side_in_one_action(tiny_model, tmp_path, capsys):
    from llm_tuner.services.bench import BenchRunner
    from llm_tuner.services.bench.runner import target_from_profile
    from llm_tuner.services.router_bench import bench_router_models
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.runs import RunRepository

    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "one.gguf").symlink_to(tiny_model)
    (folder / "two.gguf").symlink_to(tiny_model)
    profile = import_command(f"--models-dir {folder} --models-max 1 -c 512 -np 1 -t 2").profile
    repo = RunRepository(open_engine(tmp_path / "h.sqlite"))
    spec = BenchSpec(prompt_tokens=(16,), gen_tokens=4, reps=1, warmup=0)
    group_id, runs = bench_router_models(BenchRunner(repo), target_from_profile(profile, label="router"), spec)
    assert [(r.spec.model, r.status) for r in runs] == [("one", "complete"), ("two", "complete")], \
        [r.error for r in runs]
    assert [r.sweep_value for r in runs] == ["one", "two"] and {r.group_id for r in runs} == {group_id}
    assert [r.label for r in runs] == ["router · one", "router · two"]
    assert all(rep.predicted_n == 4 for r in runs for rep in repo.get_run(r.id).reps)


def test_router_bench_on_the_command_line_measures_an_attached_routers_models_side_by_side(
        tiny_model, server_binary, tmp_path, capsys):
    import json

    from llm_tuner.cli import main

    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "one.gguf").symlink_to(tiny_model)
    (folder / "two.gguf").symlink_to(tiny_model)
    events = Events()
    watched = _start(server_binary, f"--models-dir {folder} --models-max 2 -c 512 -np 1 -t 2", events)
    try:
        code = main(["router", "bench", "--json", "--url", watched.session.url, "--prompt-tokens", "16",
                     "--gen-tokens", "4", "--reps", "1", "--warmup", "0"])
        out = json.loads(capsys.readouterr().out)
    finally:
        watched.stop()
    assert code == 0 and out["models"] == ["one", "two"]
    assert [r["status"] for r in out["runs"]] == ["complete", "complete"]
