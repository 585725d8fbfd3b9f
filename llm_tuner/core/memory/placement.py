"""Which device and buffer each tensor goes to, following llama.cpp's placement rules."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from llm_tuner.core.devices import backend_of
from llm_tuner.core.memory.args import PlacementArgs, PlanDevice
from llm_tuner.core.memory.constants import _ALIGN, _HAS_HOST_BUFT, MIB
from llm_tuner.core.memory.model_view import (
    _ModelView,
    _pad,
    _Tensor,
    _view,
    normalize_cpu_flags,
    repackable,
    row_size,
)


@lru_cache(maxsize=4096)
def _rx(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


def regex_search(pattern: str, name: str) -> bool:
    """std::regex_search semantics (ECMAScript) for the patterns people write; Python's re agrees on them."""
    rx = _rx(pattern)
    return bool(rx and rx.search(name))


def _backend_of(name: str) -> str:
    return backend_of(name)


# ------------------------------------------------------------------------------------------------
# placement
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorPlacement:
    name: str
    device: str  # GPU name or "Host"
    buffer: str  # llama.cpp buffer type name (CUDA0, CPU_Mapped, CPU_REPACK, CUDA_Host, CPU, CUDA0_Split)
    n_bytes: int
    layer: int | None


def _model_devices(args: PlacementArgs, gpus: list[PlanDevice]) -> list[PlanDevice]:
    if args.devices is not None:
        by_name = {d.name: d for d in gpus}
        devs = [by_name.get(n) or PlanDevice(n, _backend_of(n), None) for n in args.devices]
    else:
        # llama.cpp skips a later device on a card an earlier one already uses (same device id: CUDA0 and
        # Vulkan0 of one GPU keep CUDA0, CUDA registers first; src/llama.cpp llama_prepare_model_devices)
        seen: set[str] = set()
        devs = []
        for d in gpus:
            if d.pool is not None:
                if d.pool in seen:
                    continue
                seen.add(d.pool)
            devs.append(d)
    if args.split_mode == "none" and devs:
        mg = args.main_gpu if 0 <= args.main_gpu < len(devs) else 0
        devs = [devs[mg]]
    return devs


def _layer_devices(view: _ModelView, args: PlacementArgs, devs: list[PlanDevice]) -> tuple[list[str], int]:
    """Device name per 'layer' 0..n_layer_all (the last entry is the output layer); n on GPU."""
    n_all = view.n_layer_all
    ngl = args.ngl if args.ngl is not None else -1
    n_gpu_layers = ngl if ngl >= 0 else n_all + 1
    if not devs:
        return ["Host"] * (n_all + 1), 0
    if args.tensor_split and any(x > 0 for x in args.tensor_split[:len(devs)]):
        splits = ([float(x) for x in args.tensor_split[:len(devs)]]
                  + [0.0] * max(0, len(devs) - len(args.tensor_split)))
    else:
        splits = [float(d.free_mib if d.free_mib is not None else (d.capacity_mib or 1)) for d in devs]
    total = sum(splits) or 1.0
    cum, acc = [], 0.0
    for s in splits:
        acc += s
        cum.append(acc / total)
    i_gpu_start = max(n_all + 1 - n_gpu_layers, 0)
    act = min(n_gpu_layers, n_all + 1)
    out = []
    for il in range(n_all + 1):
        if il < i_gpu_start or (il - i_gpu_start) >= act:
            out.append("Host")
            continue
        x = (il - i_gpu_start) / act
        k = next((j for j, c in enumerate(cum) if c > x), len(cum))  # upper_bound
        out.append(devs[min(k, len(devs) - 1)].name)
    return out, sum(1 for d in out if d != "Host")


def place_tensors(model: Any, args: PlacementArgs, gpus: list[PlanDevice] | tuple[PlanDevice, ...] = (),
                  cpu_flags: tuple[str, ...] | frozenset[str] = ()) -> list[TensorPlacement]:
    """Where each weight goes (device and llama.cpp buffer type), as llama.cpp's loader decides."""
    view = _view(model)
    devs = _model_devices(args, list(gpus))
    layer_dev, _ = _layer_devices(view, args, devs)
    return _place(view, args, devs, layer_dev, normalize_cpu_flags(cpu_flags))


