"""Device inventory as pure data: host, physical GPUs, and llama.cpp's device names for them."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

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
    """One line of `llama-server --list-devices`: `  CUDA0: NVIDIA H200 (143771 MiB, 142000 MiB free)`.

    `pci_bus_id` is not in that listing: it comes from a model load's "using/skipping device" lines
    (parse_device_line), learned once per binary (services.device_ids) and added with `with_pci_ids`.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    memory_total_mib: int
    memory_free_mib: int
    pci_bus_id: str | None = None

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


def normalize_pci(bus_id: str | None) -> str | None:
    """One spelling of a PCI address: domain as 4 hex digits, lower case ('0000:00:06.0').

    NVML gives `00000000:00:06.0` (8-digit domain), llama.cpp `0000:00:06.0`, pyamdgpuinfo `0000:03:00.0`;
    an address without a domain (`00:06.0`) is domain 0. None for None, '' or llama.cpp's 'unknown id'.
    """
    if not bus_id:
        return None
    text = bus_id.strip().lower()
    m = re.fullmatch(r"(?:([0-9a-f]+):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})\.([0-7])", text)
    if not m:
        return None
    domain = int(m.group(1) or "0", 16)
    return f"{domain:04x}:{int(m.group(2), 16):02x}:{int(m.group(3), 16):02x}.{m.group(4)}"


@dataclass(frozen=True)
class DeviceIdLine:
    """A model load's device line (llama.cpp src/llama.cpp, llama_prepare_model_devices):

    `using device CUDA0 (NVIDIA H200) (0000:00:06.0) - 142105 MiB free` (a device the model uses), or
    `skipping device Vulkan0 (NVIDIA H200) with id 0000:00:06.0 - already using device CUDA0 (NVIDIA H200)
    with the same id` (llama.cpp drops a later device on the same card when no `-dev` is given).
    `pci_bus_id` is None where llama.cpp says 'unknown id' (RPC, backends without one).
    """

    name: str
    description: str
    pci_bus_id: str | None
    free_mib: int | None = None  # "using" lines only
    same_as: str | None = None  # "skipping" lines: the device kept for that card


_USING_RE = re.compile(r"using device (\S+) \((.*)\) \(([^()]*)\) - (\d+) MiB free")
_SKIPPING_RE = re.compile(r"skipping device (\S+) \((.*)\) with id (\S+) - already using device (\S+) \(")


def parse_device_line(line: str) -> DeviceIdLine | None:
    """The one parser of llama.cpp's "using device" / "skipping device" lines (any log prefix); None
    otherwise."""
    if "using device" in line and (m := _USING_RE.search(line)) is not None:
        return DeviceIdLine(m.group(1), m.group(2), normalize_pci(m.group(3)), free_mib=int(m.group(4)))
    if "skipping device" in line and (m := _SKIPPING_RE.search(line)) is not None:
        return DeviceIdLine(m.group(1), m.group(2), normalize_pci(m.group(3)), same_as=m.group(4))
    return None


def pci_ids_from_log(lines: str | Iterable[str]) -> dict[str, str]:
    """{llama.cpp device name: PCI address} from a log's device lines (a str or lines); unknown ids left
    out."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    out: dict[str, str] = {}
    for line in lines:
        d = parse_device_line(line)
        if d is not None and d.pci_bus_id is not None:
            out[d.name] = d.pci_bus_id
    return out


_FA_QUANTS_RE = re.compile(r"\bFA_QUANTS = ([^|]*)")


def fa_quants_from_log(lines: str | Iterable[str]) -> tuple[str, ...] | None:
    """The CUDA flash-attention K-V pairs a build was compiled with, from its log's system_info line
    ("CUDA : ARCHS = 900 | USE_GRAPHS = 1 | FA_QUANTS = q4_0-q4_0,q8_0-q8_0,f16-f16,bf16-bf16 | CPU : ...";
    ggml-cuda.cu:5861-5862, ggml/cmake/common.cmake: "all" or a list): the pairs, ("all",), () for a build
    without CUDA, None when the log has no system_info line or a CUDA section without the list (unknown)."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    for line in lines:
        if "system_info:" not in line:
            continue
        m = _FA_QUANTS_RE.search(line)
        if m is not None:
            return tuple(q.strip().lower() for q in m.group(1).split(",") if q.strip())
        return None if re.search(r"\bCUDA :", line) else ()
    return None


