"""The placement frontier: for a model that does not fit its GPUs, the placements that do, per K/V type.

Where a model is bigger than the GPUs, what decides generation speed is how many bytes each token reads from
host memory: the CPU's share of the weights (and of the KV cache). A smaller K/V type frees GPU memory that
more weights can use, so K/V type and placement are chosen together, never one at llama.cpp's default of the
other. For each K/V type the memory plan (core.memory) finds, in each of these styles, the placement that keeps
the most on the GPUs while every GPU keeps `margin_mib` free (the free memory llama.cpp itself sees):

- ``layers``: ``-ngl N``, the most layers that fit (the rest, with their KV cache, compute on the CPU);
- ``ffn``: every layer on the GPUs, the FFN weights of the fewest blocks (spread evenly) on the CPU: attention
  and the whole KV cache stay on the GPU (field notes, case B: "every third block's FFN");
- ``experts`` (MoE): every layer on the GPUs, the experts of the first N blocks on the CPU (``--n-cpu-moe N``);
- ``experts_last`` (MoE): the experts of the *last* N blocks on the CPU (an ``-ot`` rule): the same bytes per
  generated token as the first N, so the plan ranks them together; ik_llama.cpp measured the last faster for
  prefill, so they are raced where prompt processing counts (core.tune.proposers.PREFILL_STYLES);
- ``fit``: llama.cpp's own fit step with ``-fitt`` at the margin (it places layers, or experts, itself).

A tune knob's value names one of them symbolically, ``"<kv>:<style>"`` (``"q8_0:ffn"``); `resolve` turns it into
the command-line fragment at the margin in force, so a margin learned from a failed start (out of memory at
load or at the first request) moves every later candidate without changing what the knob means. Candidates are
ranked by the bytes a generated token reads from host memory (`Placement.host_read_mib`): fewer is faster on
every machine, since host memory is an order of magnitude slower than a GPU's.

Pure: the plan's inputs (model, devices, host) come from the caller.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from llm_tuner.core import flags
from llm_tuner.core.memory import MemoryPlan, PlanDevice, parse_server_args, plan_memory
from llm_tuner.core.memory.overrides import rule_experts_blocks
from llm_tuner.core.speed import HOST, traffic

KV_STYLES_DENSE = ("ffn", "layers", "fit")
KV_STYLES_MOE = ("experts", "experts_last", "layers", "fit")
# Flags a placement value sets; the base's own values of these are replaced (K/V types are chosen with it).
PLACEMENT_KEYS = ("gpu_layers", "override_tensor", "cpu_moe", "n_cpu_moe", "n_cpu_ffn", "fit", "fit_target_mib",
                  "cache_type_k", "cache_type_v")
OOM_WORDS = ("out of memory", "failed to allocate", "cudamalloc failed", "erroroutofdevicememory",
             "unable to allocate", "failed to create context", "outofdevicememory")
# Free memory a placement keeps per GPU at the start of a tune (the tune's --headroom); raised on out-of-memory.
DEFAULT_MARGIN_MIB = 128
MAX_MARGIN_MIB = 4096


@dataclass(frozen=True)
class Placement:
    """One symbolic value resolved at a margin: its command-line fragment and what the plan says of it.

    `host_read_mib`: weights (experts at the share a token uses) and KV cache (filled to the objective's
    context) a generated token reads from host memory; `min_headroom_mib` the least free memory a GPU keeps;
    `fits` whether every GPU keeps the margin (and the host holds its share)."""

    value: str
    argv: tuple[str, ...]
    fits: bool
    reason: str
    host_read_mib: float = math.inf
    min_headroom_mib: float | None = None
    gpu_layers: int = 0
    n_layers: int = 0
    margin_mib: int = 0
    gpu_use_mib: tuple[tuple[str, float, float], ...] = ()  # (device, resident MiB, budget MiB) per GPU

    def text(self) -> str:
        """'q8_0 K/V, FFN of 9 of 36 blocks on the CPU: 0.41 GiB read from host per token; CUDA0 keeps 131 MiB'"""
        return f"{describe_placement(self.value)}: {self.reason}"


def split_value(value: str) -> tuple[str, str]:
    kv, _, style = value.partition(":")
    return kv, style or "layers"


def describe_placement(value: str | None) -> str:
    """A placement value in words ('q8_0 K/V · FFN on the CPU'); None is the base's own placement."""
    if value is None:
        return "the base's placement and K/V type"
    kv, style = split_value(value)
    short = {"layers": "most layers on the GPU", "ffn": "FFN blocks on the CPU", "experts": "experts on the CPU",
             "experts_last": "experts of the last blocks on the CPU", "fit": "llama.cpp fit"}.get(style, style)
    return f"{kv} K/V · {short}"


def is_out_of_memory(reason: str | None) -> bool:
    """Whether a failed start's reason (the server's log tail or error) is running out of device memory."""
    text = (reason or "").lower()
    return any(w in text for w in OOM_WORDS)


