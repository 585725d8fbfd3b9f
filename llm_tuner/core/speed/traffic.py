"""What one request costs each device: bytes read per generated token, FLOPs per prompt token, host->GPU copies.

The one home of "bytes read per token" (the tune's frontier, its bandwidth figure and the speed model ask it):

- Generating one token reads every weight the token uses once: each block's tensors on the device that holds
  them, for a MoE the experts' tensors (``*_exps``) at the share a token uses (``n_expert_used / n_expert``),
  and the output head in full (with tied embeddings the embedding matrix is the head, on the output device). The
  input embedding is a row lookup (one row a token): not counted. MTP (nextn) blocks are read only when loaded.
- Attention reads the K/V cache up to the current depth, at its own type's row size, on the device of its layer
  (the host with ``-nkvo``); a sliding-window layer reads at most its window. On the CPU a generated token's
  attention costs per K/V head and cell attended (``kv_head_cells``), not per FLOP: the time depth adds is
  84-169 ns a K/V head-cell on five models of three head shapes, 0.03-0.19 ns a FLOP (speed_model.py sessions 2-3).
- A prompt token costs 2 FLOPs per active weight (the multiply-add of each matmul; experts at the used share)
  plus attention (QK^T and AV: 4 x heads x head size per position attended). The output head runs for the last
  prompt token only, so it is left out of prefill.
- With a GPU and weights in host memory llama.cpp copies those weights to the GPU for every ubatch of at least
  ``GGML_OP_OFFLOAD_MIN_BATCH`` (32) tokens and computes there (llama.cpp PR #18535): prefill then pays
  ``host_copy_bytes`` per ubatch over the link, and the compute of those layers counts on the first GPU.
  Their attention goes with them: ggml-backend's scheduler expands the GPU assignment of the offloaded Q/K/V
  matmuls to the neighbouring ops without weights (pass 2, "expand gpu down/up"), FLASH_ATTN_EXT included, so
  the host's K/V cache (the cells used so far) is copied to the GPU per ubatch too and attended there. Not
  with ``-nkvo`` (llama-graph pins attention to the CPU then).

Pure: from a memory plan (core.memory) and the model's tensor table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llm_tuner.core.memory import MemoryPlan, PlanDevice, place_tensors
from llm_tuner.core.memory.model_view import _view, row_size
from llm_tuner.core.memory.placement import _layer_devices, _model_devices

OFFLOAD_MIN_BATCH = 32  # ggml's GGML_OP_OFFLOAD_MIN_BATCH default: smaller batches compute where weights are
HOST = "Host"


@dataclass(frozen=True)
class DeviceTraffic:
    """One device's share of the work of one request (bytes and FLOPs per token)."""

    name: str
    weight_bytes: float  # weights a generated token reads here (experts at the used share; output head)
    kv_full_bytes_per_cell: float = 0.0  # K/V bytes per cell of depth of its full-attention layers
    kv_swa_bytes_per_cell: float = 0.0  # the same of its sliding-window layers (they read at most the window)
    swa_window: int = 0
    prefill_flops: float = 0.0  # FLOPs per prompt token of the weights here (attention apart)
    # of prefill_flops, per kernel class: "repack" (weights the CPU repacked for its GEMM kernels), "experts"
    # (MoE expert matmuls, MUL_MAT_ID), "plain" (every other matmul); a GPU's are all "plain"
    flops_by_class: tuple[tuple[str, float], ...] = ()
    attn_full_flops_per_cell: float = 0.0  # attention FLOPs per prompt token per position attended (full layers)
    attn_swa_flops_per_cell: float = 0.0  # the same, sliding-window layers
    layers: int = 0
    kv_heads_full: float = 0.0  # K/V heads per cell of depth of its full-attention layers (summed over layers)
    kv_heads_swa: float = 0.0  # the same of its sliding-window layers

    def kv_bytes(self, depth: float) -> float:
        """K/V bytes a token reads here at `depth` cells (sliding-window layers read at most their window)."""
        return self.kv_full_bytes_per_cell * depth + self.kv_swa_bytes_per_cell * min(depth, self.swa_window)

    def attn_flops(self, positions: float) -> float:
        """Attention FLOPs of one prompt token attending to `positions` earlier cells."""
        return (self.attn_full_flops_per_cell * positions
                + self.attn_swa_flops_per_cell * min(positions, self.swa_window))

    def kv_head_cells(self, depth: float) -> float:
        """K/V head-cells a generated token attends here at `depth` (what the CPU's attention costs by)."""
        return self.kv_heads_full * depth + self.kv_heads_swa * min(depth, self.swa_window)

    def read_bytes(self, depth: float) -> float:
        return self.weight_bytes + self.kv_bytes(depth)


