"""Predicted speed of one request from its traffic (core.speed.traffic) and a calibration of the devices.

The model is linear in a handful of *costs* (seconds per GB read, per GFLOP computed, per token), so the same
terms serve the prediction and the fit of a calibration (core.speed.calibrate):

- Generation, per token: a fixed cost (kernel launches, synchronisation, sampling; the CPU's per thread count)
  + Σ over devices of the weight bytes it reads / its read rate + attention over the K/V cache at the depth: on a
  GPU the K/V bytes at its read rate, on the CPU the K/V head-cells attended at a rate of their own per K/V type
  pair (a cost per K/V head and cell, whatever the head size or the query heads sharing it; a quantized cache is
  read with other kernels than f16).
- Prefill, per prompt token: each device's matmul FLOPs / its compute rate (on the CPU by kernel class: repacked
  weights run GEMM kernels, others and MoE experts cost more per FLOP) + attention FLOPs (the CPU's at a rate per
  K/V pair) + the host weights copied to the GPU once per ubatch / the link rate + a fixed cost per ubatch. When
  the host's weights are copied (op offload), the host layers' attention runs on the GPU as well, its K/V cells
  copied over the link (core.speed.traffic).
- Time to first token = the prompt's time + one generated token. The **roofline** is the generation speed the
  devices' *peak* read rates would allow with no fixed cost (peak: a probe's best, NVML's or a vendor's figure).

Scope: one request (one slot); speculative decoding is not predicted. A cost without calibration takes a default
marked as such (and a wider expected error); a device with no rate at all (an RPC device over a network, a GPU
with no known bandwidth) makes the prediction unknown, never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from llm_tuner.core.speed.traffic import HOST, Traffic

GB = 1e9
MCELLS = 1e6  # the unit of the CPU's attention while generating: a million K/V head-cells
# Relative cost of a prefill FLOP on the CPU by kernel class (weights ggml-cpu repacked for its GEMM kernels = 1;
# other matmuls, e.g. Q5_0/Q6_K/Q8_0 on x86, and MoE expert matmuls cost more). Chosen on the pilot session of
# benchmarks/speed_model.py (s1: the grid plain 1-5 x experts 1-6, least maximum prefill error) and checked on
# the second session (s2), both on the lent machine's 16-core Xeon (AVX-512, AMX): another CPU may differ.
CPU_CLASS_COST = {"repack": 1.0, "plain": 5.0, "experts": 6.0}
# Defaults before any calibration (marked "default" where used): host DRAM ~8 GB/s a thread up to ~40 GB/s
# (the recorded H200 host: 39-46 GB/s at 16 threads); ~100 GFLOP/s a thread on repacked weights (the probes of
# benchmarks/speed_model.py sessions 2-3 fitted 114-205 on a Xeon); GPUs 60 % of
# their peak read rate (llmfit PR #137 reports 50-70 %); PCIe 4 x16 ~12 GB/s between pageable and pinned.
DEFAULT_HOST_GBPS_PER_THREAD = 8.0
DEFAULT_HOST_GBPS_MAX = 40.0
DEFAULT_HOST_GFLOPS_PER_THREAD = 100.0
# million K/V head-cells a second a thread (~1.5 GFLOP/s at the 1024 FLOPs a head-cell of 2 query heads of 128)
DEFAULT_ATTN_GEN_MCELLS_PER_THREAD = {"f16": 1.5, "quant": 3.0}
DEFAULT_ATTN_PREFILL_GFLOPS_PER_THREAD = {"f16": 40.0, "quant": 5.0}
DEFAULT_GPU_READ_SHARE = 0.6
DEFAULT_GPU_GFLOPS = 40000.0
DEFAULT_FIXED_MS = {"cpu": 0.5, "gpu": 1.0}
DEFAULT_PREFILL_FIXED_MS = {"cpu": 20.0, "gpu": 2.0}
DEFAULT_LINK_GBPS = 12.0
DEFAULT_ERROR = 0.35  # expected relative error of a prediction resting on any default
CALIBRATED_ERROR = 0.10  # of a calibrated one, until the calibration carries its measured error
# Of a split placement (weights read from host memory while a GPU computes) on a calibration no llama-server run
# has refined: llama-server generated 25-35 % slower than the llama-bench probe predicted on the lent H100 (both
# models, every placement: benchmarks/sessions/2026-12-07-gpu-speed); llama.cpp's tracker has the same gap
# (ggml-org/llama.cpp#14201). One benchmark run refines the costs (services.speed.refit_from_runs).
PROBE_ONLY_SPLIT_ERROR = 0.30
PROBE_ONLY_NOTE = ("calibrated by llama-bench alone: llama-server has run split placements 25-35 % slower than "
                   "this; a benchmark run refines it")
_F16_TYPES = ("f16", "bf16", "f32")


def format_ttft(ms: float) -> str:
    """A time to first token as the views write it: '0.57 s' from a second up, else '420 ms'."""
    return f"{ms / 1000:.2f} s" if ms >= 1000 else f"{ms:.0f} ms"


def is_host_key(key: str) -> bool:
    """Whether a cost key depends on the host's thread count (kept per count as KEY@THREADS)."""
    parts = key.split(":")
    return (len(parts) > 1 and parts[1] == HOST) or key in ("fixed:cpu", "pfixed:cpu")


