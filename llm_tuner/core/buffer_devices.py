"""The one mapping from llama.cpp's buffer names to the devices that hold them.

llama.cpp names a buffer by its buffer type: a device's own memory (`CUDA0`, `ROCm1`, `Vulkan0`, `MTL0`,
`SYCL0`), pinned or mapped host memory (`CPU`, `CPU_Mapped`, `CPU_REPACK`, `CUDA_Host`, `Vulkan_Host`),
memory spread over several GPUs (`CUDA_Split` for `-sm row`, `Meta(CUDA0,CUDA1)` for `-sm tensor`) or a
remote device. An RPC buffer is named inside its server: `RPC<i>[host:port]`, `i` counting that server's
devices, while the device list numbers RPC devices globally (`RPC0`, `RPC1`, ... after the local ones):
with two servers the buffers `RPC0[a:1]` and `RPC0[b:2]` belong to the devices RPC0 and RPC1. The
breakdown table and `--log-jsonl` use the global names. So the mapping takes the device list, with the
RPC endpoints `--list-devices` prints as their description (`RPC0: 127.0.0.1:50052 (... MiB, ...)`).

The Live memory bars, the Plan check, the CLI and the benchmarks all ask this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

HOST = "Host"
_DEVICE_RE = re.compile(r"^([A-Za-z]+)(\d+)$")
_RPC_RE = re.compile(r"^RPC(\d+)\[(.+)\]$")
_ENDPOINT_RE = re.compile(r"^\S+:\d+$")


@dataclass(frozen=True)
class KnownDevice:
    """A llama.cpp device: its name (`CUDA0`, `RPC1`) and, for an RPC device, its server's `host:port`."""

    name: str
    endpoint: str | None = None


def known_devices(devices: Iterable[Any]) -> tuple[KnownDevice, ...]:
    """KnownDevices from names or from objects with `.name` (and `.description`: an RPC device's endpoint),
    such as core.devices.LlamaDevice or core.memory.PlanDevice."""
    out = []
    for d in devices:
        if isinstance(d, KnownDevice):
            out.append(d)
            continue
        name = d if isinstance(d, str) else str(d.name)
        endpoint = None
        desc = (getattr(d, "description", None) or "").strip()
        if name.startswith("RPC") and _ENDPOINT_RE.match(desc):
            endpoint = desc
        out.append(KnownDevice(name, endpoint))
    return tuple(out)


def is_row_split(buffer: str) -> bool:
    """`-sm row` splits matrices by rows over the GPUs in one `<backend>_Split` buffer."""
    return buffer.endswith("_Split")


def buffer_devices(buffer: str, devices: Iterable[object] = ()) -> tuple[str, ...]:
    """The devices that hold a buffer, by the names in `devices` (see known_devices), `Host` for host memory.

    One device for most buffers; several for a buffer split over GPUs (`Meta(CUDA0,CUDA1)`: the listed
    ones; `CUDA_Split`: every listed device of that backend). A device name not in the list still maps
    to itself (a server started with other devices than the app detected). An RPC buffer whose endpoint
    is not in the list maps to `RPC<i>` (right when there is one RPC server).
    """
    known = known_devices(devices)
    names = {d.name for d in known}
    buffer = buffer.strip()
    if buffer.startswith("Meta(") and buffer.endswith(")"):
        listed = tuple(x.strip() for x in buffer[5:-1].split(",") if x.strip())
        if listed:
            return listed
        gpus = tuple(d.name for d in known if not d.name.startswith("CPU"))
        return gpus or (HOST,)
    if (m := _RPC_RE.match(buffer)) is not None:
        endpoint = m.group(2)
        for d in known:
            if d.endpoint == endpoint:
                return (d.name,)
        return (f"RPC{m.group(1)}",)
    if is_row_split(buffer):
        backend = buffer[: -len("_Split")].rstrip("0123456789")  # CUDA_Split (as logged) or CUDA0_Split
        on = tuple(d.name for d in known if _backend_prefix(d.name) == backend)
        return on or (buffer,)
    if buffer in names:
        return (buffer,)
    if buffer == HOST or buffer.startswith("CPU") or buffer.endswith("_Host") or buffer.endswith("_Mapped"):
        return (HOST,)
    m = _DEVICE_RE.match(buffer)
    if m and m.group(1) != "CPU":
        return (buffer,)
    base = buffer.split("_")[0]  # a device's own extra buffer type (e.g. an accelerator's repack)
    if base in names:
        return (base,)
    return (HOST,)


def buffer_device(buffer: str, devices: Iterable[object] = ()) -> str:
    """The one device a buffer is counted on (the first of buffer_devices)."""
    return buffer_devices(buffer, devices)[0]


def buffer_shares(buffer: str, mib: float, devices: Iterable[object] = ()) -> list[tuple[str, float]]:
    """[(device, MiB)] a logged buffer size puts on each device.

    `-sm row` (`CUDA_Split`): the size is the whole buffer, spread over the GPUs (counted evenly here).
    `-sm tensor` (`Meta(CUDA0,CUDA1)`): the logged size is one device's slice (the largest:
    ggml-backend-meta.cpp takes the max over the devices), so each device holds that much.
    """
    devs = buffer_devices(buffer, devices)
    share = mib / len(devs) if is_row_split(buffer) else mib
    return [(d, share) for d in devs]


def _backend_prefix(name: str) -> str | None:
    m = _DEVICE_RE.match(name)
    return m.group(1) if m else None
