"""The outputs of a memory plan and how one is assembled from placement and sizing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llm_tuner.core import flags
from llm_tuner.core.memory.args import PlacementArgs, PlanDevice
from llm_tuner.core.memory.constants import (
    DRAFT_HOST_BYTES_PER_TOKEN,
    DRIVER_RESERVED_MIB,
    FIT_TARGET_MIB,
    HOST_OVERHEAD_MIB,
    MIB,
    RUNTIME_BEYOND_LISTING_MIB,
    SHARED_POOL_EXTRA_MIB,
    runtime_overhead_mib,
    runtime_overhead_note,
)
from llm_tuner.core.memory.model_view import _ModelView, _view
from llm_tuner.core.memory.placement import _layer_devices, _model_devices, _place, _weights_by_buffer
from llm_tuner.core.memory.sizing import (
    _NO_MIXED_BATCH,
    _compute,
    _compute_mtp,
    _flash_attn,
    _kv,
    _n_ctx,
    pipeline_parallel_on,
)

# ------------------------------------------------------------------------------------------------
# outputs
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceMemory:
    """One device's share of the plan (MiB). Host is the entry named 'Host'."""

    name: str
    backend: str
    model_mib: float
    kv_mib: float
    compute_mib: float
    output_mib: float
    overhead_mib: float
    capacity_mib: int | None
    available_mib: int | None
    layers: int = 0
    buffers: dict[str, float] = field(default_factory=dict)  # llama.cpp buffer name -> MiB, per kind
    hypothetical: bool = False
    runtime_in_free: bool = False  # available_mib already lacks the runtime overhead (see PlanDevice)
    fit_model_mib: float | None = None  # weights as llama.cpp's fit counts them (tensor sizes, no CPU_REPACK)
    # Of model_mib, the weights read from a file mapping (CPU_Mapped under -lm auto/mmap, not locked): the
    # kernel keeps them in its page cache and may evict them under pressure (then they are read again from
    # disk), so they need not all be resident. -lm mmap+mlock locks them; -lm none/mlock/dio allocates them.
    mapped_mib: float = 0.0
    pool: str | None = None  # the card's memory pool (PlanDevice.pool); devices sharing one are one GPU
    # Host only: what llama-server's prompt cache may grow to while serving (--cache-ram, default 8192 MiB; -1
    # no size limit: up to n_ctx tokens of cached states, about the KV size), allocated as prompts are cached,
    # not at start: in the total, not in what must be resident to start (`resident_mib`, the fit verdict)
    prompt_cache_mib: float = 0.0

    @property
    def total_mib(self) -> float:
        """Everything the device may hold: allocated buffers, runtime, (host) mapped weights and prompt
        cache."""
        return (self.model_mib + self.kv_mib + self.compute_mib + self.output_mib + self.overhead_mib
                + self.prompt_cache_mib)

    @property
    def resident_mib(self) -> float:
        """What must be in memory to start: the total less the evictable mapped weights and the prompt cache
        (which grows later)."""
        return self.total_mib - self.mapped_mib - self.prompt_cache_mib

    @property
    def cache_room_mib(self) -> float | None:
        """How much of the prompt cache's ceiling the budget leaves room for (None: budget unknown)."""
        h = self.headroom_mib
        return None if h is None else max(0.0, min(self.prompt_cache_mib, h))

    @property
    def budget_mib(self) -> float | None:
        """What the plan is compared with: free memory when known (plus the runtime overhead when that free
        figure was measured with a runtime already in place), else capacity."""
        if self.available_mib is not None:
            if not self.runtime_in_free:
                return self.available_mib
            beyond = RUNTIME_BEYOND_LISTING_MIB.get(self.backend)
            return self.available_mib + (self.overhead_mib - beyond if beyond is not None else self.overhead_mib)
        if self.capacity_mib is None or self.name == "Host":
            return self.capacity_mib
        return max(0, self.capacity_mib - DRIVER_RESERVED_MIB.get(self.backend, 0))  # never below nothing

    @property
    def reserved_all(self) -> bool:
        """A (planned) card whose whole capacity goes to what its driver reserves: nothing can be placed on
        it."""
        return (self.available_mib is None and self.capacity_mib is not None and self.name != "Host"
                and self.capacity_mib <= DRIVER_RESERVED_MIB.get(self.backend, 0))

    @property
    def headroom_mib(self) -> float | None:
        """Budget less what must be resident (mapped weights can live in the page cache, see mapped_mib)."""
        b = self.budget_mib
        return None if b is None else b - self.resident_mib

    @property
    def mapped_cached_mib(self) -> float | None:
        """How much of the mapped weights the budget leaves room for in the page cache (None: unknown)."""
        h = self.headroom_mib
        return None if h is None else max(0.0, min(self.mapped_mib, h))

    @property
    def fits(self) -> bool | None:
        h = self.headroom_mib
        return None if h is None else h >= 0

    def to_json(self) -> dict[str, Any]:
        def r(x: float) -> float:
            return round(x, 1)

        return {"name": self.name, "model_mib": r(self.model_mib), "kv_mib": r(self.kv_mib),
                "compute_mib": r(self.compute_mib), "output_mib": r(self.output_mib),
                "overhead_mib": r(self.overhead_mib), "total_mib": r(self.total_mib),
                "mapped_mib": r(self.mapped_mib), "resident_mib": r(self.resident_mib),
                "prompt_cache_mib": r(self.prompt_cache_mib),
                "capacity_mib": self.capacity_mib, "available_mib": self.available_mib,
                "fits": self.fits}