def pair_group(pair: str) -> str:
    """'f16' when both cache types are float, else 'quant' (the CPU reads them with other kernels)."""
    return "f16" if all(t in _F16_TYPES for t in pair.split("/")) else "quant"


def nearest_pairs(pair: str, measured: set[str] | frozenset[str]) -> list[str]:
    """The measured K/V pairs of `pair`'s group (pair_group), nearest first: a pair whose K and V are each of
    the same kind (float or quantized) as `pair`'s before a mixed one, then the same types. An unprobed q4_0/q4_0
    takes q8_0/q8_0 (both sides quantized: ggml-cpu's quantized flash-attention path), not f16/q8_0 (a float K
    and a quantized V: another, slower kernel pair)."""
    k, _, v = pair.partition("/")

    def score(other: str) -> tuple[int, int, str]:
        ok, _, ov = other.partition("/")
        kinds = sum(pair_group(f"{a}/{a}") == pair_group(f"{b}/{b}") for a, b in ((k, ok), (v, ov)))
        return (-kinds, -((k == ok) + (v == ov)), other)

    return sorted((o for o in measured if pair_group(o) == pair_group(pair)), key=score)


@dataclass(frozen=True)
class SpeedCalibration:
    """Fitted costs (seconds per GB, per GFLOP, per token; see `terms`) for one machine, build and driver.

    Keys: ``read:DEV`` (GB read while generating), ``compute:DEV`` (GFLOP of prefill matmuls), ``attn_gen:Host:PAIR``
    (million K/V head-cells the CPU attends while generating, by K/V pair), ``attn_prefill:Host:PAIR`` (the CPU's
    prompt attention GFLOP by K/V pair), ``fixed:cpu`` / ``fixed:gpu`` (per
    token), ``pfixed:cpu`` / ``pfixed:gpu`` (per ubatch), ``link`` (GB copied host->GPU). Host keys end in
    ``@THREADS``."""

    costs: dict[str, float] = field(default_factory=dict)
    peaks_gbps: dict[str, float] = field(default_factory=dict)  # the best read rate a device reached
    build: str = ""
    driver: str = ""
    source: str = ""  # what it was calibrated on ("probe of a.gguf + b.gguf")
    error: float | None = None  # expected relative error (from the benchmark); None: not known
    threads: tuple[int, ...] = ()  # the host thread counts measured
    by_hand: tuple[str, ...] = ()  # keys set by hand (--bandwidth), not measured
    server_runs: int = 0  # stored llama-server runs the costs were refined on (0: llama-bench's probe alone)

    def cost(self, key: str, threads: int) -> tuple[float | None, str]:
        """(seconds per unit, how it was found) of a key; host keys at `threads`, interpolated in rate between
        measured counts (flat beyond the largest, proportional below the smallest); None when not calibrated.
        `predict` does not interpolate single costs between measured counts: it blends the whole predictions at
        them (`_between`); this serves a cost looked up alone (refine's priors, the views' rates)."""
        if not is_host_key(key):
            v = self.costs.get(key)
            return v, ("" if v is None else "set by hand" if key in self.by_hand else "calibrated")
        measured = sorted({t for t in self.threads if f"{key}@{t}" in self.costs})
        if not measured:
            return None, ""
        if threads in measured:
            exact = f"{key}@{threads}"
            return self.costs[exact], "set by hand" if exact in self.by_hand else "calibrated"
        lo = [t for t in measured if t < threads]
        hi = [t for t in measured if t > threads]
        if lo and hi:
            a, b = lo[-1], hi[0]
            ca, cb = self.costs[f"{key}@{a}"], self.costs[f"{key}@{b}"]
            if not ca or not cb:
                return min(ca, cb), f"as at {a if not ca else b} threads"
            ra, rb = 1 / ca, 1 / cb
            rate = ra + (rb - ra) * (threads - a) / (b - a)
            return 1 / rate, f"interpolated from {a} and {b} threads"
        if hi:
            b = hi[0]
            return self.costs[f"{key}@{b}"] * b / max(1, threads), f"scaled from {b} threads"
        a = lo[-1]
        return self.costs[f"{key}@{a}"], f"as at {a} threads"