def with_pci_ids(llama: list[LlamaDevice] | tuple[LlamaDevice, ...], ids: dict[str, str] | None) -> list[LlamaDevice]:
    """The device list with the PCI addresses `ids` knows ({name: address}) filled in."""
    ids = ids or {}
    return [d.model_copy(update={"pci_bus_id": normalize_pci(ids[d.name])}) if d.name in ids else d for d in llama]


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
    # Of llama_names, those matched by model name and memory size only (no PCI address, no CUDA/ROCm index
    # order): two identical cards could be swapped, so they are shown as a guess.
    guessed_names: tuple[str, ...] = ()
    hypothetical: bool = False  # planned hardware the user added, not detected

    @property
    def label(self) -> str:
        """Every llama.cpp name of this card, for plots and lists: 'CUDA0 + Vulkan0' (else `name`)."""
        return " + ".join(self.llama_names) if len(self.llama_names) > 1 else self.name

    @property
    def pool(self) -> str:
        """The key of this card's one pool of memory: its PCI address, else its name."""
        return normalize_pci(self.pci_bus_id) or self.name

    def public_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "backend": self.backend, "vendor": self.vendor, "model": self.model,
            "pci_bus_id": normalize_pci(self.pci_bus_id), "uuid": self.uuid,
            "memory_total_mib": self.memory_total_mib, "memory_free_mib": self.memory_free_mib,
            "llama_names": list(self.llama_names), "guessed_names": list(self.guessed_names),
        }


class DeviceInventory(BaseModel):
    model_config = ConfigDict(frozen=True)

    host: HostInfo = Field(default_factory=HostInfo)
    devices: tuple[GpuInfo, ...] = ()
    llama_devices: tuple[LlamaDevice, ...] = ()
    notes: tuple[str, ...] = ()

    def gpu_of(self, llama_name: str) -> GpuInfo | None:
        """The physical GPU a llama.cpp device name is on (None: not a known GPU)."""
        return next((g for g in self.devices if llama_name in g.llama_names), None)

    def pool_of(self, llama_name: str) -> str | None:
        """The memory pool (PCI address, else card name) of a llama.cpp device; devices of one card share
        it."""
        g = self.gpu_of(llama_name)
        return g.pool if g is not None else None

    def to_json(self) -> dict[str, Any]:
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

    In this order: (1) the PCI address, when both llama.cpp (learned from a model load, see
    LlamaDevice.pci_bus_id) and the vendor library know it: certain, whatever the names say; (2) CUDA/ROCm
    index order, which follows PCI bus order when the server runs with CUDA_DEVICE_ORDER=PCI_BUS_ID (the
    app sets it), as NVML's does; (3) model name and memory size, in order, each card taken once per
    backend: a guess (two identical cards could be swapped), kept in `guessed_names`. One card can carry
    several names (CUDA0 and Vulkan0) and stays one physical GPU.
    """
    by_vendor_bus = sorted(gpus, key=lambda g: (g.vendor, normalize_pci(g.pci_bus_id) or "", g.index or 0))
    by_pci = {p: g for g in gpus if (p := normalize_pci(g.pci_bus_id)) is not None}
    names: dict[int, list[str]] = {id(g): [] for g in gpus}
    guessed: dict[int, list[str]] = {id(g): [] for g in gpus}
    per_backend_taken: dict[str, set[int]] = {}
    pending: list[LlamaDevice] = []
    for dev in llama:  # (1) by PCI address
        by_address = by_pci.get(normalize_pci(dev.pci_bus_id) or "")
        taken = per_backend_taken.setdefault(dev.backend, set())
        if by_address is not None and id(by_address) not in taken:
            taken.add(id(by_address))
            names[id(by_address)].append(dev.name)
        else:
            pending.append(dev)
    for dev in pending:
        backend = dev.backend
        idx = index_of(dev.name)
        taken = per_backend_taken.setdefault(backend, set())
        match: GpuInfo | None = None
        if dev.pci_bus_id is not None and by_pci:
            continue  # its card has an address no detected GPU has: not one of these
        if backend in ("CUDA", "MUSA", "ROCm"):  # (2) index order
            vendor = "nvidia" if backend in ("CUDA", "MUSA") else "amd"
            same = [g for g in by_vendor_bus if g.vendor == vendor]
            if idx is not None and idx < len(same):
                match = same[idx]
        guess = False
        if match is None:  # (3) name and memory
            want = _norm_model(dev.description)
            for g in by_vendor_bus:
                if id(g) in taken:
                    continue
                model_ok = g.model is not None and (_norm_model(g.model) in want or want in _norm_model(g.model))
                mem_ok = g.memory_total_mib is None or abs(g.memory_total_mib - dev.memory_total_mib) <= max(
                    512, 0.05 * dev.memory_total_mib)
                if model_ok and mem_ok:
                    match, guess = g, True
                    break
        if match is not None and id(match) not in taken:
            taken.add(id(match))
            names[id(match)].append(dev.name)
            if guess:
                guessed[id(match)].append(dev.name)
    order = {d.name: i for i, d in enumerate(llama)}
    out = []
    for g in gpus:
        found = sorted(names[id(g)], key=order.__getitem__)  # llama.cpp's order: CUDA before Vulkan
        primary = found[0] if found else g.name
        out.append(g.model_copy(update={
            "llama_names": tuple(found),
            "guessed_names": tuple(n for n in found if n in guessed[id(g)]),
            "name": primary,
            "backend": backend_of(primary) if found else g.backend,
        }))
    return out