@dataclass(frozen=True)
class Traffic:
    """The per-device work of one request under a plan: what the speed model divides by the device rates."""

    devices: tuple[DeviceTraffic, ...]
    host_copy_bytes: float = 0.0  # host weights copied to the GPU per prompt ubatch (0 without GPU or < 32)
    n_ubatch: int = 512
    kv_pair: str = "f16/f16"  # the K/V cache types ("q8_0/q8_0"): attention's cost on a CPU depends on them
    n_layer: int = 0
    moe_share: float = 1.0
    notes: tuple[str, ...] = field(default_factory=tuple)
    # the host's layers' attention in a prompt batch runs on the first GPU (K/V offloaded, i.e. no -nkvo): see
    # the module's docstring
    host_attn_offloaded: bool = False
    flash_attn: bool = True  # as the plan resolves -fa (auto: on where every device runs it)

    def device(self, name: str) -> DeviceTraffic | None:
        return next((d for d in self.devices if d.name == name), None)

    @property
    def gpu_names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.devices if d.name != HOST)

    def read_bytes(self, depth: int) -> dict[str, float]:
        """Bytes each device reads per generated token at `depth`."""
        return {d.name: d.read_bytes(depth) for d in self.devices}


def _kv_type(args: Any, which: str) -> str:
    return str(getattr(args, f"cache_type_{which}", "f16") or "f16").upper()


def gpus_of_plan(plan: MemoryPlan) -> list[PlanDevice]:
    """The GPUs a plan was made for, rebuilt from its devices (names, backends, memory, shared pools)."""
    return [PlanDevice(d.name, d.backend, d.capacity_mib, d.available_mib, pool=d.pool) for d in plan.devices
            if d.name != HOST]