def default_cost(key: str, threads: int, peaks: dict[str, tuple[float, str]] | None = None) -> float | None:
    """A key's default cost (None: no default, e.g. a GPU of unknown bandwidth or an RPC device)."""
    t = max(1, threads)
    kind, _, rest = key.partition(":")
    dev = rest.split(":")[0]
    if kind == "fixed":
        return DEFAULT_FIXED_MS[rest] / 1000
    if kind == "pfixed":
        return DEFAULT_PREFILL_FIXED_MS[rest] / 1000
    if kind == "link":
        return 1 / DEFAULT_LINK_GBPS
    if kind == "attn_gen":
        return 1 / (DEFAULT_ATTN_GEN_MCELLS_PER_THREAD[pair_group(rest.split(":")[1])] * t)
    if kind == "attn_prefill":
        return 1 / (DEFAULT_ATTN_PREFILL_GFLOPS_PER_THREAD[pair_group(rest.split(":")[1])] * t)
    if dev == HOST:
        if kind == "read":
            return 1 / min(DEFAULT_HOST_GBPS_MAX, DEFAULT_HOST_GBPS_PER_THREAD * t)
        return 1 / (DEFAULT_HOST_GFLOPS_PER_THREAD * t)
    if dev.upper().startswith("RPC"):
        return None
    if kind == "read":
        peak = (peaks or {}).get(dev, (None, ""))[0]
        return None if peak is None else 1 / (peak * DEFAULT_GPU_READ_SHARE)
    return 1 / DEFAULT_GPU_GFLOPS