def next_margin(margin_mib: int, failed: Placement | None = None) -> int:
    """The margin after a placement at `margin_mib` ran out of memory: doubled, and above what the failed one
    kept (its plan's least free memory), at most MAX_MARGIN_MIB."""
    kept = int(failed.min_headroom_mib) if failed is not None and failed.min_headroom_mib is not None else 0
    return min(MAX_MARGIN_MIB, max(2 * max(64, margin_mib), kept + 64))


def strip_placement(argv: Sequence[str]) -> list[str]:
    """The argv without the flags a placement value sets."""
    return flags.without(list(argv), *PLACEMENT_KEYS)


def _frag(kv: str, style: str, n: int, n_layer: int, n_all: int, margin: int) -> list[str]:
    out = [*flags.argv_for("cache_type_k", kv), *flags.argv_for("cache_type_v", kv)]
    if style == "layers":
        return out + flags.argv_for("fit", "off") + flags.argv_for("gpu_layers", str(n))
    if style == "ffn":
        out += flags.argv_for("fit", "off") + flags.argv_for("gpu_layers", str(n_all))
        return out + (flags.argv_for("override_tensor", ffn_rule(spread_blocks(n, n_layer))) if n else [])
    if style == "experts":
        out += flags.argv_for("fit", "off") + flags.argv_for("gpu_layers", str(n_all))
        return out + (flags.argv_for("n_cpu_moe", str(n)) if n else [])
    if style == "experts_last":
        out += flags.argv_for("fit", "off") + flags.argv_for("gpu_layers", str(n_all))
        return out + (flags.argv_for("override_tensor", rule_experts_blocks(n_layer - n, n_layer - 1)) if n else [])
    return out + flags.argv_for("fit_target_mib", str(margin))  # fit: llama.cpp places, at the margin