@dataclass(frozen=True)
class SharedPool:
    """Devices of one physical GPU under two backends (`-dev CUDA0,Vulkan0` on one card): each takes its own
    buffers (the per-device figures stand), but they draw on ONE pool of free memory, so the fit is their sum
    (with one runtime, see SHARED_POOL_EXTRA_MIB) against that card's budget, not each against all of it."""

    names: tuple[str, ...]
    description: str
    used_mib: float  # what must be resident on the card: every member's buffers + the shared runtime
    # the card's free memory (plus runtime already out of it), as DeviceMemory.budget_mib
    budget_mib: float | None

    @property
    def fits(self) -> bool | None:
        return None if self.budget_mib is None else self.used_mib <= self.budget_mib

    def text(self) -> str:
        """'CUDA0 + Vulkan0 share one NVIDIA H200: 61.2 of 139.3 GiB'."""
        card = f"one {self.description}" if self.description else "one GPU"
        of = f" of {self.budget_mib / 1024:.1f} GiB" if self.budget_mib is not None else ""
        short = (f" ({self.used_mib - self.budget_mib:.0f} MiB short)"
                 if self.fits is False and self.budget_mib is not None else "")
        return f"{' + '.join(self.names)} share {card}: {self.used_mib / 1024:.1f}{of}{short}"


def _shared_pools(devices: list[DeviceMemory], devs: list[PlanDevice]) -> tuple[SharedPool, ...]:
    by_pool: dict[str, list[tuple[DeviceMemory, PlanDevice]]] = {}
    for dm, pd in zip(devices, devs, strict=False):
        if pd.pool is not None:
            by_pool.setdefault(pd.pool, []).append((dm, pd))
    out = []
    for members in by_pool.values():
        if len(members) < 2:
            continue
        runtime = max(dm.overhead_mib for dm, _ in members) + SHARED_POOL_EXTRA_MIB
        used = sum(dm.resident_mib - dm.overhead_mib for dm, _ in members) + runtime
        budgets = [b for dm, _ in members if (b := dm.budget_mib) is not None]
        out.append(SharedPool(tuple(dm.name for dm, _ in members), members[0][1].description, used,
                              max(budgets) if budgets else None))
    return tuple(out)


