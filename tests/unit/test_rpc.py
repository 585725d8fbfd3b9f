"""llama.cpp RPC devices from recorded real output (tests/data/rpc, see its README): the device list with
endpoints, the buffer -> device mapping with two workers, llama.cpp's default device order, the plan against
llama.cpp's buffers, errors in plain words, and Live's per-RPC-device memory stacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_tuner.core import flags
from llm_tuner.core.devices import parse_list_devices
from llm_tuner.core.memory_check import measured_parts
from llm_tuner.core.memory_log import parse_memory_log
from llm_tuner.core.rpc import (
    bind_warning,
    default_device_order,
    device_endpoint,
    parse_endpoint,
    rpc_error,
    split_endpoints,
)
from llm_tuner.services.logparse import DeviceListed, LogParser

DATA = Path(__file__).resolve().parents[1] / "data" / "rpc"


def _logged_devices(text: str):
    parser = LogParser()
    return [ev.device for line in text.splitlines() for ev in parser.feed(line) if isinstance(ev, DeviceListed)]


def test_list_devices_with_two_workers_gives_rpc_devices_with_endpoints():
    devs = parse_list_devices((DATA / "rpc-list-devices.txt").read_text())
    assert [d.name for d in devs] == ["CUDA0", "Vulkan0", "RPC0", "RPC1"]
    assert [device_endpoint(d) for d in devs] == [None, None, "127.0.0.1:50052", "127.0.0.1:50053"]
    assert (devs[3].memory_total_mib, devs[3].memory_free_mib) == (128868, 128868)
    # without -dev llama.cpp puts RPC devices first (src/llama.cpp), so -ts 1,2,3,4 follows this order
    assert [d.name for d in default_device_order(devs)] == ["RPC0", "RPC1", "CUDA0", "Vulkan0"]


@pytest.mark.parametrize("log, expected", [
    ("rpc-rpc0-rpc1-ts1-1.log", {("RPC0", "model"): 333.22, ("RPC1", "model"): 336.08,
                                 ("RPC0", "kv"): 104.0, ("RPC1", "kv"): 88.0,
                                 ("RPC0", "compute"): 113.05, ("RPC1", "compute"): 77.04}),
    ("cpu-two-workers-rpc0-rpc1-ts1-1.log", {("RPC0", "model"): 35.82, ("RPC1", "model"): 199.34,
                                             ("RPC0", "kv"): 11.0, ("RPC1", "kv"): 10.0,
                                             ("RPC0", "compute"): 44.84, ("RPC1", "compute"): 33.57}),
])
def test_buffer_lines_of_two_workers_map_to_rpc0_and_rpc1_by_endpoint(log, expected):
    """Both workers' buffers are named RPC0[host:port] (index inside their server): the endpoint decides."""
    text = (DATA / log).read_text()
    devices = _logged_devices(text)
    assert [d.name for d in devices if d.name.startswith("RPC")] == ["RPC0", "RPC1"]
    parts = measured_parts(parse_memory_log(text), devices)
    for key, mib in expected.items():
        assert parts[key] == pytest.approx(mib, abs=0.01), key
    # the breakdown table at exit (global names) agrees with the buffer lines per device
    rows = {r.name: r for r in parse_memory_log(text).breakdown}  # the last table wins
    for dev in ("RPC0", "RPC1"):
        assert rows[dev].model_mib == pytest.approx(parts[(dev, "model")], abs=1)


def test_mixed_local_and_rpc_device():
    text = (DATA / "rpc-cuda0-rpc0-ts40-60.log").read_text()
    parts = measured_parts(parse_memory_log(text), _logged_devices(text))
    assert parts[("CUDA0", "model")] == pytest.approx(257.51) and parts[("RPC0", "model")] == pytest.approx(411.79)


def test_live_shows_each_rpc_device_by_name_and_endpoint_from_buffer_lines():
    from llm_tuner.services.telemetry.breakdown import live_segments

    text = (DATA / "cpu-two-workers-rpc0-rpc1-ts1-1.log").read_text()
    log = parse_memory_log(text)
    segs = live_segments({"host": {"ram_used_mib": 1000.0, "ram_total_mib": 24105.0}}, breakdown=None,
                         buffers=log.buffers, devices=_logged_devices(text))
    by = {s.device: s for s in segs}
    rpc = [n for n in by if n.startswith("RPC")]
    assert len(rpc) == 2 and rpc[0].startswith("RPC0 (127.0.0.1:") and rpc[1].startswith("RPC1 (127.0.0.1:")
    assert by[rpc[1]].weights_mib == pytest.approx(199.34) and by[rpc[1]].kv_mib == pytest.approx(10.0)
    assert by[rpc[1]].capacity_mib == 24105 and by[rpc[1]].free_mib == pytest.approx(24105 - 199.34 - 10 - 33.57)


