"""PCI addresses of llama.cpp's devices, learned from model loads and kept per binary.

`--list-devices` prints no PCI address, so one card under two backends (a CUDA+Vulkan build lists `CUDA0` and
`Vulkan0`) cannot be told from two cards by it. A model load logs each device's address ("using device CUDA0
(NVIDIA H200) (0000:00:06.0) …", parsed by core.devices.parse_device_line). Every server log the app reads (a
Live launch, a benchmark run, the plan's measure/check) goes through `remember_from_log`; the addresses are
kept in `device_ids.json` in the data folder, keyed by the binary's path, size and mtime (a rebuilt binary
learns again). When a binary lists more GPU devices than there are physical GPUs and nothing is cached,
`telemetry.inventory.inventory_for(..., learn_with=model)` loads a model once (`-ngl 0`, a small context) to
read them.

The same logs say which K-V type pairs a CUDA build compiled flash-attention kernels for (the system_info
line's FA_QUANTS, core.devices.fa_quants_from_log): kept per binary in `build_facts.json` beside it, for the
advice (`cached_fa_quants`: None until that binary has started once).

A leaf: it imports no other service but the folders (paths), so every process runner may write to it.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from llm_tuner.core.devices import LlamaDevice, fa_quants_from_log, pci_ids_from_log
from llm_tuner.services.paths import data_dir, private_file

log = logging.getLogger(__name__)

FILE_NAME = "device_ids.json"
BUILD_FILE_NAME = "build_facts.json"
_lock = threading.Lock()


def _key(binary: str | Path) -> str | None:
    try:
        real = Path(binary).expanduser().resolve()
        st = real.stat()
    except (OSError, RuntimeError, ValueError):
        return None
    return f"{real}|{st.st_size}|{st.st_mtime_ns}"


def _read(path: Path) -> dict[str, Any]:
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
        found = data.get(key)
        entry: dict[str, Any] = found if isinstance(found, dict) else {}
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


def remember_from_log(binary: str | Path | None, lines: str | Iterable[str]) -> dict[str, str]:
    """Read a server log's device lines and system_info line (a str or lines) and keep what they say for
    `binary`; returns the PCI addresses."""
    lines = lines.splitlines() if isinstance(lines, str) else list(lines)
    ids = pci_ids_from_log(lines)
    if binary is not None and ids:
        remember(binary, ids)
    quants = fa_quants_from_log(lines)
    if binary is not None and quants is not None:
        remember_fa_quants(binary, quants)
    return ids


def cached_fa_quants(binary: str | Path | None) -> tuple[str, ...] | None:
    """The CUDA flash-attention K-V pairs this binary (as it is now) logged when it last started: () for a
    build without CUDA, None when it has not started since it was built (unknown)."""
    key = _key(binary) if binary is not None else None
    if key is None:
        return None
    with _lock:
        entry = _read(data_dir() / BUILD_FILE_NAME).get(key)
    quants = entry.get("fa_quants") if isinstance(entry, dict) else None
    return tuple(str(q) for q in quants) if isinstance(quants, list) else None


def remember_fa_quants(binary: str | Path, quants: tuple[str, ...]) -> None:
    """Keep a binary's FA_QUANTS (written only when it changed). Never raises."""
    key = _key(binary)
    if key is None:
        return
    path = data_dir() / BUILD_FILE_NAME
    with _lock:
        data = _read(path)
        found = data.get(key)
        entry: dict[str, Any] = found if isinstance(found, dict) else {}
        if entry.get("fa_quants") == list(quants):
            return
        path_part = key.rsplit("|", 2)[0] + "|"
        data = {k: v for k, v in data.items() if not k.startswith(path_part)}  # an older build of that file
        data[key] = {**entry, "fa_quants": list(quants)}
        try:
            path.write_text(json.dumps(data, indent=1, sort_keys=True))
            private_file(path)
        except OSError as exc:
            log.info("could not keep the build's FA_QUANTS in %s: %s", path, exc)


def needs_learning(llama: list[LlamaDevice] | tuple[LlamaDevice, ...], n_physical: int) -> bool:
    """More GPU devices listed than physical GPUs (so a card is under two backends) and an address unknown."""
    gpu_devs = [d for d in llama if d.backend not in ("CPU", "RPC")]
    return 0 < n_physical < len(gpu_devs) and any(d.pci_bus_id is None for d in gpu_devs)