def terms(traffic: Traffic, *, depth: float, prompt_tokens: int) -> tuple[dict[str, float], dict[str, float]]:
    """The linear terms of one request: ({cost key: units} of a generated token, {key: units} of a prompt
    token). Host keys lack their '@THREADS' (the caller's thread count applies)."""
    used = [d for d in traffic.devices if d.read_bytes(depth) > 0 or d.prefill_flops > 0]
    gpus = [d for d in used if d.name != HOST]
    regime = "gpu" if gpus else "cpu"
    pair = traffic.kv_pair
    gen: dict[str, float] = {f"fixed:{regime}": 1.0}
    pre: dict[str, float] = {}
    ctx_mid = depth + prompt_tokens / 2.0
    copies = traffic.host_copy_bytes if gpus and prompt_tokens >= 32 else 0.0
    ub = max(1, min(traffic.n_ubatch, prompt_tokens))
    pre[f"pfixed:{regime}"] = 1.0 / ub
    kv_copies = 0.0
    for d in traffic.devices:
        if d.weight_bytes > 0:
            _add(gen, f"read:{d.name}", d.weight_bytes / GB)
        if d.name == HOST:
            attn = d.kv_head_cells(depth) / MCELLS
            if attn > 0:
                _add(gen, f"attn_gen:{HOST}:{pair}", attn)
            pattn = d.attn_flops(ctx_mid) / GB
            if pattn > 0 and copies and gpus and traffic.host_attn_offloaded:
                # the attention follows the offloaded matmuls onto the GPU; the host's K/V cells used so far
                # (on average up to the middle of the prompt plus half a ubatch) are copied there per ubatch
                _add(pre, f"compute:{gpus[0].name}", pattn)
                kv_copies = d.kv_bytes(depth + (prompt_tokens + ub) / 2.0)
            elif pattn > 0:
                _add(pre, f"attn_prefill:{HOST}:{pair}", pattn)
            weighted = sum(f * CPU_CLASS_COST.get(c, 1.0) for c, f in d.flops_by_class) / GB
            if copies and gpus:
                _add(pre, f"compute:{gpus[0].name}", d.prefill_flops / GB)  # big batches run on the GPU
            elif weighted > 0:
                _add(pre, f"compute:{HOST}", weighted)
        else:
            kv = d.kv_bytes(depth) / GB
            if kv > 0:
                _add(gen, f"read:{d.name}", kv)
            f = (d.prefill_flops + d.attn_flops(ctx_mid)) / GB
            if f > 0:
                _add(pre, f"compute:{d.name}", f)
    if copies:
        pre["link"] = (copies + kv_copies) / GB / ub
    return gen, pre


def _add(d: dict[str, float], k: str, v: float) -> None:
    d[k] = d.get(k, 0.0) + v


@dataclass(frozen=True)
class DeviceSpeed:
    """One device's part of a prediction."""

    name: str
    read_bytes: float  # per generated token at the depth
    gen_ms: float | None  # its time per generated token
    prefill_ms: float | None  # its time per prompt token
    read_gbps: float | None  # the weight read rate used
    peak_gbps: float | None
    source: str  # "calibrated", "default", "unknown", ...


@dataclass(frozen=True)
class Prediction:
    """Predicted prefill and generation speed of one request, what it rests on and how far to trust it."""

    gen_tps: float | None
    prefill_tps: float | None
    ttft_ms: float | None
    roofline_tps: float | None
    depth: int
    prompt_tokens: int
    threads: int
    devices: tuple[DeviceSpeed, ...]
    fixed_ms: float
    copy_ms_per_ubatch: float
    calibrated_on: str
    error: float  # expected relative error (e.g. 0.1: ±10 %)
    unknown: tuple[str, ...] = ()  # devices without any rate: then the prediction is None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def shares(self) -> dict[str, float]:
        """Each device's share of the time per generated token (and 'fixed' for the fixed cost)."""
        parts = {d.name: d.gen_ms for d in self.devices if d.gen_ms is not None}
        total = sum(parts.values()) + self.fixed_ms
        if not total:
            return {}
        return {**{k: v / total for k, v in parts.items()}, "fixed": self.fixed_ms / total}

    def to_json(self) -> dict[str, object]:
        def r(x: float | None, n: int = 1) -> float | None:
            return None if x is None else round(x, n)

        shares = self.shares()
        return {
            "gen_tps": r(self.gen_tps, 2), "prefill_tps": r(self.prefill_tps, 1), "ttft_ms": r(self.ttft_ms),
            "roofline_tps": r(self.roofline_tps, 2), "depth": self.depth, "prompt_tokens": self.prompt_tokens,
            "threads": self.threads, "fixed_ms_per_token": r(self.fixed_ms, 3),
            "copy_ms_per_ubatch": r(self.copy_ms_per_ubatch, 2), "expected_error": round(self.error, 3),
            "calibrated_on": self.calibrated_on, "unknown_devices": list(self.unknown), "notes": list(self.notes),
            "devices": [{"name": d.name, "bytes_per_token": round(d.read_bytes),
                         "mib_per_token": round(d.read_bytes / 2**20, 2), "gen_ms": r(d.gen_ms, 3),
                         "prefill_ms_per_token": r(d.prefill_ms, 4), "time_share": r(shares.get(d.name), 3),
                         "read_gbps": r(d.read_gbps, 2), "peak_gbps": r(d.peak_gbps, 1), "rate_source": d.source}
                        for d in self.devices],
        }

    def text(self) -> str:
        """'gen 41.2 t/s · prefill 512 t/s · TTFT 1.00 s · roofline 60.1 t/s (±10 %; probe of ...)'"""
        if self.gen_tps is None:
            if not self.unknown:  # every cost of this model is 0 (an old calibration fitted from too few runs)
                return "speed unknown: the calibration gives this model no time: calibrate again"
            return f"speed unknown: no rate for {', '.join(self.unknown)}"
        parts = [f"gen {self.gen_tps:.1f} t/s"]
        if self.prefill_tps is not None:
            parts.append(f"prefill {self.prefill_tps:.0f} t/s")
        if self.ttft_ms is not None:
            parts.append(f"TTFT {format_ttft(self.ttft_ms)}")
        if self.roofline_tps is not None:
            parts.append(f"roofline {self.roofline_tps:.1f} t/s")
        return " · ".join(parts) + f" (±{self.error:.0%}; {self.calibrated_on})"