def test_endpoints_and_the_insecure_bind_warning():
    assert parse_endpoint("192.168.1.20:50052") == ("192.168.1.20", 50052)
    assert split_endpoints("a:1, b:2") == ["a:1", "b:2"]
    with pytest.raises(ValueError, match="host:port"):
        parse_endpoint("192.168.1.20")
    assert bind_warning("127.0.0.1", 50052) is None and bind_warning("localhost", 1) is None
    assert "Never expose the RPC server to an open network" in bind_warning("0.0.0.0", 50052)


def test_rpc_errors_in_plain_words():
    """llama.cpp's own messages (ggml-rpc.cpp, common/arg.cpp) -> what happened and what to do."""
    kind, msg = rpc_error(".../ggml-rpc.cpp:547: Failed to connect to 127.0.0.1:1\n")
    assert kind == "connection refused" and "127.0.0.1:1" in msg
    kind, msg = rpc_error("RPC server version mismatch: 2.0.0\n")
    assert kind == "version mismatch" and "same llama.cpp build" in msg
    kind, msg = rpc_error('error while handling argument "--rpc": RPC not supported in this build\n')
    assert kind == "no RPC" and "built without RPC" in msg
    assert rpc_error("all good") is None


def test_rpc_is_a_profile_flag_written_before_the_device_list():
    """llama-server registers RPC devices while parsing, so -dev RPC0 must come after --rpc."""
    from llm_tuner.core.cmdline import profile_to_argv
    from llm_tuner.core.profile import LaunchProfile

    argv, _env = profile_to_argv(LaunchProfile(model="m.gguf", rpc=("a:1", "b:2"), devices=("RPC0", "RPC1")))
    argv = list(argv)
    assert flags.value_of(argv, "rpc") == "a:1,b:2"
    assert argv.index(flags.spelling("rpc")) < argv.index(flags.spelling("devices"))
    assert flags.to_llama_bench(argv)[0][-4:-2] == [flags.spelling("rpc"), "a:1,b:2"]


def test_advice_for_rpc_names_the_network_the_micro_batch_and_the_worker_cache():
    from llm_tuner.core.advice import advise
    from llm_tuner.core.profile import LaunchProfile

    ids = {a.id for a in advise(LaunchProfile(model="m.gguf", rpc=("10.0.0.2:50052",), ubatch_size=256))}
    assert {"rpc-network", "rpc-ubatch", "rpc-worker-cache"} <= ids
    assert not any(i.startswith("rpc-") for i in {a.id for a in advise(LaunchProfile(model="m.gguf"))})
    # LLAMA_ARG_RPC in the profile's environment counts like the flag
    env_only = LaunchProfile(model="m.gguf", env={flags.flag("rpc").env: "10.0.0.2:50052"})
    assert "rpc-network" in {a.id for a in advise(env_only)}


def test_partial_offload_keeps_host_layers_compute_on_the_host(demo_model):
    """ggml-rpc has no offload_op: host layers' big-batch ops stay on the CPU (a CUDA GPU would take them over),
    so the host compute buffer holds them (recorded: -ngl 10 -dev RPC0,RPC1, see the README)."""
    from llm_tuner.core.memory import PlanDevice, parse_server_args, plan_memory
    from llm_tuner.core.memory_check import compare
    from llm_tuner.services.library import read_model

    text = (DATA / "cpu-two-workers-ngl10.log").read_text()
    devices = _logged_devices(text)
    argv = ["-m", str(demo_model), "-fit", "off", "-t", "2", "-c", "4096", "-np", "1", "-ngl", "10",
            "-dev", "RPC0,RPC1"]
    gpus = [PlanDevice(d.name, d.backend, d.memory_total_mib, d.memory_free_mib, d.description,
                       free_includes_runtime=True) for d in devices]
    plan = plan_memory(read_model(demo_model), parse_server_args(argv), gpus, PlanDevice("Host", "CPU", None))
    rows = {(r.device, r.kind): r for r in compare(parse_memory_log(text), plan, devices)}
    assert rows[("Host", "compute")].estimate_mib == pytest.approx(rows[("Host", "compute")].measured_mib, rel=0.15)
    for dev in ("RPC0", "RPC1"):
        assert rows[(dev, "model")].estimate_mib == pytest.approx(rows[(dev, "model")].measured_mib, abs=0.1)
        ours = sum(r.estimate_mib for (d, _k), r in rows.items() if d == dev)
        real = sum(r.measured_mib for (d, _k), r in rows.items() if d == dev)
        assert real <= ours <= real * 1.10  # the remaining error errs on the safe side (compute +4 MiB)


def test_a_build_without_rpc_is_said_in_plain_words():
    """ik_llama.cpp's recorded --help has no --rpc (built without the RPC backend); the tested build's has."""
    from llm_tuner.core.cmdline import parse_help
    from llm_tuner.core.rpc import rpc_support_error

    binary = DATA.parent / "binary"
    assert "built without RPC" in rpc_support_error(parse_help((binary / "ik-llama-server-help.txt").read_text()))
    assert rpc_support_error(parse_help((binary / "llama-server-help.txt").read_text())) is None
