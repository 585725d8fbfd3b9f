"""The device inventory: host + NVIDIA + AMD GPUs, named as llama.cpp names them.

Telemetry samples, benchmark peaks and the memory plan use one name per GPU: llama.cpp's (`CUDA0`)
when a binary's `--list-devices` maps it to the card, else the vendor library's (`nvidia:0`).
`sample_labels(inventory)` gives that mapping; `gpu_labels()` finds it for a sampler: from the app's
latest detection when there is one, else by listing the devices of a llama-server binary.
`inventory_for(binary)` is the inventory with a binary's PCI addresses (services.device_ids keeps them; a card
under two backends is learned here once, with a model load).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from llm_tuner.core import flags
from llm_tuner.core.devices import (
    DeviceInventory,
    GpuInfo,
    LlamaDevice,
    map_llama_devices,
    pci_ids_from_log,
    with_pci_ids,
)
from llm_tuner.services import binaries, device_ids
from llm_tuner.services.telemetry.amd import amd_gpus
from llm_tuner.services.telemetry.host import host_info
from llm_tuner.services.telemetry.nvml import nvidia_gpus

log = logging.getLogger(__name__)

_latest_lock = threading.Lock()
_latest: DeviceInventory | None = None
_labels_by_binary: dict[str, dict[str, str]] = {}


def detect_inventory(llama_devices: list[LlamaDevice] | None = None) -> DeviceInventory:
    """Detect every device. `llama_devices` (from a binary's --list-devices) gives llama.cpp names.

    Never raises for missing drivers: each vendor that cannot be read adds a note saying why. The
    result is also kept as the latest inventory (`latest_inventory`), which names telemetry samples.
    """
    global _latest
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
            if dev.name in known or dev.backend == "RPC":  # RPC devices are another machine's
                continue
            # e.g. a Vulkan iGPU no vendor library sees, or GGML_CUDA_DEVICES=2; two of them with one PCI
            # address (no NVML here, a card under two backends) stay one GPU
            same = next((i for i, g in enumerate(gpus) if g.vendor == "unknown" and dev.pci_bus_id
                         and g.pci_bus_id == dev.pci_bus_id), None)
            if same is not None:
                gpus[same] = gpus[same].model_copy(update={"llama_names": (*gpus[same].llama_names, dev.name)})
                continue
            gpus.append(GpuInfo(name=dev.name, backend=dev.backend, vendor="unknown", model=dev.description,
                                memory_total_mib=dev.memory_total_mib, memory_free_mib=dev.memory_free_mib,
                                pci_bus_id=dev.pci_bus_id, llama_names=(dev.name,)))
    elif gpus:
        notes.append("llama.cpp device names unknown: no llama-server binary was found to list its devices")
    inv = DeviceInventory(host=host_info(), devices=tuple(gpus), llama_devices=tuple(llama_devices or ()),
                          notes=tuple(notes))
    if llama_devices is not None:  # only a detection that asked a binary knows llama.cpp's names
        with _latest_lock:
            _latest = inv
    return inv


def latest_inventory() -> DeviceInventory | None:
    """The last inventory detected with a binary's device list in this process (the app probes at start)."""
    with _latest_lock:
        return _latest


def sample_labels(inventory: DeviceInventory | None) -> dict[str, str]:
    """{"nvidia:0": "CUDA0", ...}: vendor-library names -> llama.cpp names, for GPUs the inventory maps."""
    out: dict[str, str] = {}
    if inventory is None:
        return out
    for g in inventory.devices:
        if g.llama_names and g.index is not None and g.vendor in ("nvidia", "amd"):
            out[f"{g.vendor}:{g.index}"] = g.name
    return out


def gpu_labels(binary: str | Path | None = None) -> dict[str, str]:
    """Names for GPU samples: the latest inventory's mapping, else from `binary`'s (or the configured
    llama-server's) `--list-devices`, cached per binary. {} when no GPU or no binary is known.

    Runs a short process the first time for a binary, so call it off the GUI thread (samplers do).
    """
    inv = latest_inventory()
    if inv is not None:
        return sample_labels(inv)
    if binary is None:
        loc = binaries.locate(binaries.SERVER)
        if loc is None:
            return {}
        binary = loc.path
    key = str(binary)
    with _latest_lock:
        cached = _labels_by_binary.get(key)
    if cached is not None:
        return dict(cached)
    gpus = nvidia_gpus()[0] + amd_gpus()[0]
    labels: dict[str, str] = {}
    if gpus:
        try:
            devices = with_pci_ids(binaries.list_devices(Path(binary)), device_ids.cached_ids(binary))
        except Exception:  # noqa: BLE001 - an unusable binary: keep the vendor names
            devices = []
        labels = sample_labels(DeviceInventory(devices=tuple(map_llama_devices(gpus, devices))))
    with _latest_lock:
        _labels_by_binary[key] = labels
    return dict(labels)


def learn(binary: str | Path, model: str | Path, *, timeout: float = 120.0) -> dict[str, str]:
    """Load `model` once with `binary` (no layers on a GPU, a small context) to read the devices' addresses;
    they are kept (see remember_from_log). A short run of llama-server: call it off the GUI thread."""
    argv = [*flags.argv_for("model", str(model)), *flags.argv_for("gpu_layers", "0"),
            *flags.argv_for("ctx_size", "256"), *flags.argv_for("parallel", "1")]
    run = binaries.measure_server_memory(Path(binary), argv, timeout=timeout)
    return pci_ids_from_log(run.log)


def inventory_for(binary: str | Path, *, learn_with: str | Path | None = None,
                  devices: list[LlamaDevice] | None = None) -> DeviceInventory:
    """The device inventory with `binary`'s llama.cpp names and their PCI addresses (cached, or learned once
    with the model `learn_with` when a card is listed under two backends). `devices`: its --list-devices when
    already read. Never raises for a failed learning run: the mapping then falls back to name + memory."""
    llama = list(devices) if devices is not None else binaries.list_devices(Path(binary))
    llama = with_pci_ids(llama, device_ids.cached_ids(binary))
    if learn_with is not None and device_ids.needs_learning(llama, len(nvidia_gpus()[0]) + len(amd_gpus()[0])):
        try:
            llama = with_pci_ids(llama, learn(binary, learn_with))
        except Exception as exc:  # noqa: BLE001 - a guess by name and memory is the fallback
            log.info("could not learn the devices' PCI addresses with %s: %s", learn_with, exc)
    return detect_inventory(llama)