def _place(view: _ModelView, args: PlacementArgs, devs: list[PlanDevice], layer_dev: list[str],
           flags: frozenset[str]) -> list[TensorPlacement]:
    gpu_backends = [d.backend for d in devs if d.backend not in ("CPU", "Metal")]
    host_buft = None
    if gpu_backends and not args.no_host and gpu_backends[0] in _HAS_HOST_BUFT:
        host_buft = f"{gpu_backends[0]}_Host"
    load_nextn = args.spec_mtp or args.load_mtp
    dev_names = {d.name for d in devs}
    row_split = args.split_mode in ("row", "tensor") and len(devs) > 1

    def cpu_buffer(t: _Tensor) -> str:
        if host_buft is not None:
            return "CPU_Mapped" if args.use_mmap else host_buft
        if args.repack and t.matmul and repackable(t.type_name, t.shape, flags):
            return "CPU_REPACK"
        return "CPU_Mapped" if args.use_mmap else "CPU"

    out: list[TensorPlacement] = []
    out_dev = layer_dev[-1]
    for t in view.tensors:
        if t.nextn and not load_nextn:
            continue
        if t.kind == "input":
            dev = "Host"
        elif t.kind == "output":
            dev = out_dev
        else:
            dev = layer_dev[t.layer] if t.layer is not None and t.layer < len(layer_dev) - 1 else out_dev
        buf = None
        for pat, target in args.overrides:
            if regex_search(pat, t.name):
                if target.upper() == "CPU" or target.startswith("CPU"):
                    dev = "Host"
                else:
                    dev = target if target in dev_names or not dev_names else target
                    buf = target
                break
        if dev == "Host":
            buf = cpu_buffer(t)
        elif buf is None:
            buf = f"{dev}_Split" if row_split and t.matmul and len(t.shape) == 2 else dev
        out.append(TensorPlacement(t.name, dev, buf, t.n_bytes, t.layer))
        if t.name == "token_embd.weight" and view.tied_output:
            # duplicated as the output projection on the output device (llama-model-loader TENSOR_DUPLICATED)
            odev = out_dev
            if odev == "Host":
                obuf = cpu_buffer(replace(t, matmul=True))
                if obuf != buf:
                    out.append(TensorPlacement("output.weight (tied)", "Host", obuf, t.n_bytes, None))
            else:
                out.append(TensorPlacement("output.weight (tied)", odev, odev, t.n_bytes, None))
    return out


def _weights_by_buffer(view: _ModelView, placements: list[TensorPlacement], devs: list[PlanDevice],
                       args: PlacementArgs
                       ) -> tuple[dict[str, dict[str, float]], dict[str, float], dict[str, float]]:
    """{device: {buffer: MiB}} and {device: MiB} of weights, with llama.cpp's per-buffer sizing."""
    by_name = {t.name: t for t in view.tensors}
    bufs: dict[str, dict[str, float]] = {}
    mapped: dict[int, list[int]] = {}
    ts = [float(x) for x in args.tensor_split[:len(devs)]] if args.tensor_split else []
    if len(ts) < len(devs) or not any(ts):
        ts = [float(d.free_mib or d.capacity_mib or 1) for d in devs]
    ts_total = sum(ts) or 1.0
    for p in placements:
        t = by_name.get(p.name)
        if p.buffer == "CPU_Mapped" and t is not None:
            lo_hi = mapped.setdefault(t.file_index, [t.offset, t.offset + t.n_bytes])
            lo_hi[0] = min(lo_hi[0], t.offset)
            lo_hi[1] = max(lo_hi[1], t.offset + t.n_bytes)
            continue
        if p.buffer.endswith("_Split"):
            # row split: rows spread over all GPUs by -ts (each device's slice padded like its buffer)
            for d, share in zip(devs, ts, strict=False):
                b = bufs.setdefault(d.name, {})
                key = f"{d.name}_Split"
                b[key] = b.get(key, 0.0) + p.n_bytes * share / ts_total / MIB
            continue
        backend = "CPU" if p.device == "Host" else _backend_of(p.device)
        align = _ALIGN.get(backend, 256)
        size = _pad(p.n_bytes, align)
        if backend in ("CUDA", "ROCm", "MUSA") and t is not None and t.shape and t.type_name not in (
                "F32", "F16", "BF16") and t.shape[0] % 512:
            size += row_size(t.type_name, 512 - t.shape[0] % 512)
        b = bufs.setdefault(p.device, {})
        b[p.buffer] = b.get(p.buffer, 0.0) + size / MIB
    if mapped:
        b = bufs.setdefault("Host", {})
        b["CPU_Mapped"] = sum(hi - lo for lo, hi in mapped.values()) / MIB
    totals = {d: sum(v.values()) for d, v in bufs.items()}
    fit_totals: dict[str, float] = {}
    for p in placements:
        if p.buffer != "CPU_REPACK":
            fit_totals[p.device] = fit_totals.get(p.device, 0.0) + p.n_bytes / MIB
    return bufs, totals, fit_totals
