"""Parse llama.cpp's own memory figures: `-lv 4` buffer lines, the memory breakdown table, `-fitp on`.

llama-server prints, at trace verbosity (`-lv 4`), one line per buffer it allocates:

    load_tensors:   CPU_Mapped model buffer size =   235.16 MiB
    llama_context:        CPU  output buffer size =     4.00 MiB
    llama_kv_cache:        CPU KV buffer size =    96.00 MiB
    sched_reserve:        CPU compute buffer size =    52.78 MiB

and, at exit, `common_memory_breakdown_print`'s table (`| - CUDA0 (H200) | T = F + (S = M + C + K) + U |`).
`llama-fit-params -fitp on` prints `<DEV> <model> <context> <compute>` per device, then `Host ...` (MiB).
These are the ground truth our estimate is compared with (benchmarks/memory_accuracy.py) and what
"Check with llama.cpp" shows beside the estimate. Pure functions: text in, dataclasses out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_PREFIX = r"^(?:\d+\.\d+\.\d+\.\d+\s+[IWED]\s+)?"
_MODEL_RE = re.compile(_PREFIX + r"load_tensors:\s+(\S+) model buffer size =\s+([\d.]+) MiB")
_OUTPUT_RE = re.compile(_PREFIX + r"llama_context:\s+(\S+)\s+output buffer size =\s+([\d.]+) MiB")
_KV_RE = re.compile(_PREFIX + r"llama_kv_cache:\s+(\S+) KV buffer size =\s+([\d.]+) MiB")
_RS_RE = re.compile(_PREFIX + r"llama_memory_recurrent:\s+(\S+) RS buffer size =\s+([\d.]+) MiB")
_COMPUTE_RE = re.compile(_PREFIX + r"sched_reserve:\s+(\S+) compute buffer size =\s+([\d.]+) MiB")
_KV_SIZE_RE = re.compile(_PREFIX + r"llama_kv_cache: size =\s+([\d.]+) MiB \(\s*(\d+) cells,\s+(\d+) layers,\s+(\d+)/(\d+) seqs\)")
_NEW_MODEL_RE = re.compile(_PREFIX + r"load_tensors: loading model tensors")
_NEW_CTX_RE = re.compile(_PREFIX + r"llama_context: constructing llama_context")
_CTX_VAL_RE = re.compile(_PREFIX + r"llama_context: (n_ctx|n_ctx_seq|n_batch|n_ubatch|n_seq_max|n_outputs_max)\s+=\s+(\d+)")
_OFFLOADED_RE = re.compile(_PREFIX + r"load_tensors: offloaded (\d+)/(\d+) layers to GPU")
_BREAKDOWN_GPU_RE = re.compile(
    r"memory_breakdown_print: \|\s+- (\S+) \((.*?)\)\s+\|\s+(\d+)\s*=\s*(\d+)\s*\+\s*\(\s*(\d+)\s*=\s*(\d+)\s*\+\s*(\d+)\s*\+\s*(\d+)\)"
    r"\s*\+\s*(-?\d+)\s*\|")
_BREAKDOWN_OTHER_RE = re.compile(
    r"memory_breakdown_print: \|\s+- (\S+)\s+\|\s+(\d+)\s*=\s*(\d+)\s*\+\s*(\d+)\s*\+\s*(\d+)\s*\|")
_FITP_RE = re.compile(r"^(\S+) (\d+) (\d+) (\d+)\s*$")


@dataclass(frozen=True)
class BufferLine:
    """One allocated buffer as llama.cpp logged it. `kind`: model, output, kv, rs, compute."""

    kind: str
    buffer: str  # buffer type name: CPU_Mapped, CPU_REPACK, CUDA0, CUDA_Host, CPU, ...
    mib: float
    model_index: int  # 0 = main model, 1 = the next model loaded (draft), ...
    context_index: int  # 0 = main context, 1 = draft / MTP context, ...


@dataclass(frozen=True)
class BreakdownRow:
    """One row of the memory breakdown table (integer MiB as llama.cpp prints them)."""

    name: str  # CUDA0, Host, or a buffer type
    description: str | None
    total_mib: int | None
    free_mib: int | None
    self_mib: int
    model_mib: int
    context_mib: int
    compute_mib: int
    unaccounted_mib: int | None


@dataclass
class MemoryLog:
    """Everything about memory that one llama-server `-lv 4` run printed."""

    buffers: list[BufferLine] = field(default_factory=list)
    breakdown: list[BreakdownRow] = field(default_factory=list)
    context: dict[str, int] = field(default_factory=dict)  # n_ctx, n_ctx_seq, n_ubatch ... (main context)
    kv_caches: list[dict] = field(default_factory=list)  # size lines: mib, cells, layers, seqs
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

    Each `loading model tensors` line starts a new model (main first, then a draft); each
    `constructing llama_context` a new context (main first, then the draft or MTP context).
    The breakdown table is printed by the fit probe and again at exit; the last one wins.
    """
    log = MemoryLog()
    model_i, ctx_i = -1, -1
    breakdown: list[BreakdownRow] = []
    in_table = False
    for raw in text.splitlines():
        line = raw.rstrip()
        if _NEW_MODEL_RE.search(line):
            model_i += 1
            continue
        if _NEW_CTX_RE.search(line):
            ctx_i += 1
            continue
        m = _MODEL_RE.search(line)
        if m:
            log.buffers.append(BufferLine("model", m.group(1), float(m.group(2)), max(model_i, 0), max(ctx_i, 0)))
            continue
        for kind, rx in (("output", _OUTPUT_RE), ("kv", _KV_RE), ("rs", _RS_RE), ("compute", _COMPUTE_RE)):
            m = rx.search(line)
            if m:
                entry = BufferLine(kind, m.group(1), float(m.group(2)), max(model_i, 0), max(ctx_i, 0))
                if kind == "compute":
                    # a context may reserve its scheduler again (MTP contexts do): same buffer, resized
                    same = next((i for i, b in enumerate(log.buffers) if b.kind == "compute"
                                 and b.buffer == entry.buffer and b.context_index == entry.context_index), None)
                    if same is not None:
                        if entry.mib > log.buffers[same].mib:
                            log.buffers[same] = entry
                        break
                log.buffers.append(entry)
                break
        else:
            m = _KV_SIZE_RE.search(line)
            if m and ctx_i <= 0:
                log.kv_caches.append({"mib": float(m.group(1)), "cells": int(m.group(2)), "layers": int(m.group(3)),
                                      "seqs": (int(m.group(4)), int(m.group(5)))})
                continue
            m = _CTX_VAL_RE.search(line)
            if m and ctx_i <= 0:
                log.context[m.group(1)] = int(m.group(2))
                continue
            m = _OFFLOADED_RE.search(line)
            if m and model_i <= 0:
                log.offloaded_layers = (int(m.group(1)), int(m.group(2)))
                continue
            if "memory_breakdown_print:" in line:
                if "memory breakdown [MiB]" in line:
                    in_table = True
                    breakdown = []
                    continue
                m = _BREAKDOWN_GPU_RE.search(line)
                if m and in_table:
                    breakdown.append(BreakdownRow(m.group(1), m.group(2), int(m.group(3)), int(m.group(4)),
                                                  int(m.group(5)), int(m.group(6)), int(m.group(7)),
                                                  int(m.group(8)), int(m.group(9))))
                    log.breakdown = breakdown
                    continue
                m = _BREAKDOWN_OTHER_RE.search(line)
                if m and in_table:
                    breakdown.append(BreakdownRow(m.group(1), None, None, None, int(m.group(2)), int(m.group(3)),
                                                  int(m.group(4)), int(m.group(5)), None))
                    log.breakdown = breakdown
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
        out = ["-c", str(self.ctx), "-ngl", str(self.ngl)]
        if self.tensor_split:
            out += ["-ts", ",".join(str(x) for x in self.tensor_split)]
        if self.overrides:
            out += ["-ot", ",".join(self.overrides)]
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