def split_key(k: str) -> tuple[str, int]:
    """A fitted row's key and its thread count: 'host_read:Host@16' -> ('host_read:Host', 16); a key of no host
    cost (no '@') counts as 1 thread."""
    key, _, t = k.partition("@")
    return key, int(t) if t else 1


def resolve_cost(key: str, cal: SpeedCalibration, threads: int,
             peaks: dict[str, tuple[float, str]] | None) -> tuple[float | None, str]:
    """A key's cost: calibrated (or from a calibrated K/V pair of the same group), else its default."""
    v, how = cal.cost(key, threads)
    if v is not None:
        return v, how
    if key.startswith(("attn_gen:", "attn_prefill:")):
        kind, dev, pair = key.split(":")
        measured = {k.split(":")[2].split("@")[0] for k in cal.costs if k.startswith(f"{kind}:{dev}:")}
        for other in nearest_pairs(pair, measured):
            v, how = cal.cost(f"{kind}:{dev}:{other}", threads)
            if v is not None:
                return v, f"as {other} ({how})"
    d = default_cost(key, threads, peaks)
    return (d, "default") if d is not None else (None, "unknown")


def predict(traffic: Traffic, calibration: SpeedCalibration | None, *, threads: int, depth: int = 0,
            prompt_tokens: int = 512, peaks: dict[str, tuple[float, str]] | None = None) -> Prediction:
    """The speed of one request: `prompt_tokens` of prompt after `depth` cells already in the cache, then
    generation at that depth. `threads`: the host's thread count (llama.cpp's -t, or its default).
    `peaks`: a device's peak read rate (GB/s) and its source (NVML, published) where not calibrated.

    A thread count between two the calibration measured takes the speeds predicted at those two, their times
    per token interpolated in 1/threads (a part that divides among the threads and a part that does not:
    Amdahl's form). Interpolating each cost instead let a fixed cost that grows with threads and a read cost
    that falls sum to a speed above both ends (the lent machine's MoE, 2026-12-06: 932 t/s predicted at 8
    threads against 837 at 16 and 470 at 4; 581-699 measured); interpolating the speed linearly (the chord of a
    curve that flattens as the threads saturate memory) put 8 of 16 threads 11-27 % below the server's
    measurements on the lent 16 cores, where this form is 1-19 % below (benchmarks/sessions/2026-12-07-cpu-space,
    run-1 and run-3: the grid's and the unpruned tune's `t=8`, from the same runs' predictions at 4 and 16)."""
    cal = calibration or SpeedCalibration()
    lo = [t for t in cal.threads if t < threads]
    hi = [t for t in cal.threads if t > threads]
    if threads not in cal.threads and lo and hi:
        a = _predict_at(traffic, cal, max(lo), depth, prompt_tokens, peaks)
        b = _predict_at(traffic, cal, min(hi), depth, prompt_tokens, peaks)
        return _between(a, b, threads)
    return _predict_at(traffic, cal, threads, depth, prompt_tokens, peaks)