@dataclass(frozen=True)
class MemoryPlan:
    """The plan: GPUs in device order, then Host; what llama.cpp would run with; warnings."""

    devices: tuple[DeviceMemory, ...]
    warnings: tuple[str, ...]
    args: PlacementArgs  # after fit (what llama.cpp would actually use)
    n_ctx: int
    n_ctx_seq: int
    n_seq_max: int
    kv_unified: bool
    flash_attn: bool
    n_gpu_layers: int  # layers (incl. output) on GPUs
    n_layers_total: int  # n_layer_all + 1
    kv_cells: tuple[tuple[str, int, int], ...] = ()  # (cache, cells, layers)
    fit_changes: tuple[str, ...] = ()
    pools: tuple[SharedPool, ...] = ()  # devices that share one card's memory (two backends on one GPU)
    # llama.cpp's pipeline parallelism (src/llama-context.cpp:432-437, sizing.pipeline_parallel_on): on or
    # off; None with one device (it never applies). core.memory.pipeline says why and what it changes in
    # memory.
    pipeline_parallel: bool | None = None

    @property
    def fits(self) -> bool | None:
        """False when a device or shared pool is short; None (no verdict) when none is but a device's size is
        unknown (a -dev name not on this machine, a host not yet read); else True."""
        verdicts = [d.fits for d in self.devices] + [p.fits for p in self.pools]
        return False if False in verdicts else (None if None in verdicts else True)

    def device(self, name: str) -> DeviceMemory | None:
        return next((d for d in self.devices if d.name == name), None)

    def to_json(self) -> dict[str, Any]:
        return {"devices": [d.to_json() for d in self.devices], "warnings": list(self.warnings),
                "n_ctx": self.n_ctx, "n_ctx_seq": self.n_ctx_seq, "n_parallel": self.n_seq_max,
                "kv_unified": self.kv_unified, "flash_attn": self.flash_attn,
                "n_gpu_layers": self.n_gpu_layers, "fit_changes": list(self.fit_changes),
                "pipeline_parallel": self.pipeline_parallel,
                "shared_pools": [{"devices": list(p.names), "used_mib": round(p.used_mib, 1),
                                  "budget_mib": p.budget_mib, "fits": p.fits} for p in self.pools]}


@dataclass(frozen=True)
class Calibration:
    """Learnt from a llama.cpp check: measured/estimated compute ratio per backend (1.0 = none)."""

    compute_scale: dict[str, float] = field(default_factory=dict)
    overhead_mib: dict[str, float] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------
# the plan
# ------------------------------------------------------------------------------------------------


