"""PCI addresses of llama.cpp's devices, learned from model loads and kept per binary.

`--list-devices` prints no PCI address, so one card under two backends (a CUDA+Vulkan build lists `CUDA0` and
`Vulkan0`) cannot be told from two cards by it. A model load logs each device's address ("using device CUDA0
(NVIDIA H200) (0000:00:06.0) …", parsed by core.devices.parse_device_line). Every server log the app reads (a
Live launch, a benchmark run, the plan's measure/check) goes through `remember_from_log`; the addresses are
kept in `device_ids.json` in the data folder, keyed by the binary's path, size and mtime (a rebuilt binary
learns again). When a binary lists more GPU devices than there are physical GPUs and nothing is cached,
`inventory_for(..., learn_with=model)` loads a model once (`-ngl 0`, a small context) to read them.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

from llm_tuner.core import flags
from llm_tuner.core.devices import DeviceInventory, LlamaDevice, pci_ids_from_log, with_pci_ids
from llm_tuner.services.paths import data_dir, private_file
from llm_tuner.services.telemetry import amd, nvml

log = logging.getLogger(__name__)

FILE_NAME = "device_ids.json"
_lock = threading.Lock()


def _key(binary: str | Path) -> str | None:
    try:
        real = Path(binary).expanduser().resolve()
        st = real.stat()
    except (OSError, RuntimeError, ValueError):
        return None
    return f"{real}|{st.st_size}|{st.st_mtime_ns}"


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def cached_ids(binary: str | Path) -> dict[str, str]:
    """{llama.cpp device name: PCI address} learned for this binary as it is now ({} when none)."""
    key = _key(binary)
    if key is None:
        return {}
    with _lock:
        entry = _read(data_dir() / FILE_NAME).get(key)
    return {str(k): str(v) for k, v in entry.items()} if isinstance(entry, dict) else {}


def remember(binary: str | Path, ids: dict[str, str]) -> None:
    """Add `ids` to this binary's entry; the file is written only when something is new. Never raises."""
    key = _key(binary)
    if key is None or not ids:
        return
    path = data_dir() / FILE_NAME
    with _lock:
        data = _read(path)
        entry = data.get(key) if isinstance(data.get(key), dict) else {}
        if all(entry.get(k) == v for k, v in ids.items()):
            return
        path_part = key.rsplit("|", 2)[0] + "|"
        data = {k: v for k, v in data.items() if not k.startswith(path_part)}  # an older build of that file
        data[key] = {**entry, **ids}
        try:
            path.write_text(json.dumps(data, indent=1, sort_keys=True))
            private_file(path)
        except OSError as exc:
            log.info("could not keep the devices' PCI addresses in %s: %s", path, exc)


def remember_from_log(binary: str | Path | None, lines) -> dict[str, str]:
    """Read a server log's device lines (a str or lines) and keep what they say for `binary`."""
    ids = pci_ids_from_log(lines)
    if binary is not None and ids:
        remember(binary, ids)
    return ids


def needs_learning(llama: list[LlamaDevice] | tuple[LlamaDevice, ...], n_physical: int) -> bool:
    """More GPU devices listed than physical GPUs (so a card is under two backends) and an address unknown."""
    gpu_devs = [d for d in llama if d.backend not in ("CPU", "RPC")]
    return 0 < n_physical < len(gpu_devs) and any(d.pci_bus_id is None for d in gpu_devs)


def learn(binary: str | Path, model: str | Path, *, timeout: float = 120.0) -> dict[str, str]:
    """Load `model` once with `binary` (no layers on a GPU, a small context) to read the devices' addresses;
    they are kept (see remember_from_log). A short run of llama-server: call it off the GUI thread."""
    from llm_tuner.services.binaries import measure_server_memory  # noqa: PLC0415 - binaries calls back here

    argv = [*flags.argv_for("model", str(model)), *flags.argv_for("gpu_layers", "0"),
            *flags.argv_for("ctx_size", "256"), *flags.argv_for("parallel", "1")]
    run = measure_server_memory(Path(binary), argv, timeout=timeout)
    return pci_ids_from_log(run.log)


def inventory_for(binary: str | Path, *, learn_with: str | Path | None = None,
                  devices: list[LlamaDevice] | None = None) -> DeviceInventory:
    """The device inventory with `binary`'s llama.cpp names and their PCI addresses (cached, or learned once
    with the model `learn_with` when a card is listed under two backends). `devices`: its --list-devices when
    already read. Never raises for a failed learning run: the mapping then falls back to name + memory."""
    from llm_tuner.services import binaries  # noqa: PLC0415
    from llm_tuner.services.telemetry.inventory import detect_inventory  # noqa: PLC0415

    llama = list(devices) if devices is not None else binaries.list_devices(Path(binary))
    llama = with_pci_ids(llama, cached_ids(binary))
    if learn_with is not None and needs_learning(llama, len(nvml.nvidia_gpus()[0]) + len(amd.amd_gpus()[0])):
        try:
            llama = with_pci_ids(llama, learn(binary, learn_with))
        except Exception as exc:  # noqa: BLE001 - a guess by name and memory is the fallback
            log.info("could not learn the devices' PCI addresses with %s: %s", learn_with, exc)
    return detect_inventory(llama)
