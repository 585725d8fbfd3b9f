"""The device inventory: host + NVIDIA + AMD GPUs, named as llama.cpp names them."""

from __future__ import annotations

from llm_tuner.core.devices import DeviceInventory, GpuInfo, LlamaDevice, map_llama_devices
from llm_tuner.services.telemetry.amd import amd_gpus
from llm_tuner.services.telemetry.host import host_info
from llm_tuner.services.telemetry.nvml import nvidia_gpus


def detect_inventory(llama_devices: list[LlamaDevice] | None = None) -> DeviceInventory:
    """Detect every device. `llama_devices` (from a binary's --list-devices) gives llama.cpp names.

    Never raises for missing drivers: each vendor that cannot be read adds a note saying why.
    """
    notes: list[str] = []
    gpus: list[GpuInfo] = []
    for finder in (nvidia_gpus, amd_gpus):
        found, reason = finder()
        gpus.extend(found)
        if reason:
            notes.append(reason)
    if llama_devices:
        gpus = map_llama_devices(gpus, llama_devices)
        known = {n for g in gpus for n in g.llama_names}
        for dev in llama_devices:
            if dev.name not in known:  # e.g. a Vulkan iGPU no vendor library sees, or GGML_CUDA_DEVICES=2
                gpus.append(GpuInfo(name=dev.name, backend=dev.backend, vendor="unknown", model=dev.description,
                                    memory_total_mib=dev.memory_total_mib, memory_free_mib=dev.memory_free_mib,
                                    llama_names=(dev.name,)))
    elif gpus:
        notes.append("llama.cpp device names unknown: no llama-server binary was found to list its devices")
    return DeviceInventory(host=host_info(), devices=tuple(gpus), llama_devices=tuple(llama_devices or ()),
                           notes=tuple(notes))