def _mix(x: float | None, y: float | None, w: float) -> float | None:
    return None if x is None or y is None else x + (y - x) * w


def thread_weight(threads: int, below: int, above: int) -> float:
    """Where `threads` lies between two measured thread counts, in 1/threads (0 at `below`, 1 at `above`): a part
    of the time that divides among the threads and a part that does not (Amdahl's form)."""
    return (1 / threads - 1 / below) / (1 / above - 1 / below)


def rate_between(x: float | None, y: float | None, threads: int, below: int, above: int) -> float | None:
    """A speed at `threads` from the speeds `x` at `below` and `y` at `above` threads: its time per token
    interpolated in 1/threads (thread_weight); None without both."""
    w = thread_weight(threads, below, above)
    return None if not x or not y else 1 / (1 / x + (1 / y - 1 / x) * w)


def _between(a: Prediction, b: Prediction, threads: int) -> Prediction:
    """The prediction at `threads` from those at the measured counts around it (a below, b above): times per
    token interpolated in 1/threads (see `predict`), each device's times in proportion, the host's rate source
    said."""
    w = thread_weight(threads, a.threads, b.threads)
    gen = rate_between(a.gen_tps, b.gen_tps, threads, a.threads, b.threads)
    pre = rate_between(a.prefill_tps, b.prefill_tps, threads, a.threads, b.threads)
    how = f"interpolated from {a.threads} and {b.threads} threads"

    def scaled(x: float | None, y: float | None, total_a: float, total_b: float,
               target: float | None) -> float | None:
        """A time per token blended linearly, then scaled so the parts sum to 1 / the interpolated rate (when
        there is one)."""
        m = _mix(x, y, w)
        parts = total_a + (total_b - total_a) * w
        return m if m is None or not target or not parts else m * (1000 / target) / parts

    ga = sum(d.gen_ms or 0.0 for d in a.devices) + a.fixed_ms
    gb = sum(d.gen_ms or 0.0 for d in b.devices) + b.fixed_ms
    pa = sum(d.prefill_ms or 0.0 for d in a.devices)
    pb = sum(d.prefill_ms or 0.0 for d in b.devices)
    devices = tuple(DeviceSpeed(da.name, da.read_bytes, scaled(da.gen_ms, db.gen_ms, ga, gb, gen),
                                scaled(da.prefill_ms, db.prefill_ms, pa, pb, pre),
                                _mix(da.read_gbps, db.read_gbps, w), da.peak_gbps,
                                how if da.name == HOST and da.source == "calibrated" else da.source)
                    for da, db in zip(a.devices, b.devices, strict=True))
    fixed = scaled(a.fixed_ms, b.fixed_ms, ga, gb, gen) or 0.0  # both are numbers: so is the blend
    copy = a.copy_ms_per_ubatch + (b.copy_ms_per_ubatch - a.copy_ms_per_ubatch) * w
    ttft = (a.prompt_tokens / pre + 1 / gen) * 1000 if gen and pre else None
    on = a.calibrated_on.replace(f"{HOST}: calibrated", f"{HOST}: {how}")  # _calibrated_on's "DEV: how"
    return Prediction(gen, pre, ttft, a.roofline_tps, a.depth, a.prompt_tokens, threads, devices, fixed, copy, on,
                      max(a.error, b.error), a.unknown or b.unknown, a.notes)


