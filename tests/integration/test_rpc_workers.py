"""Two real ggml-rpc-server workers (CPU, cache in a temporary folder, free loopback ports) and a real
llama-server spread over them: the inventory, the plan per RPC device against llama.cpp's buffers (the demo
model), a request recorded in a watched session with Live's per-RPC-device memory (the tiny model), and a
clean stop of everything started (no child process left)."""

from __future__ import annotations

import json
import time

import httpx
import psutil
import pytest

from llm_tuner.core import flags
from llm_tuner.core.memory import PlanDevice, parse_server_args, plan_memory
from llm_tuner.core.memory_check import compare
from llm_tuner.core.memory_log import parse_memory_log
from llm_tuner.services.binaries import measure_server_memory
from llm_tuner.services.launch import plan_launch
from llm_tuner.services.library import read_model
from llm_tuner.services.rpc import WorkerError, WorkerPool, WorkerSpec, reachable, worker_devices
from llm_tuner.services.server import ServerSession
from llm_tuner.services.supervised import RequestFinished, ServerState
from llm_tuner.services.watch import WatchedServer

pytestmark = pytest.mark.server


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE}


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    before = _children()
    cache = tmp_path_factory.mktemp("rpc-cache")
    pool = WorkerPool()
    try:
        started = [pool.start(WorkerSpec(devices=("CPU",), threads=1, cache_dir=str(cache / n))) for n in "ab"]
        yield pool, started
    finally:
        pool.stop_all()
    for w in started:
        assert not w.alive() and reachable(w.endpoint, 0.3) is not None
    assert _children() - before == set(), "a worker outlived its stop"


def _args(model, endpoints, split="1,1"):
    return ["-m", str(model), "-fit", "off", "-t", "2", "-c", "2048", "-np", "1",
            *flags.argv_for("rpc", ",".join(endpoints)), *flags.argv_for("devices", "RPC0,RPC1"),
            *flags.argv_for("tensor_split", split)]


# The tiny model's 2 blocks and its output layer over RPC0 and RPC1: -ts 1,2 gives each device one block (with its
# K/V); 1,1 gives RPC0 both blocks and RPC1 the output layer alone (no K/V).
TINY_SPLIT = "1,2"


def block_mib(model) -> float:
    """The weights of the model's first block, MiB: the least an RPC device holding a block must show."""
    from llm_tuner.core.gguf_info import parse_header

    with open(model, "rb") as fh:
        return sum(t.n_bytes for t in parse_header(fh).tensors if t.name.startswith("blk.0.")) / 2**20


def test_inventory_and_plan_per_rpc_device_within_3_percent(workers, server_binary, demo_model):
    _pool, started = workers
    endpoints = [w.endpoint for w in started]
    devices = worker_devices(endpoints)
    assert [(d.name, d.description) for d in devices] == [("RPC0", endpoints[0]), ("RPC1", endpoints[1])]
    assert all(d.memory_total_mib > 1000 for d in devices)

    argv = _args(demo_model, endpoints)
    run = measure_server_memory(server_binary, argv, timeout=120)
    assert run.loaded, run.log[-2000:]
    gpus = [PlanDevice(d.name, d.backend, d.memory_total_mib, d.memory_free_mib, d.description,
                       free_includes_runtime=True) for d in devices]
    plan = plan_memory(read_model(demo_model), parse_server_args(argv), gpus, PlanDevice("Host", "CPU", None))
    rows = [r for r in compare(parse_memory_log(run.log), plan, devices) if r.device.startswith("RPC")]
    assert {r.device for r in rows} == {"RPC0", "RPC1"}
    for dev in ("RPC0", "RPC1"):
        ours = sum(r.estimate_mib for r in rows if r.device == dev)
        real = sum(r.measured_mib for r in rows if r.device == dev)
        assert ours == pytest.approx(real, rel=0.03), (dev, [(r.kind, r.diff_text()) for r in rows])


def test_unreachable_worker_is_said_in_plain_words(workers):
    pool, _started = workers
    dead = WorkerSpec(devices=("CPU",))
    w = pool.start(dead)
    endpoint = w.endpoint
    pool.stop(endpoint)
    with pytest.raises(WorkerError, match="connection refused"):
        worker_devices([endpoint])


