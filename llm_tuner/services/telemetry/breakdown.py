"""Live memory breakdown per device: weights, KV and compute (the server's own figures), the rest of
the server process (runtime overhead), other processes, and what is free, against capacity.

The server's figures come from its memory breakdown (`--log-jsonl` or the `-lv 4` table) or its
`-lv 4` buffer lines; the process and device totals from the latest telemetry sample. llama.cpp names
devices CUDA0/ROCm0/...; with CUDA_DEVICE_ORDER=PCI_BUS_ID (set at launch) CUDA<i> is NVML index i.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llm_tuner.services.logparse import BufferSize, MemoryBreakdown

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
    """CUDA0 -> nvidia:0 (or what the inventory says); Host/CPU -> host."""
    if llama_to_app and llama_name in llama_to_app:
        return llama_to_app[llama_name]
    if llama_name in ("Host", "CPU") or llama_name.startswith("CPU"):
        return "host"
    m = _DEV.match(llama_name)
    if m:
        return f"{_VENDOR[m.group(1)]}:{m.group(2)}"
    return None


def server_parts(breakdown: MemoryBreakdown | None, buffers: list[BufferSize] | None = None,
                 llama_to_app: dict[str, str] | None = None) -> dict[str, dict[str, float]]:
    """{app device: {"weights", "kv", "compute"}} MiB. Buffer lines (actual) win over the breakdown."""
    out: dict[str, dict[str, float]] = {}
    if breakdown is not None:
        for r in breakdown.rows:
            dev = app_device_name(r.name, llama_to_app)
            if dev is None:
                continue
            d = out.setdefault(dev, {"weights": 0.0, "kv": 0.0, "compute": 0.0})
            d["weights"] += r.model_mib or 0
            d["kv"] += r.context_mib or 0
            d["compute"] += r.compute_mib or 0
    if buffers:
        from_buffers: dict[str, dict[str, float]] = {}
        for b in buffers:
            dev = app_device_name(b.buffer.split("_")[0], llama_to_app)
            if dev is None:
                continue
            key = {"model": "weights", "kv": "kv", "compute": "compute", "output": "compute"}[b.what]
            d = from_buffers.setdefault(dev, {"weights": 0.0, "kv": 0.0, "compute": 0.0})
            d[key] += b.mib
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