def _predict_at(traffic: Traffic, cal: SpeedCalibration, threads: int, depth: int, prompt_tokens: int,
                peaks: dict[str, tuple[float, str]] | None) -> Prediction:
    """`predict` with every host cost taken at `threads` (SpeedCalibration.cost)."""
    gen, pre = terms(traffic, depth=depth, prompt_tokens=prompt_tokens)
    sources: dict[str, str] = {}
    read_source: dict[str, str] = {}
    unknown: list[str] = []
    cost: dict[str, float] = {}
    for key in {**gen, **pre}:
        v, how = resolve_cost(key, cal, threads, peaks)
        dev = _dev(key)
        if v is None:
            unknown.append(dev)
            continue
        cost[key] = v
        if key.startswith("read:"):
            read_source[dev] = how
        if how == "default" or dev not in sources:
            sources[dev] = how
    devices = []
    for d in traffic.devices:
        mine = [k for k in gen if _dev(k) == d.name]
        gen_ms = None if any(k not in cost for k in mine) else sum(gen[k] * cost[k] for k in mine) * 1000
        pmine = [k for k in pre if _dev(k) == d.name]
        pre_ms = None if any(k not in cost for k in pmine) else sum(pre[k] * cost[k] for k in pmine) * 1000
        read_cost = cost.get(f"read:{d.name}")
        peak = cal.peaks_gbps.get(d.name) or (peaks or {}).get(d.name, (None, ""))[0]
        devices.append(DeviceSpeed(d.name, d.read_bytes(depth), gen_ms if mine else 0.0, pre_ms if pmine else 0.0,
                                   1 / read_cost if read_cost else None, peak,
                                   read_source.get(d.name) or sources.get(d.name, "")))
    fixed_key = next(k for k in gen if k.startswith("fixed:"))
    fixed_ms = cost.get(fixed_key, 0.0) * 1000
    copy_ms = pre.get("link", 0.0) * cost.get("link", 0.0) * max(1, min(traffic.n_ubatch, prompt_tokens)) * 1000
    error = DEFAULT_ERROR if "default" in sources.values() else (cal.error or CALIBRATED_ERROR)
    notes = list(traffic.notes)
    if not traffic.flash_attn:
        # the probe runs flash attention on; off computes attention with other kernels (on one 2-core EPYC
        # generating at depth 1024-2048 went 16-48 % faster: benchmarks/results/cpu_flash_attn/)
        error = max(error, DEFAULT_ERROR)
        notes.append("flash attention off: attention priced as with it on (the calibration measures it on)")
    split = any(d.name != HOST and d.read_bytes(depth) > 0 for d in traffic.devices) and any(
        d.name == HOST and (d.weight_bytes > 0 or d.kv_full_bytes_per_cell > 0 or d.kv_swa_bytes_per_cell > 0)
        for d in traffic.devices)  # weights or K/V (-nkvo) in host memory beside a GPU's
    if split and cal.costs and not cal.server_runs and "default" not in sources.values():
        error = max(error, PROBE_ONLY_SPLIT_ERROR)
        notes.append(PROBE_ONLY_NOTE)
    on = _calibrated_on(cal, sources)
    if unknown:
        return Prediction(None, None, None, None, depth, prompt_tokens, threads, tuple(devices), fixed_ms, copy_ms,
                          on, error, tuple(sorted(set(unknown))), tuple(notes))
    gen_s = sum(gen[k] * cost[k] for k in gen)
    pre_s = sum(pre[k] * cost[k] for k in pre)
    gen_tps = 1 / gen_s if gen_s > 0 else None
    prefill_tps = 1 / pre_s if pre_s > 0 else None
    ttft_ms = (prompt_tokens * pre_s + gen_s) * 1000 if prefill_tps else None
    roof = [(d.read_bytes, d.peak_gbps) for d in devices if d.read_bytes > 0]
    peaks_known = [(b, p) for b, p in roof if p]
    roofline = (1 / sum(b / (p * GB) for b, p in peaks_known)) if roof and len(peaks_known) == len(roof) else None
    if copy_ms:
        host = traffic.device(HOST)
        kv = " (and the host layers' K/V cells)" if traffic.host_attn_offloaded and host is not None and (
            host.kv_full_bytes_per_cell or host.kv_swa_bytes_per_cell) else ""
        notes.append(f"prompt batches copy {traffic.host_copy_bytes / 2**20:.0f} MiB of host weights{kv} to the GPU "
                     f"per ubatch ({copy_ms:.1f} ms)")
    return Prediction(gen_tps, prefill_tps, ttft_ms, roofline, depth, prompt_tokens, threads, tuple(devices),
                      fixed_ms, copy_ms, on, error, (), tuple(notes))