def test_launch_over_two_workers_records_a_request_and_shows_rpc_memory(workers, server_binary, tiny_model):
    from llm_tuner.services.telemetry.breakdown import live_segments

    _pool, started = workers
    before = _children()
    plan = plan_launch(server_binary, _args(tiny_model, [w.endpoint for w in started], TINY_SPLIT))
    assert flags.value_of(plan.watch_args, "verbosity") == "4"  # RPC memory is known from -lv 4 buffer lines
    events: list = []
    watched = WatchedServer(ServerSession(plan, events.append), gpu_readers={}, telemetry=False,
                            on_event=events.append)
    watched.start()
    try:
        deadline = time.monotonic() + 90
        while watched.session.state != ServerState.READY and time.monotonic() < deadline:
            assert watched.session.state != ServerState.EXITED, "\n".join(list(watched.session.lines)[-20:])
            time.sleep(0.1)
        r = httpx.post(plan.url + "/completion", json={"prompt": "Hello", "n_predict": 6}, timeout=60)
        assert r.status_code == 200
        deadline = time.monotonic() + 10
        while not any(isinstance(e, RequestFinished) for e in events) and time.monotonic() < deadline:
            time.sleep(0.05)
        rec = next(e.record for e in events if isinstance(e, RequestFinished))
        assert rec.predicted_n == r.json()["timings"]["predicted_n"]
        with pytest.raises(WorkerError, match="busy"):  # one client at a time: this llama-server holds them
            worker_devices([started[0].endpoint], timeout_s=2)
        segs = live_segments({}, breakdown=None, buffers=watched.session.memory.buffers,
                              devices=watched.session.memory.devices)
        names = [s.device for s in segs]
        assert names == [f"RPC0 ({started[0].endpoint})", f"RPC1 ({started[1].endpoint})"]
        block = block_mib(tiny_model)  # 0.6 MiB
        assert all(s.weights_mib >= 0.99 * block and s.kv_mib > 0 and s.compute_mib > 0 for s in segs), segs
    finally:
        watched.stop()
    assert watched.session.exit_reason == "stopped (SIGINT)"
    assert _children() - before == set()
    assert all(w.alive() for w in started), [(w.process.poll(), list(w.process.lines)[-4:]) for w in started]  # serve the next


def test_a_worker_dies_with_the_app_even_on_kill_9():
    """A child Python process (the "app") starts a worker through WorkerPool and is killed with SIGKILL: the
    worker's parent-death signal (it is started like llama-server) must take it along."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import time
        from llm_tuner.services.rpc import WorkerPool, WorkerSpec
        w = WorkerPool().start(WorkerSpec(devices=("CPU",)))
        print(w.pid, w.endpoint, flush=True)
        time.sleep(600)
    """)
    app = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    pid_s, endpoint = app.stdout.readline().split()
    worker_pid = int(pid_s)
    assert psutil.Process(worker_pid).name() == "ggml-rpc-server" and reachable(endpoint) is None
    app.kill()
    app.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if psutil.Process(worker_pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.1)
    gone = not psutil.pid_exists(worker_pid) or psutil.Process(worker_pid).status() == psutil.STATUS_ZOMBIE
    assert gone, "ggml-rpc-server outlived the app"


def test_a_benchmark_records_the_rpc_devices_and_plans_them(workers, demo_model, tmp_path):
    from llm_tuner.core.bench_report import report_markdown
    from llm_tuner.core.bench_spec import BenchSpec
    from llm_tuner.services.bench import BenchRunner, ServerTarget
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.runs import RunRepository

    _pool, started = workers
    repo = RunRepository(open_engine(tmp_path / "h.sqlite"))
    argv = [a for a in _args(demo_model, [w.endpoint for w in started]) if a not in ("-fit", "off")]
    run = BenchRunner(repo).run(ServerTarget(argv=argv, label="two workers"),
                                BenchSpec(prompt_tokens=(32,), gen_tokens=4, reps=1, warmup=0)).run
    assert run.status == "complete", run.error
    stored = repo.get_run(run.id)
    rpc = [(d["name"], d["endpoint"]) for d in stored.devices if d.get("endpoint")]
    assert rpc == [("RPC0", started[0].endpoint), ("RPC1", started[1].endpoint)]
    assert stored.memory_predicted_mib["RPC0"] > 10 and stored.memory_predicted_mib["RPC1"] > 10
    assert f"RPC1 (RPC worker {started[1].endpoint})" in report_markdown(stored)