def traffic(model: Any, plan: MemoryPlan, gpus: list[PlanDevice] | tuple[PlanDevice, ...] | None = None,
            cpu_flags: tuple[str, ...] | frozenset[str] = ()) -> Traffic:
    """Bytes read per generated token, FLOPs per prompt token and host->GPU copies per device of `plan` (made
    for `gpus`; None: the plan's own devices)."""
    if gpus is None:
        gpus = gpus_of_plan(plan)
    view = _view(model)
    args = plan.args
    share = (view.n_expert_used / view.n_expert) if view.n_expert and view.n_expert_used else 1.0
    placements = place_tensors(model, args, gpus, cpu_flags)
    by_name = {t.name: t for t in view.tensors}
    names = [d.name for d in plan.devices]
    gpu_names = [n for n in names if n != HOST]
    ts = [float(x) for x in (args.tensor_split or ())][:len(gpu_names)]
    if len(ts) < len(gpu_names) or not any(ts):
        ts = [1.0] * len(gpu_names)
    weights = dict.fromkeys(names, 0.0)
    flops = dict.fromkeys(names, 0.0)
    classes: dict[str, dict[str, float]] = {n: {} for n in names}
    host_copy = 0.0
    for p in placements:
        t = by_name.get(p.name)
        tied_head = p.name == "output.weight (tied)"
        if t is None and not tied_head:
            continue
        if t is not None and t.kind == "input":
            if not (view.tied_output and t.name == "token_embd.weight" and p.device != HOST):
                continue  # a row lookup; a tied head on the host is this same tensor (see below)
        head = tied_head or (t is not None and t.kind == "output")
        n_bytes = float(p.n_bytes) * (share if "_exps" in p.name else 1.0)
        elements = 0.0
        if t is not None and t.matmul and not head:
            n = 1.0
            for dim in t.shape:
                n *= dim
            elements = n * (share if "_exps" in t.name else 1.0)
        if p.buffer.endswith("_Split"):
            for g, part in zip(gpu_names, ts, strict=False):
                weights[g] += n_bytes * part / sum(ts)
                flops[g] += 2 * elements * part / sum(ts)
            continue
        dev = p.device if p.device in weights else HOST
        weights[dev] += n_bytes
        flops[dev] += 2 * elements
        if elements:
            kind = "plain" if dev != HOST else (
                "experts" if "_exps" in p.name else "repack" if p.buffer == "CPU_REPACK" else "plain")
            classes[dev][kind] = classes[dev].get(kind, 0.0) + 2 * elements
        if dev == HOST and gpu_names and t is not None and t.matmul and not head:
            host_copy += float(p.n_bytes)  # a large batch uses (nearly) every expert: all of them are copied
    if view.tied_output:
        # the head of a tied model on the host reads the embedding matrix in full (placed once, as "input")
        out_dev = _output_device(placements)
        if out_dev == HOST and not any(p.name == "output.weight (tied)" for p in placements):
            emb = by_name.get("token_embd.weight")
            if emb is not None:
                weights[HOST] += float(emb.n_bytes)
    kv_dev = _kv_devices(view, plan, gpus)
    type_k, type_v = _kv_type(args, "k"), _kv_type(args, "v")
    kv_full = dict.fromkeys(names, 0.0)
    kv_swa = dict.fromkeys(names, 0.0)
    attn_full = dict.fromkeys(names, 0.0)
    attn_swa = dict.fromkeys(names, 0.0)
    heads_full = dict.fromkeys(names, 0.0)
    heads_swa = dict.fromkeys(names, 0.0)
    for il in range(view.n_layer):
        if view.recurrent[il]:
            continue
        dev = kv_dev[il] if kv_dev[il] in kv_full else HOST
        hkv = view.n_head_kv[il]
        per_cell = row_size(type_k, view.k_len[il] * hkv) + (0 if view.is_mla else row_size(type_v, view.v_len[il] * hkv))
        attn = 4.0 * view.n_head[il] * max(view.k_len[il], view.v_len[il])
        if view.is_swa[il] and view.n_swa:
            kv_swa[dev] += per_cell
            attn_swa[dev] += attn
            heads_swa[dev] += hkv
        else:
            kv_full[dev] += per_cell
            attn_full[dev] += attn
            heads_full[dev] += hkv
    layer_count = {d.name: d.layers for d in plan.devices}
    devices = tuple(DeviceTraffic(n, weights[n], kv_full[n], kv_swa[n], view.n_swa, flops[n],
                                  tuple(sorted(classes[n].items())), attn_full[n], attn_swa[n],
                                  layer_count.get(n, 0), heads_full[n], heads_swa[n]) for n in names)
    n_ubatch = int(getattr(args, "n_ubatch", 512) or 512)
    notes = []
    if host_copy and n_ubatch < OFFLOAD_MIN_BATCH:
        host_copy = 0.0
        notes.append(f"-ub {n_ubatch} is below {OFFLOAD_MIN_BATCH}: prompt batches compute where the weights are")
    return Traffic(devices, host_copy, n_ubatch, f"{type_k.lower()}/{type_v.lower()}", view.n_layer, share,
                   tuple(notes), host_attn_offloaded=bool(gpu_names) and not plan.args.no_kv_offload,
                   flash_attn=bool(plan.flash_attn))


def _output_device(placements: list[Any]) -> str:
    for p in placements:
        if p.name in ("output.weight", "output.weight (tied)"):
            return str(p.device)
    return HOST


def _kv_devices(view: Any, plan: MemoryPlan, gpus: list[PlanDevice] | tuple[PlanDevice, ...]) -> list[str]:
    """The device of each layer's K/V cache (where its attention runs): its layer's device, the host with -nkvo."""
    layer_dev, _ = _layer_devices(view, plan.args, _model_devices(plan.args, list(gpus)))
    if plan.args.no_kv_offload:
        return [HOST] * len(layer_dev)
    return layer_dev
