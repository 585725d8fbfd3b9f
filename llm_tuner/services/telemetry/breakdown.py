"""Live memory breakdown per device: weights, KV and compute (the server's own figures), the rest of
the server process (runtime overhead), other processes, and what is free, against capacity.

The server's figures come from its memory breakdown (`--log-jsonl` or the `-lv 4` table) or its
`-lv 4` buffer lines; the process and device totals from the latest telemetry sample. llama.cpp names
devices CUDA0/ROCm0/...; with CUDA_DEVICE_ORDER=PCI_BUS_ID (set at launch) CUDA<i> is NVML index i.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from llm_tuner.core.buffer_devices import buffer_shares, known_devices
from llm_tuner.core.devices import DeviceInventory, LlamaDevice
from llm_tuner.core.memory_log import BufferLine, MemoryBreakdown, merge_buffers
from llm_tuner.core.rpc import device_endpoint, is_rpc_device

_DEV = re.compile(r"^(CUDA|ROCm|Vulkan|MUSA|SYCL)(\d+)")
_VENDOR = {"CUDA": "nvidia", "ROCm": "amd", "MUSA": "moore", "SYCL": "intel", "Vulkan": "vulkan"}


@dataclass(frozen=True)
class MemorySegments:
    """MiB, stacked in this order; None where unknown."""

    device: str
    weights_mib: float | None
    kv_mib: float | None
    compute_mib: float | None
    rest_of_process_mib: float | None
    other_processes_mib: float | None
    free_mib: float | None
    capacity_mib: float | None

    def stacked(self) -> list[tuple[str, float]]:
        parts = [("weights", self.weights_mib), ("KV cache", self.kv_mib), ("compute", self.compute_mib),
                 ("rest of server", self.rest_of_process_mib), ("other processes", self.other_processes_mib),
                 ("free", self.free_mib)]
        return [(k, float(v)) for k, v in parts if v is not None]


def app_device_name(llama_name: str, llama_to_app: dict[str, str] | None = None) -> str | None:
    """A llama.cpp device (CUDA0) -> the app's device (nvidia:0, or what the inventory says); Host -> host.

    Buffer names go through core.buffer_devices first (CUDA_Host, CPU_REPACK -> Host).
    """
    if llama_to_app and llama_name in llama_to_app:
        return llama_to_app[llama_name]
    if llama_name in ("Host", "CPU") or llama_name.startswith("CPU"):
        return "host"
    if re.fullmatch(r"RPC\d+", llama_name):
        return llama_name  # another machine's device: it keeps llama.cpp's name (rpc_segments)
    m = _DEV.match(llama_name)
    if m:
        return f"{_VENDOR[m.group(1)]}:{m.group(2)}"
    return None


_PART = {"model": "weights", "kv": "kv", "rs": "kv", "compute": "compute", "output": "compute"}


def server_parts(breakdown: MemoryBreakdown | None, buffers: Iterable[BufferLine] | None = None,
                 llama_to_app: dict[str, str] | None = None,
                 devices: Iterable[object] = ()) -> dict[str, dict[str, float]]:
    """{app device: {"weights", "kv", "compute"}} MiB. Buffer lines (actual) win over the breakdown.

    "kv" holds the KV cache and the recurrent state (RS buffers of mamba-style and hybrid models), as the
    breakdown's "context" column does; "compute" holds the output buffer. `devices`: llama.cpp's device
    list (names, RPC endpoints) for core.buffer_devices.
    """
    known = known_devices(devices)
    out: dict[str, dict[str, float]] = {}

    def add(into: dict[str, dict[str, float]], name: str, key: str, mib: float) -> None:
        for llama_dev, share in buffer_shares(name, mib, known):
            dev = app_device_name(llama_dev, llama_to_app)
            if dev is None:
                continue
            d = into.setdefault(dev, {"weights": 0.0, "kv": 0.0, "compute": 0.0})
            d[key] += share

    if breakdown is not None:
        for r in breakdown.rows:
            add(out, r.name, "weights", r.model_mib or 0)
            add(out, r.name, "kv", r.context_mib or 0)
            add(out, r.name, "compute", r.compute_mib or 0)
    if buffers:
        from_buffers: dict[str, dict[str, float]] = {}
        for b in merge_buffers(list(buffers)):
            add(from_buffers, b.buffer, _PART[b.kind], b.mib)
        out.update(from_buffers)
    return out


def gpu_segments(device: str, parts: dict[str, float] | None, *, used_mib: float | None, total_mib: float | None,
                 process_mib: float | None, reserved_mib: float | None = None) -> MemorySegments:
    """Stack one GPU: the server's parts, its overhead (process - parts), others (used - process), free."""
    w = parts.get("weights") if parts else None
    kv = parts.get("kv") if parts else None
    c = parts.get("compute") if parts else None
    known = sum(x for x in (w, kv, c) if x is not None)
    rest = max(0.0, process_mib - known) if process_mib is not None else None
    others = max(0.0, used_mib - process_mib) if used_mib is not None and process_mib is not None else None
    if others is None and used_mib is not None:
        others = max(0.0, used_mib - known)  # process memory unknown: everything not the server's own
    free = None
    if total_mib is not None and used_mib is not None:
        free = max(0.0, total_mib - used_mib - (reserved_mib or 0.0))
    return MemorySegments(device, w, kv, c, rest, others, free, total_mib)