def test_the_cli_lists_workers_and_their_devices(workers, capsys):
    from llm_tuner.cli import main

    _pool, started = workers
    a, b = (w.endpoint for w in started)
    assert main(["workers", "add", a, "--agent", "http://127.0.0.1:50100"]) == 0
    assert main(["workers", "add", "127.0.0.1:1"]) == 0
    capsys.readouterr()
    assert main(["workers", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["endpoint"], r["error"] is None) for r in rows] == [(a, True), ("127.0.0.1:1", False)]
    assert rows[0]["agent_url"] == "http://127.0.0.1:50100" and "agent_token" not in rows[0]
    assert main(["workers", "remove", "127.0.0.1:1"]) == 0
    capsys.readouterr()
    assert main(["workers", "devices", "--json"]) == 0
    assert [(d["name"], d["endpoint"]) for d in json.loads(capsys.readouterr().out)] == [("RPC0", a)]
    assert main(["devices", "--json", "--rpc", f"{a},{b}"]) == 0
    listed = json.loads(capsys.readouterr().out)["llama_devices"]
    rpc = [(d["name"], d["endpoint"]) for d in listed if d["endpoint"]]
    assert rpc == [("RPC0", a), ("RPC1", b)] and all(d["memory_total_mib"] > 0 for d in listed)
    assert main(["devices", "--rpc", "127.0.0.1:1"]) == 2
    assert "connection refused" in capsys.readouterr().err
    assert main(["workers", "add", "no-port"]) == 2


def test_estimate_plans_the_workers_memory_and_checks_each_rpc_device(workers, demo_model, capsys):
    """`estimate --check` with --rpc: the workers' devices carry the memory they report (the fit can be judged),
    and llama.cpp's buffers of two servers (both named RPC0[host:port]) are compared as RPC0 and RPC1."""
    from llm_tuner.cli import main

    _pool, started = workers
    assert main(["estimate", "--json", "--check", "--", *_args(demo_model, [w.endpoint for w in started])]) == 0
    out = json.loads(capsys.readouterr().out)
    planned = {d["name"]: d for d in out["devices"]}
    assert planned["RPC0"]["capacity_mib"] > 1000 and planned["RPC0"]["fits"] is True
    assert planned["RPC1"]["overhead_mib"] == 0  # the worker's runtime is already out of the free memory it reports
    checked = {d["name"]: d for d in out["llama_cpp"]["devices"]}
    assert set(checked) == {"Host", "RPC0", "RPC1"}
    for name in ("RPC0", "RPC1"):
        assert abs(checked[name]["diff_mib"]["model_mib"]) < 1 and abs(checked[name]["diff_mib"]["kv_mib"]) < 1


def test_workers_devices_lists_the_live_worker_and_names_the_dead_one(workers, capsys):
    """One worker down (a closed port) does not hide the other's devices: it is named with why (exit 1)."""
    from llm_tuner.cli import main
    from llm_tuner.services.launch import free_port

    _pool, started = workers
    live, dead = started[0].endpoint, f"127.0.0.1:{free_port()}"
    capsys.readouterr()
    assert main(["workers", "devices", "--json", live, dead]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert [(r.get("name"), r["endpoint"]) for r in rows] == [("RPC0", live), (None, dead)]
    assert rows[0]["memory_total_mib"] > 0 and "connection refused" in rows[1]["error"]
    assert main(["workers", "devices", dead, live]) == 1
    text = capsys.readouterr().out
    assert f"RPC0: {live}" in text and f"{dead}: no devices: connection refused" in text
    assert main(["workers", "devices", dead]) == 2  # none answers: an error
    assert "connection refused" in capsys.readouterr().err