def _raw_plan(view: _ModelView, args: PlacementArgs, gpus: list[PlanDevice], host: PlanDevice,
              flags: frozenset[str], calibration: Calibration | None,
              draft: tuple[Any, PlacementArgs] | None, pp: bool | None = None) -> tuple[MemoryPlan, list[PlanDevice]]:
    """The plan without fit. `pp` forces pipeline parallelism on or off (None: llama.cpp's rule)."""
    devs = _model_devices(args, gpus)
    layer_dev, n_gpu = _layer_devices(view, args, devs)
    placements = _place(view, args, devs, layer_dev, flags)
    bufs, weights, fit_weights = _weights_by_buffer(view, placements, devs, args)
    fa = _flash_attn(view, args, devs)
    kv, caches, kv_cells, swa_cells, kv_host_layer = _kv(view, args, layer_dev, fa)
    compute = _compute(view, args, layer_dev, placements, fa, kv_cells, swa_cells, devs, kv_host_layer, pp)
    pipeline = (pipeline_parallel_on(args, layer_dev, devs) if pp is None else pp) if len(devs) > 1 else None
    n_ctx, n_ctx_seq = _n_ctx(view, args)
    n_seq = args.n_seq_max
    out_b = (view.n_vocab + (view.n_embd if args.embeddings else 0)) * n_seq * 4 / MIB
    extra_model: dict[str, float] = {}
    extra_kv: dict[str, float] = {}
    extra_compute: dict[str, float] = {}
    warnings: list[str] = []
    draft_mapped = draft_host_mib = 0.0
    # MTP context (--spec-type draft-mtp): the nextn block's own KV (draft cache types), output buffer
    # and compute (one attention block; the FFN only runs on the output rows), on the block's device
    if args.spec_mtp:
        if view.n_nextn == 0:
            warnings.append("--spec-type draft-mtp: this model has no MTP (nextn) layers; llama.cpp will refuse it.")
        else:
            mkv, mcaches, mcells, mswa, _ = _kv(view, args, layer_dev, fa, mtp_ctx=True,
                                               type_k=args.draft_cache_type_k, type_v=args.draft_cache_type_v)
            for name, v in mkv.items():
                extra_kv[name] = extra_kv.get(name, 0.0) + v
            mdev = layer_dev[view.n_layer] if view.n_layer < len(layer_dev) - 1 else layer_dev[-1]
            extra_compute[mdev] = extra_compute.get(mdev, 0.0) + _compute_mtp(view, args, fa, mcells) / MIB
            if any(d.backend != "CPU" for d in devs):
                # its own graph inputs (mask, embedding paths) live in the host buffer, as for the main
                # context (see _compute_gpu)
                t_mtp = min(n_ctx, args.n_ubatch, args.n_batch)
                n_paths = 1 if view.arch in _NO_MIXED_BATCH else 2
                host_mtp = mcells * t_mtp * (2 if fa else 4) + n_paths * view.n_embd * t_mtp * 4
                extra_compute["Host"] = extra_compute.get("Host", 0.0) + host_mtp / MIB
            out_b += view.n_vocab * n_seq * 4 / MIB
    if draft is not None:
        dmodel, dargs = draft
        dview = _view(dmodel)
        ddevs = _model_devices(dargs, gpus)
        dlayer_dev, _ = _layer_devices(dview, dargs, ddevs)
        dplace = _place(dview, dargs, ddevs, dlayer_dev, flags)
        dbufs, dweights, _ = _weights_by_buffer(dview, dplace, ddevs, dargs)
        draft_mapped = dbufs.get("Host", {}).get("CPU_Mapped", 0.0)
        dfa = _flash_attn(dview, dargs, ddevs)
        dkv, _, dcells, dswa, dhost = _kv(dview, dargs, dlayer_dev, dfa)
        dcomp = _compute(dview, dargs, dlayer_dev, dplace, dfa, dcells, dswa, ddevs, dhost)
        for src, dst in ((dweights, extra_model), (dkv, extra_kv), (dcomp, extra_compute)):
            for name, v in src.items():
                dst[name] = dst.get(name, 0.0) + v
        out_b += dview.n_vocab * n_seq * 4 / MIB
        # its vocabulary and metadata (heap)
        draft_host_mib = dview.n_vocab * DRAFT_HOST_BYTES_PER_TOKEN / MIB
    scale = (calibration.compute_scale if calibration else {}) or {}
    over = (calibration.overhead_mib if calibration else {}) or {}
    devices: list[DeviceMemory] = []
    for d in devs:
        backend = d.backend
        comp = compute.get(d.name, 0.0) * scale.get(backend, 1.0) + extra_compute.get(d.name, 0.0)
        # a device the model does not use still gets llama.cpp's runtime context (every listed device is
        # initialised), so its overhead counts even with nothing placed on it
        overhead = over.get(backend, runtime_overhead_mib(backend, d.description))
        note = runtime_overhead_note(backend, d.description)
        if note and note not in warnings:
            warnings.append(note)
        devices.append(DeviceMemory(
            name=d.name, backend=backend, model_mib=weights.get(d.name, 0.0) + extra_model.get(d.name, 0.0),
            kv_mib=kv.get(d.name, 0.0) + extra_kv.get(d.name, 0.0), compute_mib=comp, output_mib=0.0,
            overhead_mib=float(overhead), capacity_mib=d.capacity_mib, available_mib=d.free_mib,
            layers=sum(1 for x in layer_dev if x == d.name), buffers=dict(bufs.get(d.name, {})),
            hypothetical=d.hypothetical, runtime_in_free=d.free_includes_runtime and d.free_mib is not None,
            fit_model_mib=fit_weights.get(d.name, 0.0) + extra_model.get(d.name, 0.0), pool=d.pool))
    pools = _shared_pools(devices, devs)
    hcomp = compute.get("Host", 0.0) * scale.get("CPU", 1.0) + extra_compute.get("Host", 0.0)
    devices.append(DeviceMemory(
        name="Host", backend="CPU", model_mib=weights.get("Host", 0.0) + extra_model.get("Host", 0.0),
        kv_mib=kv.get("Host", 0.0) + extra_kv.get("Host", 0.0), compute_mib=hcomp, output_mib=out_b,
        overhead_mib=float(over.get("Host", HOST_OVERHEAD_MIB)) + draft_host_mib, capacity_mib=host.capacity_mib,
        available_mib=host.free_mib, layers=sum(1 for x in layer_dev if x == "Host"),
        buffers=dict(bufs.get("Host", {})), hypothetical=host.hypothetical,
        fit_model_mib=fit_weights.get("Host", 0.0) + extra_model.get("Host", 0.0),
        mapped_mib=(bufs.get("Host", {}).get("CPU_Mapped", 0.0) + draft_mapped) if args.load_mode in ("auto", "mmap")
        else 0.0, prompt_cache_mib=_prompt_cache_mib(args, kv)))
    plan = MemoryPlan(devices=tuple(devices), warnings=tuple(warnings), args=args, n_ctx=n_ctx,
                      n_ctx_seq=n_ctx_seq, n_seq_max=n_seq, kv_unified=args.unified, flash_attn=fa,
                      n_gpu_layers=n_gpu, n_layers_total=view.n_layer_all + 1, kv_cells=tuple(caches),
                      pools=pools, pipeline_parallel=pipeline)
    return plan, devs


