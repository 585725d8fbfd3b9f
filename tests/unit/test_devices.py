"""Device inventory: llama.cpp names mapped to physical GPUs; no GPU gives reasons, not tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from llm_tuner.core.devices import GpuInfo, LlamaDevice, backend_of, map_llama_devices
from llm_tuner.services.telemetry.inventory import detect_inventory


def _gpu(i, bus, model="NVIDIA GeForce RTX 4090", mib=24564, vendor="nvidia"):
    return GpuInfo(name=f"{vendor}:{i}", vendor=vendor, index=i, pci_bus_id=bus, model=model, memory_total_mib=mib)


def test_backend_names():
    assert [backend_of(n) for n in ("CUDA0", "Vulkan2", "ROCm1", "MTL0", "SYCL0")] == [
        "CUDA", "Vulkan", "ROCm", "Metal", "SYCL"]


def test_identical_cards_follow_pci_bus_order_and_one_card_has_two_names():
    gpus = [_gpu(1, "00000000:02:00.0"), _gpu(0, "00000000:01:00.0")]
    llama = [LlamaDevice(name="CUDA0", description="NVIDIA GeForce RTX 4090", memory_total_mib=24564, memory_free_mib=1),
             LlamaDevice(name="CUDA1", description="NVIDIA GeForce RTX 4090", memory_total_mib=24564, memory_free_mib=1),
             LlamaDevice(name="Vulkan0", description="NVIDIA GeForce RTX 4090", memory_total_mib=24564,
                         memory_free_mib=1)]
    mapped = {g.pci_bus_id: g for g in map_llama_devices(gpus, llama)}
    assert mapped["00000000:01:00.0"].llama_names == ("CUDA0", "Vulkan0")
    assert mapped["00000000:02:00.0"].llama_names == ("CUDA1",)
    assert mapped["00000000:01:00.0"].name == "CUDA0"


def test_mixed_vendors_vulkan_matched_by_model_and_memory():
    gpus = [_gpu(0, "0000:01:00.0", "NVIDIA GeForce RTX 4090 Laptop GPU", 16376),
            _gpu(0, "0000:05:00.0", "AMD Radeon RX 7900 XTX", 24560, vendor="amd")]
    llama = [LlamaDevice(name="CUDA0", description="NVIDIA GeForce RTX 4090 Laptop GPU", memory_total_mib=16376,
                         memory_free_mib=1),
             LlamaDevice(name="Vulkan2", description="AMD Radeon RX 7900 XTX (RADV NAVI31)", memory_total_mib=24560,
                         memory_free_mib=1)]
    names = {g.vendor: g.llama_names for g in map_llama_devices(gpus, llama)}
    assert names == {"nvidia": ("CUDA0",), "amd": ("Vulkan2",)}


def test_no_gpu_here_gives_empty_list_and_reasons():
    inv = detect_inventory([])
    assert inv.devices == ()
    assert any(n.startswith("NVIDIA:") for n in inv.notes)
    assert inv.host.cores_logical >= 1 and inv.host.memory_total_mib > 0


def test_cli_devices_json_shape():
    out = subprocess.run([sys.executable, "-m", "llm_tuner", "devices", "--json"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data["host"]) == {"cpu_model", "cores_physical", "cores_logical", "memory_total_mib",
                                 "memory_available_mib"}
    assert data["devices"] == [] and data["notes"]


@pytest.mark.server
def test_cli_binaries_json_shape():
    out = subprocess.run([sys.executable, "-m", "llm_tuner", "binaries", "--json"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data) == {"llama_server", "llama_bench", "llama_fit_params", "ggml_rpc_server"}
    assert data["ggml_rpc_server"]["path"].endswith("ggml-rpc-server")  # the embedded build has the RPC worker
    assert {"path", "version", "backends", "n_flags"} <= set(data["llama_server"])
    assert data["llama_server"]["n_flags"] > 200
