"""core.buffer_devices: the one mapping from llama.cpp buffer names to devices."""

from __future__ import annotations

from llm_tuner.core.buffer_devices import (
    KnownDevice,
    buffer_device,
    buffer_devices,
    buffer_shares,
    known_devices,
)
from llm_tuner.core.devices import parse_list_devices


def test_local_buffers():
    devices = ["CUDA0", "CUDA1"]
    assert buffer_device("CUDA0", devices) == "CUDA0"
    assert buffer_device("CUDA1", devices) == "CUDA1"
    for host in ("CPU", "CPU_Mapped", "CPU_REPACK", "CUDA_Host", "Vulkan_Host", "Host"):
        assert buffer_device(host, devices) == "Host", host
    # a device the list does not name (the server saw other devices than the app) is still itself
    assert buffer_device("Vulkan0", devices) == "Vulkan0"
    assert buffer_device("MTL0") == "MTL0"


def test_buffers_over_several_gpus():
    devices = ["CUDA0", "CUDA1", "Vulkan0"]
    assert buffer_devices("CUDA_Split", devices) == ("CUDA0", "CUDA1")
    assert buffer_devices("CUDA0_Split", devices) == ("CUDA0", "CUDA1")  # the plan's own spelling
    assert buffer_shares("CUDA_Split", 100.0, devices) == [("CUDA0", 50.0), ("CUDA1", 50.0)]
    # -sm tensor logs one device's slice: each device of the split holds that much
    assert buffer_shares("Meta(CUDA0,CUDA1)", 40.0, devices) == [("CUDA0", 40.0), ("CUDA1", 40.0)]


def test_rpc_buffers_are_named_per_server_and_devices_globally():
    # `llama-server --rpc 127.0.0.1:50052,127.0.0.1:50053 --list-devices` (shared/reference/gpu-recipes.md)
    listed = parse_list_devices("Available devices:\n"
                                "  CUDA0: NVIDIA H200 (143155 MiB, 142629 MiB free)\n"
                                "  RPC0: 127.0.0.1:50052 (143155 MiB, 142105 MiB free)\n"
                                "  RPC1: 127.0.0.1:50053 (128868 MiB, 128000 MiB free)\n")
    assert known_devices(listed) == (KnownDevice("CUDA0"), KnownDevice("RPC0", "127.0.0.1:50052"),
                                     KnownDevice("RPC1", "127.0.0.1:50053"))
    assert buffer_device("RPC0[127.0.0.1:50052]", listed) == "RPC0"
    assert buffer_device("RPC0[127.0.0.1:50053]", listed) == "RPC1"
    assert buffer_device("RPC1", listed) == "RPC1"  # the breakdown table's global name
    assert buffer_device("CUDA0", listed) == "CUDA0"
    # without the endpoints the per-server index is all there is (right for one server)
    assert buffer_device("RPC0[10.0.0.2:50052]", ["CUDA0"]) == "RPC0"