def _prompt_cache_mib(args: PlacementArgs, kv: dict[str, float]) -> float:
    """The prompt cache's ceiling in host RAM (tools/server/server-task.h server_prompt_cache: --cache-ram
    MiB, 0 = off; -1 = no size limit, only n_ctx tokens of states: about the main KV cache's size)."""
    if args.cache_ram_mib < 0:
        return float(sum(kv.values()))
    return float(args.cache_ram_mib)


def _targets(args: PlacementArgs, devs: list[PlanDevice]) -> dict[str, int]:
    t = list(args.fit_target_mib) or [FIT_TARGET_MIB]
    if len(t) == 1:
        t = t * len(devs)
    return {d.name: (t[i] if i < len(t) else t[-1]) for i, d in enumerate(devs)}


def _fit_use_mib(d: DeviceMemory) -> float:
    """What llama.cpp's fit step counts for a device (common/fit.cpp, memory breakdown of a no_alloc load).

    Weights, KV and compute buffers; not the output buffer, not CPU_REPACK (not a host buffer type to
    it), and no runtime overhead where free memory was measured (it is already taken from "free").
    Planned devices (capacity only) keep the runtime overhead, as a real device would lose it.
    """
    model = d.fit_model_mib if d.fit_model_mib is not None else d.model_mib - d.buffers.get("CPU_REPACK", 0.0)
    use = model + d.kv_mib + d.compute_mib
    if d.name != "Host":
        use += d.overhead_mib  # budget_mib adds it back where free memory already lacks it
    return use


def _fits_with_margin(plan: MemoryPlan, targets: dict[str, int], *, host_too: bool = False,
                      fit_accounting: bool = False) -> bool:
    for d in plan.devices:
        if d.name == "Host" and not host_too:
            continue
        b = d.budget_mib
        if b is None:
            continue
        use = _fit_use_mib(d) if fit_accounting else d.resident_mib  # mapped weights may be evicted
        if use > b - targets.get(d.name, 0):
            return False
    return True


def _mapped_warnings(plan: MemoryPlan) -> list[str]:
    """What mmap means for host memory: mapped weights beyond the page cache left are re-read from disk."""
    host = plan.device("Host")
    if host is None or host.fits is False:
        return []
    mode = plan.args.load_mode
    if host.mapped_mib and host.mapped_cached_mib is not None and host.mapped_cached_mib < host.mapped_mib:
        return [f"Host: {host.mapped_mib:.0f} MiB of weights are mapped from the model file (-lm {mode}); "
                f"{host.resident_mib:.0f} MiB must stay resident, which leaves page cache for "
                f"{host.mapped_cached_mib:.0f} MiB of them: the rest is read again from disk while it runs "
                "(slow, not a failure). -lm mmap+mlock or -lm none would need all of it resident "
                f"({host.resident_mib + host.mapped_mib:.0f} MiB)"]
    return []


