"""Device inventory as pure data: host, physical GPUs, and llama.cpp's device names for them."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

_BACKEND_PREFIXES = {
    "CUDA": "CUDA",
    "ROCm": "ROCm",
    "HIP": "ROCm",
    "MUSA": "MUSA",
    "Vulkan": "Vulkan",
    "SYCL": "SYCL",
    "MTL": "Metal",
    "Metal": "Metal",
    "CPU": "CPU",
    "RPC": "RPC",
}
_NAME_RE = re.compile(r"^([A-Za-z]+?)(\d+)$")


def backend_of(device_name: str) -> str:
    """llama.cpp device name -> backend ('CUDA0' -> 'CUDA', 'Vulkan2' -> 'Vulkan', 'MTL0' -> 'Metal')."""
    m = _NAME_RE.match(device_name)
    prefix = m.group(1) if m else device_name
    return _BACKEND_PREFIXES.get(prefix, prefix)


def index_of(device_name: str) -> int | None:
    m = _NAME_RE.match(device_name)
    return int(m.group(2)) if m else None


class LlamaDevice(BaseModel):
    """One line of `llama-server --list-devices`: `  CUDA0: NVIDIA H200 (143771 MiB, 142000 MiB free)`."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    memory_total_mib: int
    memory_free_mib: int

    @property
    def backend(self) -> str:
        return backend_of(self.name)


_LIST_LINE = re.compile(r"^\s+([A-Za-z]+\d+):\s+(.*?)\s+\((\d+) MiB, (\d+) MiB free\)\s*$")


def parse_list_devices(text: str) -> list[LlamaDevice]:
    """Parse `--list-devices` output; other lines (ggml init logs, '(none)') are ignored."""
    devices = []
    for line in text.splitlines():
        m = _LIST_LINE.match(line)
        if m:
            devices.append(
                LlamaDevice(name=m.group(1), description=m.group(2),
                            memory_total_mib=int(m.group(3)), memory_free_mib=int(m.group(4)))
            )
    return devices


_INFO_LINE = re.compile(r"^\s*- ([A-Za-z]+\d+)\s*: (.*?)\s+\((\d+) MiB, (\d+) MiB free\)\s*$")


def parse_device_info_line(text: str) -> LlamaDevice | None:
    """One device of llama-server's own device list in its log (`common_param: device_info`, printed at
    `-lv 4`): `  - RPC0    : 127.0.0.1:50052 (143155 MiB, 141988 MiB free)`; None for any other line."""
    m = _INFO_LINE.match(text.split("common_param:", 1)[-1])
    if m is None:
        return None
    return LlamaDevice(name=m.group(1), description=m.group(2), memory_total_mib=int(m.group(3)),
                       memory_free_mib=int(m.group(4)))


class HostInfo(BaseModel):
    model_config = ConfigDict(frozen=True)

    cpu_model: str | None = None
    cores_physical: int | None = None
    cores_logical: int | None = None
    memory_total_mib: int | None = None
    memory_available_mib: int | None = None
    cpu_flags: tuple[str, ...] = ()


class GpuInfo(BaseModel):
    """One physical GPU. `name` is llama.cpp's device name when a binary says (`CUDA0`), else `nvidia:0`."""

    model_config = ConfigDict(frozen=True)

    name: str
    backend: str | None = None
    vendor: str
    model: str | None = None
    pci_bus_id: str | None = None
    uuid: str | None = None
    memory_total_mib: int | None = None
    memory_free_mib: int | None = None
    driver: str | None = None
    index: int | None = None  # the vendor library's index (NVML index, AMD device id)
    llama_names: tuple[str, ...] = ()  # every llama.cpp name this card appears under (CUDA0, Vulkan0)
    hypothetical: bool = False  # planned hardware the user added, not detected

    def public_dict(self) -> dict:
        return {
            "name": self.name, "backend": self.backend, "vendor": self.vendor, "model": self.model,
            "pci_bus_id": self.pci_bus_id, "uuid": self.uuid,
            "memory_total_mib": self.memory_total_mib, "memory_free_mib": self.memory_free_mib,
        }


class DeviceInventory(BaseModel):
    model_config = ConfigDict(frozen=True)

    host: HostInfo = Field(default_factory=HostInfo)
    devices: tuple[GpuInfo, ...] = ()
    llama_devices: tuple[LlamaDevice, ...] = ()
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {
            "host": self.host.model_dump(exclude={"cpu_flags"}),
            "devices": [d.public_dict() for d in self.devices],
            "notes": list(self.notes),
        }


def _norm_model(text: str) -> str:
    text = text.lower()
    for junk in ("nvidia", "geforce", "tesla", "amd", "radeon", "instinct", "(tm)", "(r)"):
        text = text.replace(junk, " ")
    return " ".join(text.split())


def map_llama_devices(gpus: list[GpuInfo], llama: list[LlamaDevice]) -> list[GpuInfo]:
    """Give each physical GPU the llama.cpp names it appears under.

    CUDA/ROCm indices follow PCI bus order when the server runs with CUDA_DEVICE_ORDER=PCI_BUS_ID
    (the app sets it), which is also NVML's order; so the i-th CUDA device is the i-th NVIDIA GPU by bus
    id. Vulkan devices are matched by model name and memory size, in order, each card taken once per
    backend. One card can carry several names (CUDA0 and Vulkan0) and stays one physical GPU.
    """
    by_vendor_bus = sorted(gpus, key=lambda g: (g.vendor, g.pci_bus_id or "", g.index or 0))
    names: dict[int, list[str]] = {id(g): [] for g in gpus}
    per_backend_taken: dict[str, set[int]] = {}
    for dev in llama:
        backend = dev.backend
        idx = index_of(dev.name)
        taken = per_backend_taken.setdefault(backend, set())
        match: GpuInfo | None = None
        if backend in ("CUDA", "MUSA") or backend == "ROCm":
            vendor = "nvidia" if backend in ("CUDA", "MUSA") else "amd"
            same = [g for g in by_vendor_bus if g.vendor == vendor]
            if idx is not None and idx < len(same):
                match = same[idx]
        if match is None:
            want = _norm_model(dev.description)
            for g in by_vendor_bus:
                if id(g) in taken:
                    continue
                model_ok = g.model is not None and (_norm_model(g.model) in want or want in _norm_model(g.model))
                mem_ok = g.memory_total_mib is None or abs(g.memory_total_mib - dev.memory_total_mib) <= max(
                    512, 0.05 * dev.memory_total_mib)
                if model_ok and mem_ok:
                    match = g
                    break
        if match is not None and id(match) not in taken:
            taken.add(id(match))
            names[id(match)].append(dev.name)
    out = []
    for g in gpus:
        found = names[id(g)]
        primary = found[0] if found else g.name
        out.append(g.model_copy(update={
            "llama_names": tuple(found),
            "name": primary,
            "backend": backend_of(primary) if found else g.backend,
        }))
    return out
