"""Router mode with the real llama-server: a profile without -m and with --models-dir serves two GGUF files (two
links to the tiny model), Live's watcher lists them from the server's own /models, a request names its model, and a
benchmark of one of them is stored with the model's name."""

from __future__ import annotations

import pytest

from llm_tuner.core.advice import is_router
from llm_tuner.core.bench_spec import BenchSpec
from llm_tuner.core.cmdline import import_command, profile_to_argv
from llm_tuner.services.bench import BenchRunner
from llm_tuner.services.bench.runner import target_from_profile
from llm_tuner.services.client import LlamaClient
from llm_tuner.services.launch import plan_launch
from llm_tuner.services.preflight import preflight_errors
from llm_tuner.services.router_watch import RouterModels
from llm_tuner.services.server import ServerSession
from llm_tuner.services.supervised import RequestFinished
from llm_tuner.services.watch import WatchedServer
from llm_tuner.store.db import open_engine
from llm_tuner.store.runs import RunRepository
from tests.integration.test_server_session import Events

pytestmark = [pytest.mark.server, pytest.mark.timeout(600)]


@pytest.fixture
def router_profile(tiny_model, tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "tiny-a.gguf").symlink_to(tiny_model)  # the router follows links
    (folder / "tiny-b.gguf").symlink_to(tiny_model)
    return import_command(f"--models-dir {folder} --models-max 1 -c 512 -np 1 -t 2").profile


def _loaded(name):
    return lambda e: isinstance(e, RouterModels) and any(m.id == name and m.loaded for m in e.models)


def test_router_lists_its_models_requests_name_theirs_and_a_benchmark_keeps_the_name(
        router_profile, server_binary, tiny_model, tmp_path):
    assert is_router(router_profile) and preflight_errors(router_profile) == []
    argv, env = profile_to_argv(router_profile)
    from llm_tuner.services.binaries import SERVER, probe

    plan = plan_launch(server_binary, argv, env, catalog=probe(SERVER, with_devices=False).catalog)
    assert "--log-jsonl" in plan.watch_args  # as the app launches it: the instances' lines come inside JSON
    events = Events()
    watched = WatchedServer(ServerSession(plan, events), telemetry=False)
    watched._user_on_event = events
    watched.start()
    try:
        listed = events.wait_for(lambda e: isinstance(e, RouterModels))
        assert [(m.id, m.status, m.source) for m in listed.models] == [
            ("tiny-a", "unloaded", "models_dir"), ("tiny-b", "unloaded", "models_dir")]
        assert listed.models[0].path.endswith("tiny-a.gguf")
        with LlamaClient(plan.url, model="tiny-b", timeout=300) as client:
            answer = client.completion("The capital of France is", n_predict=4)
        assert answer["timings"]["predicted_n"] == 4
        done = events.wait_for(lambda e: isinstance(e, RequestFinished), timeout=60)
        assert done.record.model == "tiny-b" and done.record.predicted_n == 4
        events.wait_for(_loaded("tiny-b"), timeout=30)  # Live's list follows the load
    finally:
        watched.stop()

    repo = RunRepository(open_engine(tmp_path / "h.sqlite"))
    spec = BenchSpec(prompt_tokens=(32,), gen_tokens=4, reps=1, warmup=1, model="tiny-a")
    run = BenchRunner(repo).run(target_from_profile(router_profile, label="router"), spec).run
    assert run.status == "complete", run.error
    stored = repo.get_run(run.id)
    assert stored.spec.model == "tiny-a" and stored.model_name == "tiny-a"
    # the router's file for that name (a link: its target, as every run records it) with its size and header hash
    assert stored.model_path == str(tiny_model.resolve()) and stored.model_hash
    assert stored.model_size == tiny_model.stat().st_size
    assert [(r.prompt_n, r.predicted_n) for r in stored.reps] == [(32, 4)]

    wrong = BenchRunner(repo).run(target_from_profile(router_profile, label="router"),
                                  spec.model_copy(update={"model": "tiny-z"})).run
    assert wrong.status == "failed" and "no model named 'tiny-z'" in wrong.error and "tiny-a, tiny-b" in wrong.error


def test_a_router_benchmark_counts_its_model_instance(demo_model, server_binary, tmp_path):
    """Issue 35 item 11: a router serves each model from a child process; the benchmark's host memory and the CPU
    that is "ours" count that instance, not the router alone ("Peak memory: Host 19 MiB", and the instance's CPU
    reported as other processes' 99 %)."""
    import psutil

    from llm_tuner.services.bench import OtherCpuMeter

    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "demo.gguf").symlink_to(demo_model)  # 241 MiB of weights, all read while it generates
    profile = import_command(f"--models-dir {folder} --models-max 1 -c 1024 -np 1 -t 2").profile
    repo = RunRepository(open_engine(tmp_path / "h.sqlite"))
    spec = BenchSpec(prompt_tokens=(32,), gen_tokens=8, reps=1, warmup=1, model="demo")
    run = BenchRunner(repo).run(target_from_profile(profile, label="router"), spec).run
    assert run.status == "complete", run.error
    host = [p.vram_used_mib for rep in repo.get_run(run.id).reps for p in rep.peaks if p.device == "Host"]
    assert host and max(host) > 200, host  # the instance's weights, not the router's 19 MiB

    argv, env = profile_to_argv(profile)
    plan = plan_launch(server_binary, argv, env)
    events = Events()
    watched = WatchedServer(ServerSession(plan, events), telemetry=False)
    watched.start()
    try:
        with LlamaClient(plan.url, model="demo", timeout=300) as client:
            assert client.wait_ready(timeout=60, alive=watched.session.alive).ready
            client.completion("Hello", n_predict=2)  # the router spawns the instance
            instance = psutil.Process(watched.session.pid).children(recursive=True)[0]
            before = sum(instance.cpu_times()[:2])
            with OtherCpuMeter(watched.session.pid) as meter:
                client.completion("Once upon a time", n_predict=48)
            spent = sum(instance.cpu_times()[:2]) - before
    finally:
        watched.stop()
    assert spent > 0.05 and meter.ours_cpu_s >= 0.9 * spent, (meter.ours_cpu_s, spent)