def llama_to_app_names(inventory: DeviceInventory | None) -> dict[str, str]:
    """{llama.cpp device name: app device name} from a core.devices.DeviceInventory (None: empty)."""
    out: dict[str, str] = {}
    if inventory is not None:
        for g in inventory.devices:
            for n in g.llama_names:
                out[n] = g.name
    return out


def live_segments(latest: Mapping[str, Mapping[str, float] | None], *, breakdown: MemoryBreakdown | None,
                  buffers: Iterable[BufferLine] | None, inventory: DeviceInventory | None = None,
                  devices: Iterable[LlamaDevice] = ()
                  ) -> list[MemorySegments]:
    """The Live memory bars: one stack per GPU (or host RAM when there is no GPU), then one per RPC device.

    `latest`: the newest telemetry values per ring (device -> {"vram_used_mib", ...}; the "server" ring is
    skipped); `breakdown`/`buffers`: what the server logged; `inventory`: the detected devices
    (core.devices.DeviceInventory: llama.cpp names of each GPU); `devices`: the device list the server
    itself logged (core.devices.LlamaDevice, with RPC endpoints), which wins over the inventory's.
    """
    logged = list(devices)
    names = {d.name for d in logged}
    llama_devices = [*logged, *(d for d in (inventory.llama_devices if inventory is not None else ())
                                if d.name not in names)]
    # one stack per physical GPU: its llama.cpp devices' parts are summed (llama_to_app_names gives CUDA0 and
    # Vulkan0 of one card the same app name), and it is labelled with all its names
    labels = {g.name: g.label for g in inventory.devices} if inventory is not None else {}
    parts = server_parts(breakdown, buffers, llama_to_app_names(inventory), llama_devices)
    gpus_present = any(d not in ("host", "server") for d in latest)
    segments = []
    for dev in sorted(latest):
        v = latest[dev]
        if dev == "server" or v is None:
            continue

        def val(key: str, v: Mapping[str, float] = v) -> float | None:
            x = v.get(key)
            return None if x is None or x != x else x

        if dev == "host":
            if gpus_present:
                continue  # GPUs present: the bars show GPUs
            segments.append(gpu_segments("host RAM", parts.get("host"), used_mib=val("ram_used_mib"),
                                         total_mib=val("ram_total_mib"), process_mib=val("server_rss_mib")))
        else:
            segments.append(gpu_segments(labels.get(dev, dev), parts.get(dev), used_mib=val("vram_used_mib"),
                                         total_mib=val("vram_total_mib"), process_mib=val("process_vram_mib"),
                                         reserved_mib=val("vram_reserved_mib")))
    return segments + rpc_segments(parts, llama_devices)


def rpc_segments(parts: Mapping[str, Mapping[str, float]],
                 devices: Iterable[LlamaDevice]) -> list[MemorySegments]:
    """One stack per RPC device the server put something on, named `RPC0 (host:port)`: its weights, KV and
    compute from llama.cpp's buffers, what was in use before the load (total - free at start) as "others",
    and the rest free. A worker's own telemetry comes from its agent (services.agent), not from here."""
    listed = {d.name: d for d in devices}
    out = []
    for name in sorted(n for n in parts if is_rpc_device(n)):
        p = parts[name]
        d = listed.get(name)
        ep = device_endpoint(d) if d is not None else None
        total = d.memory_total_mib if d is not None else None
        free0 = d.memory_free_mib if d is not None else None
        ours = sum(p.values())
        others = max(0.0, total - free0) if total is not None and free0 is not None else None
        free = max(0.0, free0 - ours) if free0 is not None else None
        out.append(MemorySegments(f"{name} ({ep})" if ep else name, p.get("weights"), p.get("kv"), p.get("compute"),
                                  None, others, free, total))
    return out
