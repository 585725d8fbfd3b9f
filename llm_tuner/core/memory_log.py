"""Parse llama.cpp's own memory figures: `-lv 4` buffer lines, the memory breakdown table, `-fitp on`.

llama-server prints, at trace verbosity (`-lv 4`), one line per buffer it allocates:

    load_tensors:   CPU_Mapped model buffer size =   235.16 MiB
    llama_context:        CPU  output buffer size =     4.00 MiB
    llama_kv_cache:        CPU KV buffer size =    96.00 MiB
    llama_memory_recurrent:        CPU RS buffer size =     3.28 MiB   (recurrent state: mamba, hybrids)
    sched_reserve:        CPU compute buffer size =    52.78 MiB

and, after loading and at exit, `common_memory_breakdown_print`'s table
(`| - CUDA0 (H200) | T = F + (S = M + C + K) + U |`), or the same rows as `--log-jsonl` data.
This module is the one parser of those formats: services.logparse feeds it the live log line by line
(MemoryLineReader), the plan check and the benchmarks a whole recorded log (parse_memory_log).
`llama-fit-params -fitp on` prints `<DEV> <model> <context> <compute>` per device, then `Host ...` (MiB).
These are the ground truth our estimate is compared with (benchmarks/memory_accuracy.py) and what
"Check with llama.cpp" shows beside the estimate. Pure functions: text in, dataclasses out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_tuner.core import flags

_BUFFER_RES = (  # (kind, regex): one line per buffer llama.cpp allocates, at -lv 4
    ("model", re.compile(r"load_tensors:\s+(\S+) model buffer size =\s+([\d.]+) MiB")),
    ("output", re.compile(r"llama_context:\s+(\S+)\s+output buffer size =\s+([\d.]+) MiB")),
    ("kv", re.compile(r"llama_kv_cache:\s+(\S+) KV buffer size =\s+([\d.]+) MiB")),
    ("rs", re.compile(r"llama_memory_recurrent:\s+(\S+) RS buffer size =\s+([\d.]+) MiB")),
    ("compute", re.compile(r"sched_reserve:\s+(\S+) compute buffer size =\s+([\d.]+) MiB")),
)
_KV_SIZE_RE = re.compile(r"llama_kv_cache: size =\s+([\d.]+) MiB \(\s*(\d+) cells,\s+(\d+) layers,\s+(\d+)/(\d+) seqs\)")
_NEW_MODEL_RE = re.compile(r"load_tensors: loading model tensors")
_NEW_CTX_RE = re.compile(r"llama_context: constructing llama_context")
_CTX_VAL_RE = re.compile(r"llama_context: (n_ctx|n_ctx_seq|n_batch|n_ubatch|n_seq_max|n_outputs_max)\s+=\s+(\d+)")
_OFFLOADED_RE = re.compile(r"load_tensors: offloaded (\d+)/(\d+) layers to GPU")
_BREAKDOWN_MARK = "memory_breakdown_print:"  # common_memory_breakdown_print: | ... |
_BREAKDOWN_HEADER = "memory breakdown [MiB]"
_BREAKDOWN_GPU_RE = re.compile(
    r"memory_breakdown_print: \|\s+- (\S+) \((.*?)\)\s+\|\s+(-?\d+)\s*=\s*(-?\d+)\s*\+\s*\(\s*(-?\d+)\s*=\s*(-?\d+)\s*\+"
    r"\s*(-?\d+)\s*\+\s*(-?\d+)\)\s*\+\s*(-?\d+)\s*\|")
_BREAKDOWN_OTHER_RE = re.compile(
    r"memory_breakdown_print: \|\s+- (\S+)\s+\|\s+(-?\d+)\s*=\s*(-?\d+)\s*\+\s*(-?\d+)\s*\+\s*(-?\d+)\s*\|")
_FITP_RE = re.compile(r"^(\S+) (\d+) (\d+) (\d+)\s*$")


@dataclass(frozen=True)
class BufferLine:
    """One allocated buffer as llama.cpp logged it. `kind`: model, output, kv, rs (recurrent state),
    compute."""

    kind: str
    buffer: str  # buffer type name: CPU_Mapped, CPU_REPACK, CUDA0, CUDA_Host, CPU, RPC0[host:port], ...
    mib: float
    model_index: int = 0  # 0 = main model, 1 = the next model loaded (draft), ...
    context_index: int = 0  # 0 = main context, 1 = draft / MTP context, ...


@dataclass(frozen=True)
class BreakdownRow:
    """One row of the memory breakdown table (integer MiB as llama.cpp prints them).

    The same rows come as text (`common_memory_breakdown_print`) or as `--log-jsonl` data
    (`fit_memory_breakdown`). Device rows have total/free/unaccounted; Host and buffer-type rows do not.
    """

    kind: str  # "device", "host", "buffer_type"
    name: str  # CUDA0, RPC1, Host, or a buffer type (CPU_REPACK)
    description: str | None = None
    total_mib: int | None = None
    free_mib: int | None = None
    self_mib: int | None = None
    model_mib: int | None = None
    context_mib: int | None = None
    compute_mib: int | None = None
    unaccounted_mib: int | None = None


@dataclass(frozen=True)
class PoolRow:
    """The breakdown's device rows of one physical GPU summed: its llama.cpp devices (CUDA0 and Vulkan0 of one
    card) each report the card's whole free memory, so each one's own 'unaccounted' (total - free - self)
    counts the other's buffers (1273 and 1741 MiB on one H200, where the card's is 677). Per card it is right
    again."""

    devices: tuple[str, ...]
    # the smallest member total (CUDA's leaves out the driver's reservation, Vulkan's not)
    total_mib: int | None
    free_mib: int | None
    self_mib: int

    @property
    def unaccounted_mib(self) -> int | None:
        if self.total_mib is None or self.free_mib is None:
            return None
        return self.total_mib - self.free_mib - self.self_mib

    def to_json(self) -> dict[str, Any]:
        return {"devices": list(self.devices), "total_mib": self.total_mib, "free_mib": self.free_mib,
                "self_mib": self.self_mib, "unaccounted_mib": self.unaccounted_mib}


@dataclass(frozen=True)
class MemoryBreakdown:
    """One whole breakdown table. `source`: "text" (the log table) or "jsonl" (`--log-jsonl`)."""

    rows: tuple[BreakdownRow, ...]
    source: str

    def pooled(self, pool_of: Callable[[str], str | None]) -> list[PoolRow]:
        """The device rows per physical GPU. `pool_of(name)` gives a device's card (a PCI address, e.g. from
        core.devices.pci_ids_from_log or DeviceInventory.pool_of; None: a card of its own)."""
        groups: dict[str, list[BreakdownRow]] = {}
        for r in self.rows:
            if r.kind == "device":
                groups.setdefault(pool_of(r.name) or r.name, []).append(r)
        out = []
        for rows in groups.values():
            totals = [r.total_mib for r in rows if r.total_mib is not None]
            frees = [r.free_mib for r in rows if r.free_mib is not None]
            out.append(PoolRow(tuple(r.name for r in rows), min(totals) if totals else None,
                               min(frees) if frees else None, sum(r.self_mib or 0 for r in rows)))
        return out


def parse_buffer_line(line: str) -> tuple[str, str, float] | None:
    """`(kind, buffer, MiB)` of a `-lv 4` buffer line (with or without the log prefix); None for other
    lines."""
    for kind, rx in _BUFFER_RES:
        m = rx.search(line)
        if m:
            return kind, m.group(1), float(m.group(2))
    return None


def parse_breakdown_row(line: str) -> BreakdownRow | None:
    """One row of the text breakdown table; None for its header and for other lines."""
    m = _BREAKDOWN_GPU_RE.search(line)
    if m:
        g = [int(x) for x in m.groups()[2:]]
        return BreakdownRow("device", m.group(1), m.group(2), total_mib=g[0], free_mib=g[1], self_mib=g[2],
                            model_mib=g[3], context_mib=g[4], compute_mib=g[5], unaccounted_mib=g[6])
    m = _BREAKDOWN_OTHER_RE.search(line)
    if m:
        name = m.group(1)
        g = [int(x) for x in m.groups()[1:]]
        return BreakdownRow("host" if name == "Host" else "buffer_type", name, self_mib=g[0], model_mib=g[1],
                            context_mib=g[2], compute_mib=g[3])
    return None


def breakdown_from_json(data: dict[str, Any] | None) -> MemoryBreakdown:
    """The `data` of a `--log-jsonl` `{"type":"fit_memory_breakdown"}` record."""
    rows = []
    for r in (data or {}).get("rows", []):
        rows.append(BreakdownRow(
            kind=r.get("kind", "?"), name=r.get("name", "?"), description=r.get("description"),
            total_mib=r.get("total"), free_mib=r.get("free"), self_mib=r.get("self"), model_mib=r.get("model"),
            context_mib=r.get("context"), compute_mib=r.get("compute"), unaccounted_mib=r.get("unaccounted")))
    return MemoryBreakdown(tuple(rows), "jsonl")


class MemoryLineReader:
    """Reads one llama.cpp run's memory lines one at a time: buffer lines and the breakdown table.

    The one parser of these formats: the live log parser (services.logparse) feeds it every message,
    parse_memory_log a whole recorded log. Each `loading model tensors` line starts a new model (main
    first, then a draft); each `constructing llama_context` a new context (main, then draft or MTP).
    A text table is handed out whole when the first line after it arrives (or at close()).
    """

    def __init__(self) -> None:
        self.model_index = -1
        self.context_index = -1
        self._rows: list[BreakdownRow] | None = None

    def feed(self, line: str) -> list[BufferLine | MemoryBreakdown]:
        """What this line completes: a BufferLine, a closed MemoryBreakdown, or nothing."""
        out: list[BufferLine | MemoryBreakdown] = []
        if _BREAKDOWN_MARK in line:
            if _BREAKDOWN_HEADER in line:
                out.extend(self.close())
                self._rows = []
            elif (row := parse_breakdown_row(line)) is not None:
                if self._rows is None:
                    self._rows = []
                self._rows.append(row)
            return out
        out.extend(self.close())
        if _NEW_MODEL_RE.search(line):
            self.model_index += 1
        elif _NEW_CTX_RE.search(line):
            self.context_index += 1
        elif (buf := parse_buffer_line(line)) is not None:
            out.append(BufferLine(*buf, max(self.model_index, 0), max(self.context_index, 0)))
        return out

    def close(self) -> list[MemoryBreakdown]:
        """The table still open (the log ended inside it), if any."""
        rows, self._rows = self._rows, None
        return [MemoryBreakdown(tuple(rows), "text")] if rows else []


def merge_buffers(lines: list[BufferLine]) -> list[BufferLine]:
    """Buffer lines as allocated: a context that reserves its scheduler again (MTP contexts do) resizes its
    compute buffer rather than adding one, so repeated compute lines of one buffer and context count once
    (the largest)."""
    out: list[BufferLine] = []
    for entry in lines:
        if entry.kind == "compute":
            same = next((i for i, b in enumerate(out) if b.kind == "compute" and b.buffer == entry.buffer
                         and b.context_index == entry.context_index), None)
            if same is not None:
                if entry.mib > out[same].mib:
                    out[same] = entry
                continue
        out.append(entry)
    return out


@dataclass
class MemoryLog:
    """Everything about memory that one llama-server `-lv 4` run printed."""

    buffers: list[BufferLine] = field(default_factory=list)
    breakdown: list[BreakdownRow] = field(default_factory=list)
    context: dict[str, int] = field(default_factory=dict)  # n_ctx, n_ctx_seq, n_ubatch ... (main context)
    kv_caches: list[dict[str, Any]] = field(default_factory=list)  # size lines: mib, cells, layers, seqs
    offloaded_layers: tuple[int, int] | None = None

    def total(self, kind: str, buffer: str | None = None, *, context_index: int | None = 0,
              model_index: int | None = 0) -> float:
        """Sum of MiB for one kind (and buffer name), by default for the main model/context only."""
        out = 0.0
        for b in self.buffers:
            if b.kind != kind or (buffer is not None and b.buffer != buffer):
                continue
            if kind == "model" and model_index is not None and b.model_index != model_index:
                continue
            if kind != "model" and context_index is not None and b.context_index != context_index:
                continue
            out += b.mib
        return out

    def by_buffer(self, kind: str, *, index: int | None = 0) -> dict[str, float]:
        """{buffer name: MiB} for one kind; index selects the model (kind=model) or context."""
        out: dict[str, float] = {}
        for b in self.buffers:
            if b.kind != kind:
                continue
            which = b.model_index if kind == "model" else b.context_index
            if index is not None and which != index:
                continue
            out[b.buffer] = out.get(b.buffer, 0.0) + b.mib
        return out


def parse_memory_log(text: str) -> MemoryLog:
    """Parse a llama-server (or llama-cli) log at `-lv 4` into buffer sizes and the breakdown table.

    The breakdown table is printed by the fit probe and again at exit; the last one wins.
    """
    log = MemoryLog()
    reader = MemoryLineReader()
    lines: list[BufferLine] = []

    def take(found: Sequence[BufferLine | MemoryBreakdown]) -> None:
        for item in found:
            if isinstance(item, BufferLine):
                lines.append(item)
            else:
                log.breakdown = list(item.rows)

    for raw in text.splitlines():
        line = raw.rstrip()
        take(reader.feed(line))
        ctx_i, model_i = reader.context_index, reader.model_index
        if (m := _KV_SIZE_RE.search(line)) is not None:
            if ctx_i <= 0:
                log.kv_caches.append({"mib": float(m.group(1)), "cells": int(m.group(2)),
                                      "layers": int(m.group(3)), "seqs": (int(m.group(4)), int(m.group(5)))})
        elif (m := _CTX_VAL_RE.search(line)) is not None:
            if ctx_i <= 0:
                log.context[m.group(1)] = int(m.group(2))
        elif (m := _OFFLOADED_RE.search(line)) is not None and model_i <= 0:
            log.offloaded_layers = (int(m.group(1)), int(m.group(2)))
    take(reader.close())
    log.buffers = merge_buffers(lines)
    return log


@dataclass(frozen=True)
class FitPrintRow:
    """One line of `llama-fit-params -fitp on`: MiB of weights, context (KV + output) and compute."""

    name: str
    model_mib: int
    context_mib: int
    compute_mib: int


def parse_fit_print(stdout: str) -> list[FitPrintRow]:
    """Parse `llama-fit-params -fitp on` stdout (`CUDA0 1234 567 89` lines, then `Host ...`)."""
    rows = []
    for line in stdout.splitlines():
        m = _FITP_RE.match(line.strip())
        if m:
            rows.append(FitPrintRow(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))))
    return rows


@dataclass(frozen=True)
class FittedArgs:
    """`llama-fit-params` result line: `-c N -ngl N [-ts a,b] [-ot "pat=BUFT,..."]`."""

    ctx: int
    ngl: int
    tensor_split: tuple[int, ...] = ()
    overrides: tuple[str, ...] = ()

    def argv(self) -> list[str]:
        f = flags.short
        out = [f("ctx_size"), str(self.ctx), f("gpu_layers"), str(self.ngl)]
        if self.tensor_split:
            out += [f("tensor_split"), ",".join(str(x) for x in self.tensor_split)]
        if self.overrides:
            out += [f("override_tensor"), ",".join(self.overrides)]
        return out


_FITTED_RE = re.compile(r'-c (\d+) -ngl (-?\d+)(?: -ts ([\d,]+))?(?: -ot "([^"]*)")?')


def parse_fitted_args(stdout: str) -> FittedArgs | None:
    """Parse the one line llama-fit-params prints on success; None when absent."""
    for line in stdout.splitlines():
        m = _FITTED_RE.search(line)
        if m:
            ts = tuple(int(x) for x in m.group(3).split(",")) if m.group(3) else ()
            ot = tuple(x for x in m.group(4).split(",") if x) if m.group(4) else ()
            return FittedArgs(int(m.group(1)), int(m.group(2)), ts, ot)
    return None