def _dev(key: str) -> str:
    """The device a cost key belongs to ('link' and the fixed costs: their own name)."""
    parts = key.split(":")
    return parts[1].split("@")[0] if len(parts) > 1 and parts[0] not in ("fixed", "pfixed") else key


def _calibrated_on(cal: SpeedCalibration, sources: dict[str, str]) -> str:
    head = cal.source or "no calibration"
    return f"{head} ({'; '.join(f'{k}: {v}' for k, v in sorted(sources.items()))})"


# The meaning of the cost keys: raised when a term's definition changes (2: a CPU layer's prompt attention runs on
# the GPU with its K/V copied, so `link` no longer absorbs it; 3: the CPU's attention while generating costs per
# million K/V head-cells, not per GFLOP). A stored calibration of another version is not read (the store then
# finds none: the views say "not calibrated" until the probe runs again).
MODEL_VERSION = 3


def calibration_to_json(cal: SpeedCalibration) -> dict[str, object]:
    """A calibration as plain JSON (what the store keeps), with the MODEL_VERSION its costs mean."""
    return {"model": MODEL_VERSION, "costs": dict(cal.costs), "peaks_gbps": dict(cal.peaks_gbps), "build": cal.build, "driver": cal.driver,
            "source": cal.source, "error": cal.error, "threads": list(cal.threads), "by_hand": list(cal.by_hand),
            "server_runs": cal.server_runs}


# The part of a calibration's source that says how many stored runs refined it ('probe of a + 3 stored runs'):
# services.speed.runs_said writes it, a refit replaces it, a record stored before `server_runs` is read by it.
STORED_RUNS = re.compile(r"(^| \+ )(\d+) stored runs?$")


def _server_runs(d: dict[str, Any]) -> int:
    """A record's server_runs; one stored before the field says it in its source (STORED_RUNS)."""
    if "server_runs" in d:
        return int(d["server_runs"] or 0)
    m = STORED_RUNS.search(str(d.get("source") or ""))
    return int(m.group(2)) if m else 0


def calibration_from_json(d: dict[str, Any]) -> SpeedCalibration:
    """The inverse of calibration_to_json; ValueError on a record it cannot read, or one fitted with another
    MODEL_VERSION (a record without one is version 1)."""
    if d.get("model", 1) != MODEL_VERSION:
        raise ValueError(f"a speed calibration of model version {d.get('model', 1)}, not {MODEL_VERSION}")
    try:
        return SpeedCalibration({str(k): float(v) for k, v in (d.get("costs") or {}).items()},
                                {str(k): float(v) for k, v in (d.get("peaks_gbps") or {}).items()},
                                str(d.get("build") or ""), str(d.get("driver") or ""), str(d.get("source") or ""),
                                None if d.get("error") is None else float(d["error"]),
                                tuple(int(t) for t in d.get("threads") or ()),
                                tuple(str(k) for k in d.get("by_hand") or ()), _server_runs(d))
    except (TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"not a speed calibration: {exc}") from None


def default_keys(traffic: Traffic, calibration: SpeedCalibration | None, *, threads: int, depth: int = 0,
                 prompt_tokens: int = 512, peaks: dict[str, tuple[float, str]] | None = None) -> tuple[str, ...]:
    """The cost keys of this request that the calibration does not give (a default stands in for each): a
    prediction resting on any of them carries DEFAULT_ERROR, and a decision (the tune's pruning) should not rest on
    it alone. () when every cost is calibrated (or set by hand)."""
    cal = calibration or SpeedCalibration()
    gen, pre = terms(traffic, depth=depth, prompt_tokens=prompt_tokens)
    return tuple(sorted(k for k in {**gen, **pre} if resolve_cost(k, cal, threads, peaks)[1] == "default"))