def _warnings(view: _ModelView, plan: MemoryPlan, devs: list[PlanDevice]) -> list[str]:
    w = []
    a = plan.args
    for d in plan.devices:
        if d.reserved_all:
            w.append(f"{d.name}: its {d.capacity_mib} MiB are less than the {d.backend} driver reserves "
                     f"({DRIVER_RESERVED_MIB.get(d.backend, 0)} MiB): nothing can be placed on it. Plan a "
                     "larger card, or run without it (-dev none: the CPU alone)")
        elif d.fits is False and d.headroom_mib is not None:
            w.append(f"{d.name}: needs {d.resident_mib:.0f} MiB but has {d.budget_mib} MiB "
                     f"({-d.headroom_mib:.0f} MiB short)" + (
                         f"; besides that, {d.mapped_mib:.0f} MiB of weights are mapped from the file (page cache)"
                         if d.mapped_mib else ""))
    w.extend(p.text() for p in plan.pools)  # said whether or not it fits: the per-device rows cannot show it
    w.extend(_mapped_warnings(plan))
    host = plan.device("Host")
    if (host is not None and host.cache_room_mib is not None and host.headroom_mib is not None
            and host.headroom_mib >= 0 and host.cache_room_mib < host.prompt_cache_mib):
        w.append(f"Host: the prompt cache may grow to {host.prompt_cache_mib:.0f} MiB of RAM while serving "
                 f"(--cache-ram {a.cache_ram_mib}{', no size limit' if a.cache_ram_mib < 0 else ''}); only "
                 f"{host.headroom_mib:.0f} MiB are left beside what must be resident")
    if a.cache_type_v.lower() not in ("f16", "f32", "bf16") and a.flash_attn == "off":
        w.append("quantized V cache needs flash attention: llama.cpp refuses -ctv "
                 f"{a.cache_type_v} with -fa off")
    if a.cache_type_k.lower() != a.cache_type_v.lower():
        w.append(f"K and V cache types differ ({a.cache_type_k}/{a.cache_type_v}): slow fallback kernels")
    if view.n_nextn and not (a.spec_mtp or a.load_mtp):
        w.append(f"{view.n_nextn} MTP layer(s) are not loaded (add --spec-type draft-mtp to use them)")
    if plan.n_ctx_seq > view.n_ctx_train:
        w.append(f"context per sequence {plan.n_ctx_seq} is beyond the trained {view.n_ctx_train}")
    for u in a.unknown:
        removed = flags.REMOVED.get(flags.normalize(u))
        if removed is not None:
            w.append(f"{u} was removed from llama-server; use {removed.replacement}")
        elif u.startswith("-") and not u.lstrip("-").replace(".", "").isdigit():
            w.append(f"{u} is not a llama.cpp flag this plan knows (a fork's?): its KV figure assumes the default "
                     f"type ({a.cache_type_k}/{a.cache_type_v}) and upstream's sizes; measure to confirm")
    if a.split_mode == "row" and len(devs) > 1 and any(d.backend != "SYCL" for d in devs):
        w.append("-sm row: in this llama.cpp only SYCL has row-split buffers; with "
                 f"{', '.join(sorted({d.backend for d in devs}))} the load fails ('does not support split "
                 "buffers'). Use -sm layer (or -sm tensor)")
    if a.split_mode == "tensor":
        w.append("-sm tensor (experimental, needs flash attention): estimated as every layer's weights and "
                 "KV spread over the GPUs by -ts; fit does not run for it")
    known = {d.name for d in devs}
    odd = sorted({b for _p, b in a.overrides if not b.upper().startswith("CPU") and b not in known})
    if odd:
        w.append(f"-ot sends tensors to {', '.join(odd)}, which is not among the planned devices: "
                 "those weights are not counted anywhere in this plan")
    gpus_missing = [n for n in (a.devices or ()) if n not in {d.name for d in devs}]
    if gpus_missing:
        w.append(f"unknown device(s): {', '.join(gpus_missing)}")
    return w