def spread_blocks(k: int, n_layer: int) -> list[int]:
    """k block numbers spread evenly over n_layer blocks (every third block for k = n_layer / 3)."""
    k = max(0, min(k, n_layer))
    return sorted({(i * n_layer) // k for i in range(k)}) if k else []


def ffn_rule(blocks: Sequence[int]) -> str:
    """The `-ot` rule that puts the FFN weights of these blocks on the CPU."""
    return rf"blk\.({'|'.join(str(b) for b in blocks)})\.ffn_.*=CPU"


class Planner:
    """The memory plan of candidate command lines for one model on one set of devices (pure, cached per argv)."""

    def __init__(self, model: Any, gpus: Sequence[PlanDevice], host: PlanDevice | None, *,
                 cpu_flags: Sequence[str] = (), draft_model: Any = None, fill: float = 0.1) -> None:
        self.model, self.gpus, self.host = model, list(gpus), host
        self.cpu_flags, self.draft = tuple(cpu_flags), draft_model
        self.fill = max(0.0, min(1.0, fill))  # the KV cache's share a token reads (the objective's context)
        self._plans: dict[tuple[str, ...], MemoryPlan] = {}

    def plan(self, argv: Sequence[str]) -> MemoryPlan:
        key = tuple(argv)
        if key not in self._plans:
            self._plans[key] = plan_memory(self.model, parse_server_args(list(argv)), self.gpus, self.host,
                                           cpu_flags=self.cpu_flags, draft_model=self.draft)
        return self._plans[key]

    def host_read_mib(self, argv: Sequence[str]) -> float:
        """MiB a generated token reads from host memory under argv (core.speed: the weights of the blocks on the
        CPU, experts at the share a token uses, the output head if it is there, and the host's K/V cache filled
        to the objective's context)."""
        plan = self.plan(argv)
        host = traffic(self.model, plan, self.gpus, self.cpu_flags).device(HOST)
        return host.read_bytes(self.fill * plan.n_ctx) / 2**20 if host is not None else 0.0

    def headroom(self, argv: Sequence[str]) -> tuple[float | None, bool]:
        """(least free MiB a GPU keeps, whether the host holds its share)."""
        plan = self.plan(argv)
        gpu = [d.headroom_mib for d in plan.devices if d.name != "Host" and d.headroom_mib is not None]
        host = plan.device("Host")
        host_ok = host is None or host.headroom_mib is None or host.headroom_mib >= 0
        return (min(gpu) if gpu else None), host_ok

    def fits(self, argv: Sequence[str], margin: int) -> bool:
        least, host_ok = self.headroom(argv)
        return host_ok and (least is None or least >= margin)


def resolve_placement(planner: Planner, base_argv: Sequence[str], value: str, margin_mib: int) -> Placement:
    """The placement `value` ("<kv>:<style>") at `margin_mib`: the fragment that keeps the most on the GPUs with
    every GPU keeping the margin; `fits` False (with why) when even the least of it does not."""
    kv, style = split_value(value)
    stripped = strip_placement(base_argv)
    rest = list(stripped)
    if style != "fit" and parse_server_args(rest).ctx is None:
        # without -c the base's fit step chooses the context; a placement with fit off keeps that context
        rest += flags.argv_for("ctx_size", str(planner.plan(list(base_argv)).n_ctx))
    base_plan = planner.plan(list(rest))
    n_all = base_plan.n_layers_total
    n_layer = max(1, n_all - 1)

    def argv_of(n: int) -> list[str]:
        return rest + _frag(kv, style, n, n_layer, n_all, margin_mib)

    def ok(n: int) -> bool:
        return planner.fits(argv_of(n), margin_mib)

    if style == "fit":
        n = 0
        argv = argv_of(0)
        least, host_ok = planner.headroom(argv)
        good = host_ok and (least is None or least >= 0)
    elif style == "layers":  # the most layers: largest n that fits (monotone); else its least, to say why
        n = _largest(ok, 0, n_all)
        good = n >= 0
        n = max(n, 0)
        argv = argv_of(n)
    else:  # ffn / experts: the fewest blocks on the CPU that fit; else all of them, to say why
        n = _smallest(ok, 0, n_layer)
        good = n >= 0
        n = n if good else n_layer
        argv = argv_of(n)
    argv_t = tuple(argv)
    frag = tuple(argv_t[len(stripped):])
    plan = planner.plan(argv_t)
    least, _ = planner.headroom(argv_t)
    read = planner.host_read_mib(argv_t)
    on_gpu = plan.n_gpu_layers
    where = {"layers": f"{on_gpu} of {plan.n_layers_total} layers on the GPUs",
             "ffn": f"FFN of {n} of {n_layer} blocks on the CPU",
             "experts": f"experts of the first {n} blocks on the CPU",
             "experts_last": f"experts of the last {n} blocks on the CPU",
             "fit": f"llama.cpp's fit at -fitt {margin_mib}: {on_gpu} of {plan.n_layers_total} layers on the GPUs"
             }.get(style, style)
    use = tuple((d.name, round(d.resident_mib, 1), round(d.budget_mib, 1)) for d in plan.devices
                if d.name != "Host" and d.budget_mib is not None)
    gpus = ", ".join(f"{name} {res:.0f} of {budget:.0f} MiB" for name, res, budget in use)
    if not good:
        return Placement(value, frag, False, f"does not fit with {margin_mib} MiB free per GPU even at its least "
                         f"({where}; {gpus})", read, least, on_gpu, plan.n_layers_total, margin_mib, use)
    reason = (f"{where}; {_size(read)} read from host memory per token; {gpus}"
              + (f", {least:.0f} MiB left" if least is not None else ""))
    return Placement(value, frag, True, reason, read, least, on_gpu, plan.n_layers_total, margin_mib, use)


def _size(mib: float) -> str:
    return f"{mib / 1024:.2f} GiB" if mib >= 1024 else f"{mib:.0f} MiB"


def _largest(ok: Callable[[int], bool], lo: int, hi: int) -> int:
    """The largest n in [lo, hi] with ok(n) (ok monotone: true up to a point), or lo - 1."""
    if not ok(lo):
        return lo - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _smallest(ok: Callable[[int], bool], lo: int, hi: int) -> int:
    """The smallest n in [lo, hi] with ok(n) (ok monotone: false up to a point), or -1."""
    if not ok(hi):
        return -1
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def needs_placement(planner: Planner, base_argv: Sequence[str]) -> bool:
    """Whether the base (as llama.cpp would run it, fit applied) computes any block's weights on the CPU while
    GPUs are there: then placement and K/V type decide the speed together."""
    if not planner.gpus:
        return False
    return planner.host_read_mib(base_argv) > 1.0


def frontier(planner: Planner, base_argv: Sequence[str], kv_types: Sequence[str], margin_mib: int, *,
             styles: Sequence[str] | None = None) -> list[Placement]:
    """Every (K/V type, style) placement at the margin, the ones that fit first, fastest first (fewest MiB read
    from host memory per token, then the most free memory), each distinct placement once."""
    moe = bool(getattr(planner.model, "expert_count", 0))
    styles = tuple(styles or (KV_STYLES_MOE if moe else KV_STYLES_DENSE))
    out: list[Placement] = []
    seen: set[tuple[object, ...]] = set()
    for kv in kv_types:
        for style in styles:
            p = resolve_placement(planner, base_argv, f"{kv}:{style}", margin_mib)
            key = (kv, round(p.host_read_mib, 1), p.gpu_layers, style == "experts_last") if p.fits else (kv, style)
            if key in seen:
                continue
            seen.add(key)
            out.append(p)
    return sorted(out, key=lambda p: (not p.fits, p.host_read_mib, -(p.min_headroom_mib or 0.0)))
