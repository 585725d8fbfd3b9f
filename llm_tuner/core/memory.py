"""Per-device memory plan for a model + llama-server arguments + devices, following llama.cpp's own rules.

What goes where (the build under /work/llama-src; file:line refer to it):
- Devices: `-dev` list or every GPU; `-sm none` keeps only `-mg` (src/llama.cpp:289). Layers: `-ngl N`
  puts the LAST N of the n_layer_all+1 "layers" (repeating layers, then the output layer) on GPUs
  (llama-model.cpp:1591); -1 (auto) and any negative = all. `-ts` (or free memory when unset)
  splits those layers in proportion, by `upper_bound` over the cumulative split points (:1599).
  The input layer (token_embd) always stays on the CPU (:1607). MTP (nextn) blocks are layers too,
  but their tensors are only loaded with `--spec-type draft-mtp` (TENSOR_SKIP otherwise).
- Tensors: `-ot` rules (with `--cpu-moe`/`--n-cpu-moe` patterns, in command-line order) are
  `std::regex_search`ed against each name, first match wins (llama-model-loader.cpp:1235). A
  tensor on the CPU uses the first usable buffer of: GPU host buffer (when a GPU is in use and not
  `--no-host`; replaced by plain CPU memory under mmap), CPU_REPACK (when the CPU can repack that
  type, ggml-cpu/repack.cpp:4925), CPU. Tied output embeddings are duplicated on the output device.
  `-sm row` splits every matrix weight's rows over the GPUs in `-ts` proportion.
- Weights in memory: a GPU buffer holds the sum of its tensors (aligned, CUDA pads one extra row);
  CPU weights under mmap are one mapping from the first to the last CPU tensor in the file
  (get_mapping_range), so that is the "CPU_Mapped" size llama.cpp logs; CPU_REPACK is allocated.
- KV: per attention layer on that layer's device (CPU with `-nkvo`): K rows n_embd_k_gqa, V rows
  n_embd_v_gqa (without flash attention the V cache is transposed and padded to the layer maximum),
  kv_size = n_ctx padded to 256 (per stream when KV is not unified); SWA layers use
  pad(min(kv, n_swa*(unified ? n_seq : 1) + n_ubatch), 256) cells, or the full size with --swa-full.
- Output buffer: n_vocab (+ n_embd with embeddings) floats per sequence, in host memory.
- Compute buffers: an analytic model of the worst-case graph (KQ mask, the largest live layer
  activations, logits for the outputs the server reserves), calibrated on real runs; see
  benchmarks/memory_accuracy.py for how close it is. A calibration from a llama.cpp check can be
  supplied (`Calibration`) but the estimate stands without one.
- Fit (`-fit on`, the default): when the plan does not fit and `-c` was not given, the context is
  shrunk (not below `-fitc`); when no `-ngl/-ts/-ot/-cmoe/-ncmoe` was set, layers are placed so
  each device keeps its `-fitt` margin. Either is applied here and said in the warnings.

Everything here is pure and fast (< 5 ms for a 1000-tensor model after the first call per model):
the UI calls it while sliders move.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

MIB = 1024 * 1024

# ------------------------------------------------------------------------------------------------
# constants from llama.cpp
# ------------------------------------------------------------------------------------------------

CACHE_TYPES = {"f32": GGMLQuantizationType.F32, "f16": GGMLQuantizationType.F16,
               "bf16": GGMLQuantizationType.BF16, "q8_0": GGMLQuantizationType.Q8_0,
               "q4_0": GGMLQuantizationType.Q4_0, "q4_1": GGMLQuantizationType.Q4_1,
               "iq4_nl": GGMLQuantizationType.IQ4_NL, "q5_0": GGMLQuantizationType.Q5_0,
               "q5_1": GGMLQuantizationType.Q5_1}

# SWA layer pattern per architecture: (n_pattern fallback, dense_first) - src/models/*.cpp load_swa_pattern
SWA_PATTERNS: dict[str, tuple[int, bool]] = {
    "gemma2": (2, False), "gemma3": (6, False), "gemma3n": (5, False), "gemma-embedding": (6, False),
    "cohere2": (4, False), "cohere2moe": (4, True), "exaone4": (4, False), "exaone-moe": (4, False),
    "olmo2": (4, False), "afmoe": (4, False), "gpt-oss": (2, False), "smallthinker": (4, True),
    "plamo3": (8, False), "modern-bert": (3, True), "mellum": (4, False), "muse-glimmer": (4, False),
}
# Architectures that use SWA whenever a window is set even without a pattern key (gemma2: always).
_SWA_ALWAYS = {"gemma2", "cohere2", "gpt-oss", "gemma3n"}

# Hybrid layouts (llama-arch.cpp llm_arch_is_recurrent / the qwen35 filters) and partial rollback support
_RECURRENT_ARCHS = {"mamba", "mamba2"}
_INTERVAL_HYBRIDS = {"qwen3next", "qwen35", "qwen35moe"}
_RS_ROLLBACK = {"qwen35", "qwen35moe", "qwen4exp", "deepseek4", "glm5-next", "nemotron_h", "nemotron_h_moe",
                "lfm2", "lfm2moe", "bailingmoe3", "kimi-k3"}

# Repack rules of the CPU backend (ggml-cpu/repack.cpp ggml_repack_get_optimal_repack_type):
# type -> list of (required cpu flags (all), row multiple) tried in order. x86 first, then ARM.
_REPACK_RULES: dict[str, list[tuple[tuple[str, ...], int]]] = {
    "Q4_0": [(("avx2",), 8), (("sve", "i8mm"), 8), (("neon", "i8mm"), 4), (("neon", "dotprod"), 4)],
    "Q4_K": [(("avx2",), 8), (("neon", "i8mm"), 8), (("neon", "dotprod"), 8)],
    "Q2_K": [(("avx512f",), 8)],
    "Q5_K": [(("neon", "i8mm"), 8), (("neon", "dotprod"), 8)],
    "Q6_K": [(("neon", "i8mm"), 8), (("neon", "dotprod"), 8)],
    "IQ4_NL": [(("avx2",), 8), (("neon", "dotprod"), 4)],
    "MXFP4": [(("avx2",), 8), (("neon", "dotprod"), 4)],
    "Q8_0": [(("neon", "i8mm"), 4), (("neon", "dotprod"), 4)],
    "Q1_0": [(("neon", "i8mm"), 4), (("neon", "dotprod"), 4)],
}
# /proc/cpuinfo spellings -> the names above (ARM reports asimd/asimddp/i8mm)
_FLAG_ALIASES = {"asimd": "neon", "asimddp": "dotprod", "svei8mm": "i8mm"}

# Buffer alignment per backend (ggml get_alignment): CPU TENSOR_ALIGNMENT 32, CUDA 128, others 256-ish.
_ALIGN = {"CPU": 32, "CUDA": 128, "ROCm": 128, "MUSA": 128, "Vulkan": 256, "SYCL": 128, "Metal": 32}
# Backends with a pinned host buffer type (weights of CPU layers prefer it; see make_cpu_buft_list).
_HAS_HOST_BUFT = {"CUDA", "ROCm", "MUSA", "Vulkan", "SYCL"}
# Runtime memory a llama-server process takes on a device beyond llama.cpp's buffers (driver context,
# cuBLAS workspace, kernels), counted against the device's FREE memory as NVML/cudaMemGetInfo report it.
# CUDA, measured on an H200 (driver 580, CUDA 13; benchmarks/results/gpu/h200/memory_accuracy_cuda_h200.txt):
# llama.cpp's breakdown 'unaccounted' (used - buffers) was 596..630 MiB, median 597, over 16 configurations.
# The driver's own reservation (NVML v2 `reserved`, 615 MiB on that card, h200x2-nvml-idle-10s.jsonl) is NOT
# part of it: it is never in free memory (idle free 143155 = total 143771 - reserved 616), so a plan against
# free memory must not count it, and a plan against a card's nominal total must (see PlanDevice.capacity_mib).
# Other backends: defaults from public reports until measured.
RUNTIME_OVERHEAD_MIB = {"CUDA": 600, "ROCm": 400, "MUSA": 400, "Vulkan": 180, "SYCL": 300, "Metal": 0,
                        "CPU": 0}
# Of that, what a process holds beyond the context that `llama-server --list-devices` itself holds when it
# reports free memory (PlanDevice.free_includes_runtime): free-at-listing minus free-at-exit minus buffers,
# median 71 MiB (70..104) on the H200. Free memory reported that way already lacks the rest.
RUNTIME_BEYOND_LISTING_MIB = {"CUDA": 72}
# Memory the driver reserves out of a card's total, never free to any process (NVML v2 `reserved`):
# 615 MiB on the H200 (143771 total, 143155 free when idle). Taken from the capacity when a device is
# planned from its nominal total alone (planned hardware, no free figure); the H200 figure stands for
# every CUDA card until others are measured.
DRIVER_RESERVED_MIB = {"CUDA": 615}
# the server process itself (code, tokenizer, HTTP): measured 40 MiB here as VmRSS minus llama.cpp's buffers
# (demo model, CPU build, -c 4096, with and without mmap); rounded up
HOST_OVERHEAD_MIB = 48

# Compute-buffer model coefficients (floats per token) fitted on real runs, see benchmarks/memory_accuracy.py.
_C_FFN_RESIDUAL = 2.0   # residual stream + normed input live through the FFN
_C_FFN = 4.0            # gate, up, activation, product (per n_ff)
_C_ATTN_NOFA = (2.0, 4.0, 3.0)  # (n_embd, q width, kv width) live beside KQ without flash attention


# ------------------------------------------------------------------------------------------------
# inputs
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanDevice:
    """A device to plan for: a detected GPU, a hypothetical one, or the host (name 'Host').

    `name` is llama.cpp's device name (CUDA0, Vulkan1, ROCm0, MTL0); `capacity_mib` its total memory,
    `free_mib` what is free now (None: plan against capacity, as for planned hardware).
    """

    name: str
    backend: str
    capacity_mib: int | None
    free_mib: int | None = None
    description: str = ""
    hypothetical: bool = False
    # free_mib was measured by a llama.cpp process (--list-devices) that held its own runtime context,
    # so the runtime overhead is already taken out of it (as it is for the fit step inside the server)
    free_includes_runtime: bool = False


@dataclass(frozen=True)
class PlacementArgs:
    """The llama-server settings that decide memory, with llama.cpp's defaults when not given.

    `ctx` None = `-c` not given (0 = trained context, and fit may shrink it); an explicit 0 means the
    trained context and fit never shrinks it. `ngl` None = auto (-1, all layers); 'all' = -2.
    `overrides` are (pattern, buffer) in command-line order, `--cpu-moe`/`--n-cpu-moe` included.
    """

    model: str | None = None
    ctx: int | None = None
    ngl: int | None = None
    split_mode: str = "layer"
    devices: tuple[str, ...] | None = None  # None = every GPU; () = -dev none
    tensor_split: tuple[float, ...] = ()
    main_gpu: int = 0
    overrides: tuple[tuple[str, str], ...] = ()
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    flash_attn: str = "auto"
    n_parallel: int = -1
    kv_unified: bool | None = None
    swa_full: bool = False
    n_batch: int = 2048
    n_ubatch: int = 512
    no_kv_offload: bool = False
    op_offload: bool = True
    fit: bool = True
    fit_target_mib: tuple[int, ...] = (1024,)
    fit_ctx_min: int = 4096
    load_mode: str = "auto"
    no_host: bool = False
    repack: bool = True
    embeddings: bool = False
    spec_types: tuple[str, ...] = ()
    draft_model: str | None = None
    draft_ngl: int | None = None
    draft_n_max: int = 3
    draft_devices: tuple[str, ...] | None = None
    draft_cache_type_k: str = "f16"
    draft_cache_type_v: str = "f16"
    load_mtp: bool = False
    ngram_size_m: int = 48
    cache_ram_mib: int = 8192
    unknown: tuple[str, ...] = ()

    # -- derived ---------------------------------------------------------------------------------
    @property
    def n_seq_max(self) -> int:
        return 4 if self.n_parallel in (-1, None) else max(1, self.n_parallel)

    @property
    def unified(self) -> bool:
        if self.kv_unified is not None:
            return self.kv_unified
        return self.n_parallel in (-1, None)

    @property
    def use_mmap(self) -> bool:
        return self.load_mode in ("auto", "mmap", "mmap+mlock")

    @property
    def spec_mtp(self) -> bool:
        return "draft-mtp" in self.spec_types

    @property
    def user_placed(self) -> bool:
        """True when fit may not place layers (-ngl, -ts, -ot, -cmoe/-ncmoe or -sm row set)."""
        return (self.ngl is not None and self.ngl != -1) or bool(self.tensor_split) or bool(self.overrides)

    def with_(self, **kw: Any) -> PlacementArgs:
        return replace(self, **kw)


def _parse_ngl(value: str) -> int:
    v = value.strip().lower()
    if v == "auto":
        return -1
    if v == "all":
        return -2
    return int(v)


def _bool_arg(value: str) -> bool:
    v = value.strip().lower()
    if v in ("on", "enabled", "true", "1"):
        return True
    if v in ("off", "disabled", "false", "0"):
        return False
    raise ValueError(value)


FFN_EXPS_REGEX = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"
FFN_DENSE_REGEX = r"\.ffn_(up|down|gate)\."

# flag -> (field, kind). kind: int, str, bool (switch), or a special handler name.
_FLAGS: dict[str, tuple[str, str]] = {}


def _reg(names: str, fieldname: str, kind: str) -> None:
    for n in names.split():
        _FLAGS[n] = (fieldname, kind)


_reg("-m --model", "model", "str")
_reg("-c --ctx-size", "ctx", "int")
_reg("-ngl --gpu-layers --n-gpu-layers", "ngl", "ngl")
_reg("-sm --split-mode", "split_mode", "str")
_reg("-dev --device", "devices", "devlist")
_reg("-ts --tensor-split", "tensor_split", "ts")
_reg("-mg --main-gpu", "main_gpu", "int")
_reg("-ot --override-tensor", "overrides", "ot")
_reg("-cmoe --cpu-moe", "overrides", "cmoe")
_reg("-ncmoe --n-cpu-moe", "overrides", "ncmoe")
_reg("-ncffn --n-cpu-ffn", "overrides", "ncffn")
_reg("-ctk --cache-type-k", "cache_type_k", "str")
_reg("-ctv --cache-type-v", "cache_type_v", "str")
_reg("-fa --flash-attn", "flash_attn", "fa")
_reg("-np --parallel", "n_parallel", "int")
_reg("-kvu --kv-unified", "kv_unified", "true")
_reg("-no-kvu --no-kv-unified", "kv_unified", "false")
_reg("--swa-full", "swa_full", "true")
_reg("-b --batch-size", "n_batch", "int")
_reg("-ub --ubatch-size", "n_ubatch", "int")
_reg("-nkvo --no-kv-offload", "no_kv_offload", "true")
_reg("-kvo --kv-offload", "no_kv_offload", "false")
_reg("--no-op-offload", "op_offload", "false")
_reg("-fit --fit", "fit", "onoff")
_reg("-fitt --fit-target", "fit_target_mib", "intlist")
_reg("-fitc --fit-ctx", "fit_ctx_min", "int")
_reg("-lm --load-mode", "load_mode", "str")
_reg("--no-host", "no_host", "true")
_reg("--no-repack -nr", "repack", "false")
_reg("--repack", "repack", "true")
_reg("--embedding --embeddings", "embeddings", "true")
_reg("-cram --cache-ram", "cache_ram_mib", "int")
_reg("--spec-type", "spec_types", "spec")
_reg("-md --model-draft --spec-draft-model", "draft_model", "str")
_reg("-ngld --gpu-layers-draft --n-gpu-layers-draft --spec-draft-ngl", "draft_ngl", "ngl")
_reg("--spec-draft-n-max", "draft_n_max", "int")
_reg("-devd --device-draft --spec-draft-device", "draft_devices", "devlist")
_reg("-ctkd --cache-type-k-draft --spec-draft-type-k", "draft_cache_type_k", "str")
_reg("-ctvd --cache-type-v-draft --spec-draft-type-v", "draft_cache_type_v", "str")
# flags that take a value but do not matter for memory (so their value is not taken for a flag)
_VALUE_FLAGS_IGNORED = set(
    "-t --threads -tb --threads-batch --host --port -a --alias --api-key --api-key-file -n --predict "
    "--temp --top-k --top-p --min-p --seed -s --repeat-penalty --presence-penalty --frequency-penalty "
    "--chat-template --chat-template-file --chat-template-kwargs --reasoning-format -rea --reasoning "
    "--reasoning-effort --reasoning-budget -to --timeout --threads-http --cache-reuse "
    "-lv --verbosity --log-verbosity --log-file --mmproj -mm --mmproj-url -hf --hf-repo -hff --hf-file "
    "--slot-save-path --sleep-idle-seconds --spec-draft-n-min --spec-draft-p-min --draft-p-min "
    "--spec-draft-sampling --rope-scaling --rope-scale --rope-freq-base --rope-freq-scale --yarn-orig-ctx "
    "--grp-attn-n --grp-attn-w -dt --defrag-thold --keep --api-prefix --path --lora --lora-scaled "
    "--control-vector -C --cpu-mask -Cb --cpu-mask-batch --prio --prio-batch --poll --numa "
    "--log-colors -sp --special --spec-ngram-mod-n-min --spec-ngram-mod-n-max --spec-ngram-mod-n-match "
    "--ssl-key-file --ssl-cert-file -cb -fitp --fit-print --reasoning-budget-message --media-path "
    "--sse-ping-interval --webui-config --webui-config-file --tools -ctxcp --ctx-checkpoints "
    "--spec-ngram-simple-size-n --spec-ngram-simple-size-m --spec-ngram-map-k-size-n "
    "--spec-ngram-map-k-size-m --spec-ngram-map-k4v-size-n --spec-ngram-map-k4v-size-m".split())


def parse_server_args(argv: list[str] | tuple[str, ...] | str) -> PlacementArgs:
    """llama-server arguments -> PlacementArgs (aliases, `--flag=value`, `_` for `-` in long flags).

    Flags that do not affect memory are skipped; unknown flags are kept in `unknown`. A repeated
    flag keeps its last value (as llama.cpp), except `-ot`/`-cmoe`/`-ncmoe`/`--spec-type` which add up.
    """
    if isinstance(argv, str):
        argv = shlex.split(argv)
    args = list(argv)
    if args and not args[0].startswith("-"):
        args = args[1:]  # the binary
    kw: dict[str, Any] = {}
    overrides: list[tuple[str, str]] = []
    spec: list[str] = []
    unknown: list[str] = []
    ctx_given = False
    i = 0
    while i < len(args):
        a = args[i]
        value: str | None = None
        if a.startswith("--") and "=" in a:
            a, value = a.split("=", 1)
        if a.startswith("--"):
            a = "--" + a[2:].replace("_", "-")
        spec_ = _FLAGS.get(a)
        if spec_ is None:
            if a in _VALUE_FLAGS_IGNORED and value is None:
                i += 2
            else:
                unknown.append(args[i])
                i += 1
            continue
        name, kind = spec_
        takes_value = kind not in ("true", "false", "cmoe")
        if takes_value and value is None:
            if i + 1 >= len(args):
                raise ValueError(f"{a} needs a value")
            value = args[i + 1]
            i += 2
        else:
            i += 1
        if kind == "int":
            kw[name] = int(value)
            if name == "ctx":
                ctx_given = True
        elif kind == "str":
            kw[name] = value
        elif kind == "ngl":
            kw[name] = _parse_ngl(value)
        elif kind == "true":
            kw[name] = True
        elif kind == "false":
            kw[name] = False
        elif kind == "onoff":
            kw[name] = _bool_arg(value)
        elif kind == "fa":
            kw[name] = {"1": "on", "true": "on", "0": "off", "false": "off", "-1": "auto"}.get(value.lower(),
                                                                                              value.lower())
        elif kind == "devlist":
            kw[name] = () if value.strip().lower() == "none" else tuple(
                d.strip() for d in value.split(",") if d.strip())
        elif kind == "ts":
            kw[name] = tuple(float(x) for x in re.split(r"[,/]", value) if x.strip())
        elif kind == "intlist":
            kw[name] = tuple(int(x) for x in value.split(",") if x.strip())
        elif kind == "ot":
            for part in value.split(","):
                if "=" not in part:
                    raise ValueError(f"invalid -ot rule {part!r} (want <regex>=<buffer>)")
                pat, buf = part.split("=", 1)
                overrides.append((pat, buf))
        elif kind == "cmoe":
            overrides.append((FFN_EXPS_REGEX, "CPU"))
        elif kind == "ncmoe":
            overrides.extend((rf"blk\.{j}{FFN_EXPS_REGEX}", "CPU") for j in range(int(value)))
        elif kind == "ncffn":
            overrides.extend((rf"blk\.{j}{FFN_DENSE_REGEX}", "CPU") for j in range(int(value)))
        elif kind == "spec":
            spec.extend(s.strip() for s in value.split(",") if s.strip() and s.strip() != "none")
    if overrides:
        kw["overrides"] = tuple(overrides)
    if spec:
        kw["spec_types"] = tuple(spec)
    if "ctx" in kw and not ctx_given:
        del kw["ctx"]
    kw["unknown"] = tuple(unknown)
    return PlacementArgs(**kw)


def args_from_profile(profile: Any) -> PlacementArgs:
    """core.profile.LaunchProfile (duck-typed) -> PlacementArgs; unknown flags in extra_args are parsed too."""
    g = lambda name, default=None: getattr(profile, name, default)  # noqa: E731
    kw: dict[str, Any] = {}
    if g("model"):
        kw["model"] = g("model")
    if g("ctx_size") is not None:
        kw["ctx"] = int(g("ctx_size"))
    ngl = g("gpu_layers")
    if ngl is not None:
        kw["ngl"] = _parse_ngl(str(ngl))
    for src, dst in (("split_mode", "split_mode"), ("cache_type_k", "cache_type_k"),
                     ("cache_type_v", "cache_type_v"), ("flash_attn", "flash_attn"), ("load_mode", "load_mode"),
                     ("main_gpu", "main_gpu"), ("parallel", "n_parallel"), ("kv_unified", "kv_unified"),
                     ("batch_size", "n_batch"), ("ubatch_size", "n_ubatch"), ("fit_ctx", "fit_ctx_min"),
                     ("draft_model", "draft_model"), ("draft_n_max", "draft_n_max"), ("cache_ram_mib", "cache_ram_mib"),
                     ("draft_cache_type_k", "draft_cache_type_k"), ("draft_cache_type_v", "draft_cache_type_v")):
        v = g(src)
        if v is not None:
            kw[dst] = v
    if g("devices"):
        devs = tuple(g("devices"))
        kw["devices"] = () if devs == ("none",) else devs
    if g("tensor_split"):
        kw["tensor_split"] = tuple(float(x) for x in g("tensor_split"))
    if g("swa_full"):
        kw["swa_full"] = True
    if g("kv_offload") is False:
        kw["no_kv_offload"] = True
    if g("fit") is not None:
        kw["fit"] = bool(g("fit"))
    if g("fit_target_mib"):
        kw["fit_target_mib"] = tuple(int(x) for x in g("fit_target_mib"))
    if g("draft_gpu_layers") is not None:
        kw["draft_ngl"] = _parse_ngl(str(g("draft_gpu_layers")))
    if g("draft_device"):
        kw["draft_devices"] = tuple(g("draft_device"))
    spec = tuple(s for s in (g("spec_type") or ()) if s != "none")
    if spec:
        kw["spec_types"] = spec
    overrides = [(r.pattern, r.buffer) for r in (g("override_tensor") or ())]
    if g("cpu_moe"):
        overrides.append((FFN_EXPS_REGEX, "CPU"))
    if g("n_cpu_moe"):
        overrides.extend((rf"blk\.{j}{FFN_EXPS_REGEX}", "CPU") for j in range(int(g("n_cpu_moe"))))
    extra = list(g("extra_args") or ())
    base = PlacementArgs(**kw)
    if extra:
        parsed = parse_server_args(extra)
        changes = {f: getattr(parsed, f) for f in parsed.__dataclass_fields__
                   if getattr(parsed, f) != getattr(PlacementArgs(), f) and f not in ("unknown", "overrides")}
        base = replace(base, **changes)
        overrides.extend(parsed.overrides)
    if overrides:
        base = replace(base, overrides=tuple(overrides))
    return base


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

    @property
    def total_mib(self) -> float:
        return self.model_mib + self.kv_mib + self.compute_mib + self.output_mib + self.overhead_mib

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
        return self.capacity_mib - DRIVER_RESERVED_MIB.get(self.backend, 0)

    @property
    def headroom_mib(self) -> float | None:
        b = self.budget_mib
        return None if b is None else b - self.total_mib

    @property
    def fits(self) -> bool | None:
        h = self.headroom_mib
        return None if h is None else h >= 0

    def to_json(self) -> dict:
        r = lambda x: round(x, 1)  # noqa: E731
        return {"name": self.name, "model_mib": r(self.model_mib), "kv_mib": r(self.kv_mib),
                "compute_mib": r(self.compute_mib), "output_mib": r(self.output_mib),
                "overhead_mib": r(self.overhead_mib), "total_mib": r(self.total_mib),
                "capacity_mib": self.capacity_mib, "available_mib": self.available_mib,
                "fits": self.fits}


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

    @property
    def fits(self) -> bool:
        return all(d.fits is not False for d in self.devices)

    def device(self, name: str) -> DeviceMemory | None:
        return next((d for d in self.devices if d.name == name), None)

    def to_json(self) -> dict:
        return {"devices": [d.to_json() for d in self.devices], "warnings": list(self.warnings),
                "n_ctx": self.n_ctx, "n_ctx_seq": self.n_ctx_seq, "n_parallel": self.n_seq_max,
                "kv_unified": self.kv_unified, "flash_attn": self.flash_attn,
                "n_gpu_layers": self.n_gpu_layers, "fit_changes": list(self.fit_changes)}


@dataclass(frozen=True)
class Calibration:
    """Learnt from a llama.cpp check: measured/estimated compute ratio per backend (1.0 = none)."""

    compute_scale: dict[str, float] = field(default_factory=dict)
    overhead_mib: dict[str, float] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------
# model view (cached per model object)
# ------------------------------------------------------------------------------------------------


@dataclass
class _Tensor:
    name: str
    shape: tuple[int, ...]
    type_name: str
    n_bytes: int
    offset: int
    file_index: int
    layer: int | None  # block number (None for non-block tensors)
    kind: str  # input | output | layer
    matmul: bool  # used by MUL_MAT / MUL_MAT_ID (repackable, row-splittable)
    nextn: bool  # belongs to an MTP layer


@dataclass
class _ModelView:
    arch: str
    n_layer_all: int
    n_layer: int
    n_nextn: int
    n_embd: int
    n_vocab: int
    n_ctx_train: int
    n_head: list[int]
    n_head_kv: list[int]
    k_len: list[int]
    v_len: list[int]
    is_swa: list[bool]
    n_swa: int
    n_ff: int
    n_expert: int
    n_expert_used: int
    n_ff_exp: int
    is_mla: bool
    tensors: list[_Tensor]
    tied_output: bool
    recurrent: list[bool]
    n_embd_r: int = 0
    n_embd_s: int = 0


def _per_layer(value: Any, n: int, default: int) -> list[int]:
    if value is None:
        return [default] * n
    if isinstance(value, list | tuple):
        out = [int(x) for x in value][:n]
        return out + [out[-1] if out else default] * (n - len(out))
    return [int(value)] * n


_BLK_RE = re.compile(r"^blk\.(\d+)\.")
_INPUT_NAMES = ("token_embd.", "pos_embd.", "token_types.", "per_layer_token_embd.", "tok_embeddings.")


def _is_matmul(name: str, shape: tuple[int, ...]) -> bool:
    base = name.rsplit(".", 1)[0] if name.endswith((".weight",)) else None
    if base is None or "norm" in base:
        return False
    if base.endswith(("token_embd", "pos_embd", "token_types", "per_layer_token_embd", "rope_freqs",
                      "ssm_a", "ssm_d", "ssm_conv1d", "ssm_dt", "exp_probs_b")):
        return False
    if len(shape) == 3:
        return "exps" in base
    return len(shape) == 2


_VIEWS: dict[int, tuple[Any, _ModelView]] = {}


def _view(model: Any) -> _ModelView:
    """The derived model view, cached per model object (the model is kept so its id stays unique)."""
    hit = _VIEWS.get(id(model))
    if hit is not None and hit[0] is model:
        return hit[1]
    view = _build_view(model)
    if len(_VIEWS) >= 8:
        _VIEWS.pop(next(iter(_VIEWS)))
    _VIEWS[id(model)] = (model, view)
    return view


def _build_view(model: Any) -> _ModelView:
    arch = model.architecture or "?"
    n_layer_all = int(model.block_count or 0)
    n_nextn = int(getattr(model, "nextn_layers", 0) or 0)
    n_layer = n_layer_all - n_nextn if n_layer_all > n_nextn else n_layer_all
    n_embd = int(model.embedding_length or 0)
    n_head = _per_layer(model.head_count, n_layer_all, 1)
    n_head_kv = _per_layer(model.head_count_kv if model.head_count_kv is not None else model.head_count,
                           n_layer_all, n_head[0] if n_head else 1)
    hmax = max(n_head) if n_head else 1
    k_len = int(model.key_length or (n_embd // max(1, hmax)))
    v_len = int(model.value_length or (n_embd // max(1, hmax)))
    k_swa = int(getattr(model, "key_length_swa", None) or k_len)
    v_swa = int(getattr(model, "value_length_swa", None) or v_len)
    n_swa = int(model.sliding_window or 0)
    pattern = model.sliding_window_pattern
    is_swa = [False] * n_layer_all
    if n_swa > 0 and (arch in SWA_PATTERNS or isinstance(pattern, list) or arch in _SWA_ALWAYS):
        if isinstance(pattern, list):
            is_swa = [bool(x) for x in pattern][:n_layer_all] + [False] * max(0, n_layer_all - len(pattern))
        else:
            n_pat, dense_first = SWA_PATTERNS.get(arch, (1, False))
            if isinstance(pattern, int) and not isinstance(pattern, bool):
                n_pat = pattern
            for il in range(n_layer):
                if dense_first:
                    is_swa[il] = n_pat == 0 or il % n_pat != 0
                else:
                    is_swa[il] = n_pat == 0 or il % n_pat < n_pat - 1
    k_lens = [k_swa if is_swa[i] else k_len for i in range(n_layer_all)]
    v_lens = [v_swa if is_swa[i] else v_len for i in range(n_layer_all)]
    # MLA (DeepSeek-style, key_length_mla and value_length_mla set): converted files already give
    # head_count_kv 1 and key_length = kv_lora_rank + rope dims; the cache holds K only (no V tensor)
    is_mla = bool(getattr(model, "key_length_mla", None)) and bool(getattr(model, "value_length_mla", None))
    tensors: list[_Tensor] = []
    names = set()
    n_ff = 0
    n_ff_exp = 0
    n_vocab = int(model.vocab_size or 0)
    for t in model.tensors:
        names.add(t.name)
        m = _BLK_RE.match(t.name)
        layer = int(m.group(1)) if m else None
        if layer is not None:
            kind = "layer" if layer < n_layer_all else "output"
        elif t.name.startswith(_INPUT_NAMES):
            kind = "input"
        else:
            kind = "output"
        shape = tuple(int(x) for x in t.shape)
        if t.name.endswith("ffn_up.weight") and len(shape) == 2:
            n_ff = max(n_ff, shape[1])
        if "ffn_up_exps" in t.name and len(shape) == 3:
            n_ff_exp = max(n_ff_exp, shape[1])
        if t.name == "token_embd.weight" and len(shape) == 2 and not n_vocab:
            n_vocab = shape[1]
        tensors.append(_Tensor(t.name, shape, t.type_name, int(t.n_bytes), int(t.offset),
                               int(getattr(t, "file_index", 0) or 0), layer, kind, _is_matmul(t.name, shape),
                               layer is not None and n_nextn > 0 and layer >= n_layer))
    if not n_ff:
        ff = getattr(model, "feed_forward_length", None)
        n_ff = max(ff) if isinstance(ff, list) and ff else int(ff or 4 * n_embd)
    hkv_raw = model.head_count_kv
    recurrent = [False] * n_layer_all
    if isinstance(hkv_raw, list):
        # hybrids (jamba, granite-hybrid, ...): a head_count_kv of 0 marks a recurrent layer
        recurrent = [int(x) == 0 for x in _per_layer(hkv_raw, n_layer_all, 1)]
    kv = getattr(model, "kv", None) or {}
    n_embd_r = n_embd_s = 0
    if arch in _INTERVAL_HYBRIDS:
        # qwen3next / qwen35: gated delta net layers, full attention every Nth (src/models/qwen35.cpp)
        flags = kv.get(f"{arch}.attention.recurrent_layers")
        if isinstance(flags, list) and flags:
            recurrent = [bool(x) for x in flags][:n_layer_all] + [False] * max(0, n_layer_all - len(flags))
        else:
            interval = int(getattr(model, "full_attention_interval", None) or
                           kv.get(f"{arch}.full_attention_interval") or 4)
            recurrent = [i < n_layer and (i + 1) % interval != 0 for i in range(n_layer_all)]
    if getattr(model, "ssm_inner_size", None):
        d_inner = int(model.ssm_inner_size)
        d_state = int(model.ssm_state_size or 0)
        d_conv = int(model.ssm_conv_kernel or 0)
        n_group = int(model.ssm_group_count or 0)
        n_embd_r = max(0, d_conv - 1) * (d_inner + 2 * n_group * d_state)
        n_embd_s = d_state * d_inner
        if arch in _RECURRENT_ARCHS:
            recurrent = [True] * n_layer_all
    return _ModelView(
        arch=arch, n_layer_all=n_layer_all, n_layer=n_layer, n_nextn=n_nextn, n_embd=n_embd, n_vocab=n_vocab,
        n_ctx_train=int(model.context_length or 4096), n_head=n_head, n_head_kv=n_head_kv, k_len=k_lens,
        v_len=v_lens, is_swa=is_swa, n_swa=n_swa, n_ff=n_ff, n_expert=int(model.expert_count or 0),
        n_expert_used=int(model.expert_used_count or 0), n_ff_exp=n_ff_exp or int(
            getattr(model, "expert_feed_forward_length", None) or 0),
        is_mla=is_mla, tensors=tensors, tied_output="output.weight" not in names, recurrent=recurrent,
        n_embd_r=n_embd_r, n_embd_s=n_embd_s)


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------


def row_size(type_name: str, n: int) -> int:
    """ggml_row_size: bytes of n elements of a ggml type (`type_size * n / blck_size`)."""
    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[type_name.upper()]]
    return size * n // block


def _pad(x: int, n: int) -> int:
    return (x + n - 1) // n * n


def normalize_cpu_flags(flags: tuple[str, ...] | list[str] | set[str]) -> frozenset[str]:
    out = set()
    for f in flags:
        f = f.lower()
        out.add(_FLAG_ALIASES.get(f, f))
        if f == "sve":
            out.add("sve")
    return frozenset(out)


def repackable(type_name: str, shape: tuple[int, ...], cpu_flags: frozenset[str]) -> bool:
    """True when the CPU backend would repack this weight (ggml-cpu/repack.cpp rules)."""
    rules = _REPACK_RULES.get(type_name.upper())
    if not rules or len(shape) < 2:
        return False
    ne1 = shape[1]
    for need, multiple in rules:
        if all(f in cpu_flags for f in need):
            return ne1 % multiple == 0
    return False


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
    from llm_tuner.core.devices import backend_of  # noqa: PLC0415 - core-internal

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
        devs = list(gpus)
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
        splits = [float(x) for x in args.tensor_split[:len(devs)]] + [0.0] * max(0, len(devs) - len(args.tensor_split))
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


# ------------------------------------------------------------------------------------------------
# KV cache, output, compute
# ------------------------------------------------------------------------------------------------


def _n_ctx(view: _ModelView, args: PlacementArgs) -> tuple[int, int]:
    """(n_ctx, n_ctx_seq) as llama_context computes them (llama-context.cpp:292-307).

    With fit on and the context unset (or -c 0) and KV not unified, fit first sets n_ctx to the trained
    context times the number of streams (common/fit.cpp "context size unset and KV cache not unified").
    """
    n_seq = args.n_seq_max
    if args.ctx:
        n_ctx = args.ctx
    elif args.fit and not args.unified:
        n_ctx = view.n_ctx_train * n_seq
    else:
        n_ctx = view.n_ctx_train
    n_ctx = _pad(n_ctx, 256)
    if args.unified:
        return n_ctx, n_ctx
    n_ctx_seq = _pad(n_ctx // n_seq, 256)
    return n_ctx_seq * n_seq, n_ctx_seq


def _flash_attn(view: _ModelView, args: PlacementArgs, devs: list[PlanDevice]) -> bool:
    if args.flash_attn == "on":
        return True
    if args.flash_attn == "off":
        return False
    # auto: enabled when every device that runs attention supports it (CPU, CUDA, Metal, Vulkan do)
    return True


def _tensor_shares(args: PlacementArgs, layer_dev: list[str]) -> dict[str, float]:
    """-sm tensor: the share of each GPU (by -ts, else even) of every tensor-parallel layer."""
    gpus = list(dict.fromkeys(d for d in layer_dev if d != "Host"))
    if len(gpus) < 2:
        return {}
    ts = [float(x) for x in args.tensor_split[:len(gpus)]]
    if len(ts) < len(gpus) or not any(ts):
        ts = [1.0] * len(gpus)
    total = sum(ts)
    return {g: t / total for g, t in zip(gpus, ts, strict=False)}


def _kv(view: _ModelView, args: PlacementArgs, layer_dev: list[str], fa: bool, *, mtp_ctx: bool = False,
        type_k: str | None = None, type_v: str | None = None
        ) -> tuple[dict[str, float], list[tuple[str, int, int]], int, int, int]:
    """KV MiB per device, (cache, cells, layers) list, base cells, swa cells, largest host layer (bytes)."""
    n_ctx, n_ctx_seq = _n_ctx(view, args)
    n_seq = args.n_seq_max
    n_stream = 1 if args.unified else n_seq
    kv_size = n_ctx_seq
    n_ubatch = min(args.n_ubatch, args.n_batch, n_ctx)
    swa_cells = _pad(min(kv_size, view.n_swa * (n_seq if args.unified else 1) + n_ubatch), 256)
    if args.swa_full:
        swa_cells = kv_size
    tk = (type_k or args.cache_type_k).upper()
    tv = (type_v or args.cache_type_v).upper()
    v_trans = not fa
    attn_layers = [il for il in range(view.n_layer_all) if not view.recurrent[il]]
    v_max = max((view.v_len[il] * view.n_head_kv[il] for il in attn_layers), default=0)
    out: dict[str, float] = {}
    host_layer_max = 0
    tensor_shares = _tensor_shares(args, layer_dev) if args.split_mode == "tensor" else {}
    count = {"base": 0, "swa": 0}
    use_filter = view.n_nextn > 0 and view.n_layer > 0
    for il in attn_layers:
        if use_filter and (il >= view.n_layer) != mtp_ctx:
            continue
        if not use_filter and mtp_ctx:
            continue
        swa = view.is_swa[il]
        cells = swa_cells if swa else kv_size
        nk = view.k_len[il] * view.n_head_kv[il]
        nv = v_max if v_trans else view.v_len[il] * view.n_head_kv[il]
        b = row_size(tk, nk) * cells * n_stream
        if not view.is_mla:
            b += row_size(tv, nv) * cells * n_stream
        dev = "Host" if args.no_kv_offload else layer_dev[il]
        if tensor_shares and dev != "Host":
            # -sm tensor: every layer's heads (and so its KV) are spread over the devices by -ts
            for name, share in tensor_shares.items():
                out[name] = out.get(name, 0.0) + b * share / MIB
        else:
            out[dev] = out.get(dev, 0.0) + b / MIB
        if dev == "Host":
            host_layer_max = max(host_layer_max, b)
        count["swa" if swa else "base"] += 1
    caches = []
    if count["base"]:
        caches.append(("base", kv_size, count["base"]))
    if count["swa"]:
        caches.append(("swa", swa_cells, count["swa"]))
    # recurrent state (Mamba / hybrid): F32 R and S per layer, rows = n_seq
    rs_layers = [il for il in range(view.n_layer_all) if view.recurrent[il]]
    if rs_layers and (view.n_embd_r or view.n_embd_s) and not mtp_ctx:
        # F32 R and S rows per sequence, times (1 + n_rs_seq) when a draft needs partial rollback
        n_rs_seq = 0
        if view.arch in _RS_ROLLBACK and any(t in ("draft-mtp", "draft-eagle3", "draft-dflash", "draft-dspark")
                                             for t in args.spec_types):
            n_rs_seq = args.draft_n_max
        rows = max(1, n_seq) * (1 + n_rs_seq)
        for il in rs_layers:
            if il >= view.n_layer:
                continue
            dev = "Host" if args.no_kv_offload else layer_dev[il]
            out[dev] = out.get(dev, 0.0) + (view.n_embd_r + view.n_embd_s) * 4 * rows / MIB
    return out, caches, kv_size, swa_cells, host_layer_max


def _n_outputs_max(args: PlacementArgs) -> int:
    """server_output_limits: min(n_batch, n_parallel * (1 + n_draft))."""
    if args.embeddings:
        return args.n_batch
    n_draft = 0
    for s in args.spec_types:
        if s.startswith("draft-"):
            n_draft = max(n_draft, args.draft_n_max)
        elif s in ("ngram-simple", "ngram-map-k", "ngram-map-k4v"):
            n_draft = max(n_draft, args.ngram_size_m)
        elif s == "ngram-mod":
            n_draft = max(n_draft, 64)
    return max(1, min(args.n_batch, args.n_seq_max * (1 + n_draft)))


def _compute(view: _ModelView, args: PlacementArgs, layer_dev: list[str], placements: list[TensorPlacement],
             fa: bool, kv_cells: int, swa_cells: int, devs: list[PlanDevice],
             kv_host_layer: int = 0) -> dict[str, float]:
    """Compute buffer MiB per device: analytic worst-case graph (see module docstring)."""
    n_ctx, n_ctx_seq = _n_ctx(view, args)
    n_batch = min(args.n_batch, n_ctx)
    T = min(n_ctx, min(args.n_ubatch, n_batch))  # noqa: N806
    O = min(T, _n_outputs_max(args))  # noqa: N806, E741
    E, F = view.n_embd, view.n_ff  # noqa: N806
    mask_b = 2 if fa else 4
    n_stream = 1 if args.unified else args.n_seq_max
    base_kv = kv_cells * n_stream if n_stream > 1 else kv_cells
    # masks: [n_kv, T/n_stream, 1, n_stream] per distinct cache
    has_base = any(not s and not r for s, r in zip(view.is_swa, view.recurrent, strict=False))
    has_swa = any(view.is_swa)
    mask = 0
    if has_base:
        mask += kv_cells * T * mask_b
    if has_swa:
        mask += swa_cells * T * mask_b
    del base_kv
    hq = max(h * k for h, k in zip(view.n_head, view.k_len, strict=False)) if view.n_head else E
    hkv = max((h * k for h, k in zip(view.n_head_kv, view.k_len, strict=False)), default=0)
    heads = max(view.n_head) if view.n_head else 1
    if view.n_expert and view.n_ff_exp:
        ffn = (_C_FFN_RESIDUAL * E + _C_FFN * view.n_expert_used * view.n_ff_exp + 3 * view.n_expert) * T * 4
        if view.n_ff and any(t.name.endswith("ffn_up_shexp.weight") for t in view.tensors):
            ffn += 2 * view.n_ff * T * 4
    else:
        ffn = (_C_FFN_RESIDUAL * E + _C_FFN * F) * T * 4
    if fa:
        attn = (2 * E + 3 * hq + 2 * hkv) * T * 4
    else:
        a, b, c = _C_ATTN_NOFA
        n_kv_max = kv_cells if has_base else swa_cells
        attn = heads * n_kv_max * T * 4 + (a * E + b * hq + c * hkv) * T * 4
    layer_peak = max(ffn, attn)
    out_peak = view.n_vocab * O * 4 + 5 * E * T * 4  # logits + final norm/residual rows (fitted)
    inputs = T * 4 * 3 + O * 4
    per_dev: dict[str, float] = {}
    layer_devs = set(layer_dev[:-1])
    for dev in layer_devs:
        peak = layer_peak
        if layer_dev[-1] == dev:
            peak = max(peak, out_peak)
        per_dev[dev] = (mask + peak + inputs) / MIB
    if layer_dev[-1] not in per_dev:
        per_dev[layer_dev[-1]] = (out_peak + inputs) / MIB
    gpu_devs = [d.name for d in devs if d.backend != "CPU"]
    if gpu_devs:
        per_dev.update(_compute_gpu(view, args, layer_dev, placements, devs, gpu_devs, fa, T, mask, inputs,
                                    ffn, attn, out_peak, kv_cells, swa_cells))
    return per_dev


# the scheduler keeps this many copies of every graph input when pipeline parallelism is on
# (ggml/src/ggml-backend.cpp:912 GGML_SCHED_MAX_COPIES, used by ggml_backend_sched_new(..., parallel=true))
_SCHED_MAX_COPIES = 4
# a GPU takes over an op whose weight is in host memory when the op's batch is at least this big
# (ggml-cuda.cu ggml_backend_cuda_device_offload_op: op_offload_min_batch_size, default 32)
_OP_OFFLOAD_MIN_BATCH = 32
# backends whose flash-attention op allocates F16 copies of quantized K/V in its own output
# (ggml-cuda.cu ggml_backend_cuda_buffer_type_get_alloc_size -> fattn.cu ggml_cuda_flash_attn_ext_get_alloc_size)
_FA_F16_COPY_BACKENDS = {"CUDA", "ROCm", "MUSA"}
# architectures without the mixed token/embedding input path (llama-arch.cpp llm_arch_supports_mixed_batch)
# the big FFN matmul weights of a layer (dense and expert): where they are decides which GPU runs the FFN
_FFN_W_RE = re.compile(r"\.ffn_(up|down|gate|gate_up)(_exps|_chexps)?\.weight$")
_NO_MIXED_BATCH = {"cogvlm", "deepseek4", "granite-switch", "eagle3", "dflash", "gemma4-assistant"}


def _pipeline_parallel(args: PlacementArgs, layer_dev: list[str], devs: list[PlanDevice]) -> bool:
    """llama-context.cpp:432-437: several devices, every layer and the output offloaded, layer split, KV
    offloaded and no tensor overrides (--cpu-moe / --n-cpu-moe are overrides too)."""
    return (len(devs) > 1 and layer_dev.count("Host") == 0 and args.split_mode == "layer"
            and not args.no_kv_offload and not args.overrides)


def _compute_gpu(view: _ModelView, args: PlacementArgs, layer_dev: list[str], placements: list[TensorPlacement],
                 devs: list[PlanDevice], gpu_devs: list[str], fa: bool, T: int, mask: float,  # noqa: N803
                 inputs: float, ffn: float, attn: float, out_peak: float, kv_cells: int, swa_cells: int,
                 ) -> dict[str, float]:
    """Compute buffers (MiB) of a build with GPUs: the GPUs' buffers and the host one (CUDA_Host).

    The rules, from the scheduler (ggml/src/ggml-backend.cpp) and the graph (src/llama-graph.cpp):
    - every graph input (tokens, positions, the KQ mask(s), the embedding inputs) is assigned to the CPU
      backend, so it lives in the host compute buffer (ggml_backend_sched_backend_id_from_cur: "graph
      input" -> last backend); with pipeline parallelism each input is kept in GGML_SCHED_MAX_COPIES copies.
    - build_inp_embd (llama-graph.cpp:2413-2490) makes two embedding paths when the architecture
      supports mixed batches: inputs inp_embd and inp_mixed_embd (n_embd x T, F32) and two get_rows of
      token_embd (which is always on the CPU): the host buffer holds all four; the GPU with the first
      layer receives copies of all four (times the copies under pipeline parallelism).
    - the KQ mask is F16 with flash attention, else F32 (build_attn_inp_kq_mask), [n_kv, T] per cache;
      each GPU that runs attention gets its own copy.
    - a GPU holding later layers only receives the residual stream (n_embd x T) from the previous one.
    - K/V of layers whose cache is in host memory (partial -ngl, -nkvo) are copied whole into the GPU
      that runs their attention (split inputs), for a batch of >= 32 tokens (op offload).
    - CUDA flash attention with the MMA/tile kernels (any prompt batch) allocates F16 copies of K and V
      beside its output when they are not F16 (quantized or copied-from-host F32), so the attention peak
      holds q, the output, the residual and those copies (fattn.cu:722-756, fattn-common.cuh:53-82).
    """
    E = view.n_embd  # noqa: N806
    r = E * T * 4  # one n_embd x T F32 activation
    n_paths = 1 if view.arch in _NO_MIXED_BATCH else 2
    pp = _pipeline_parallel(args, layer_dev, devs)
    n_copies = _SCHED_MAX_COPIES if pp else 1
    backend = {d.name: d.backend for d in devs}
    offload = args.op_offload and T >= _OP_OFFLOAD_MIN_BATCH
    # per-layer K and V row bytes (per cell) and where each layer's cache is
    attn_layers = [il for il in range(view.n_layer) if not view.recurrent[il]]
    tk = args.cache_type_k.upper()
    tv = args.cache_type_v.upper()
    hq_out = max((view.n_head[il] * view.v_len[il] for il in attn_layers), default=E)
    gpu_set = set(gpu_devs)
    # the GPU with the first offloaded layer receives the embeddings and runs the attention of host layers
    # next to it (the scheduler expands GPU assignments up the graph); the first GPU backend is the one that
    # takes over host weights (ggml_backend_sched_backend_id_from_cur tries backends in order)
    first_gpu = next((d for d in layer_dev[:-1] if d in gpu_set), None)
    offload_gpu = gpu_devs[0]
    out: dict[str, float] = {}
    for dev in dict.fromkeys(d for d in layer_dev if d in gpu_set):
        be = backend.get(dev, "CUDA")
        # attention peak per layer run on this GPU: layers of this GPU, plus host layers it takes over
        fa_extra = 0.0
        for il in attn_layers:
            on_host_kv = args.no_kv_offload or layer_dev[il] == "Host"
            runs_here = layer_dev[il] == dev or (layer_dev[il] == "Host" and offload and dev == first_gpu) or (
                args.no_kv_offload and layer_dev[il] == dev)
            if not runs_here:
                continue
            cells = swa_cells if view.is_swa[il] else kv_cells
            n_stream = 1 if args.unified else args.n_seq_max
            nk = view.k_len[il] * view.n_head_kv[il] * cells * n_stream
            nv = (0 if view.is_mla else view.v_len[il] * view.n_head_kv[il]) * cells * n_stream
            extra = 0.0
            if on_host_kv and (offload or layer_dev[il] != "Host"):
                extra += row_size(tk, nk) + row_size(tv, nv)  # the copies of K and V
            if fa and be in _FA_F16_COPY_BACKENDS and T > 2:
                extra += (nk * 2 if tk != "F16" else 0) + (nv * 2 if tv != "F16" else 0)
            fa_extra = max(fa_extra, extra)
        if fa:
            attn_dev = max(attn, (2 * E + 2 * hq_out) * T * 4 + fa_extra) if fa_extra else attn
        else:
            attn_dev = attn + fa_extra
        # the last layer runs its FFN on the output rows only (the graphs get_rows(inp_out_ids) after its
        # attention, e.g. src/models/qwen3.cpp "il == n_layer - 1 && inp_out_ids"): a GPU whose only layer is
        # the last one has no full-batch FFN
        own = [il for il in range(view.n_layer) if layer_dev[il] == dev]
        only_last = bool(own) and own == [view.n_layer - 1] and _n_outputs_max(args) < T
        # FFN weights of its layers all in host memory (--cpu-moe, -ot ffn=CPU): with op offload the first GPU
        # backend runs those FFN matmuls, not this one
        own_set = set(own)
        ffn_w = [p for p in placements if p.layer in own_set and _FFN_W_RE.search(p.name)]
        ffn_elsewhere = (dev != offload_gpu and offload and bool(ffn_w)
                         and all(p.device == "Host" for p in ffn_w))
        peak = attn_dev if (only_last or ffn_elsewhere) else max(ffn, attn_dev)
        if layer_dev[-1] == dev:
            peak = max(peak, out_peak)
        # weights of host layers this GPU takes over (largest one, copied in its own split)
        if dev == offload_gpu and offload:
            cpu_w = [p.n_bytes for p in placements
                     if p.device == "Host" and p.layer is not None and p.buffer != "CPU_REPACK"]
            if cpu_w:
                peak = max(peak, ffn + max(cpu_w))
        recv = mask * n_copies
        if pp:
            # under pipeline parallelism every split input is kept in n_copies copies, never reused
            # (ggml-backend.cpp pass 5: tensor_copy marked input+output when n_copies > 1); one copy of the
            # embedding inputs is already in the single-GPU peak above
            recv += (n_copies - 1) * (2 * n_paths * r if dev == first_gpu else r)
        out[dev] = (recv + peak + inputs) / MIB
    if layer_dev[-1] in gpu_set and layer_dev[-1] not in out:
        out[layer_dev[-1]] = (out_peak + inputs) / MIB
    # host buffer: every graph input (times the copies) + the get_rows of the embedding paths; host layers
    # only compute here when their batch is too small for op offload
    host = n_copies * (mask + n_paths * r + inputs) + n_paths * r
    host_layers = [il for il in range(view.n_layer_all) if layer_dev[il] == "Host"]
    if host_layers and not offload:
        host = max(host, mask + max(ffn, attn) + inputs + n_paths * r)
    out["Host"] = host / MIB
    return out


def _compute_mtp(view: _ModelView, args: PlacementArgs, fa: bool, kv_cells: int) -> float:
    """Compute bytes of an MTP context: mask + one attention block (+ logits for one row per sequence)."""
    n_ctx, _ = _n_ctx(view, args)
    T = min(n_ctx, args.n_ubatch, args.n_batch)  # noqa: N806
    E = view.n_embd  # noqa: N806
    il = view.n_layer if view.n_layer < view.n_layer_all else view.n_layer_all - 1
    hq = view.n_head[il] * view.k_len[il]
    hkv = view.n_head_kv[il] * view.k_len[il]
    if fa:
        peak = kv_cells * T * 2 + (2 * E + 3 * hq + 2 * hkv) * T * 4
    else:
        a, b, c = _C_ATTN_NOFA
        peak = kv_cells * T * 4 + view.n_head[il] * kv_cells * T * 4 + (a * E + b * hq + c * hkv) * T * 4
    return peak + view.n_vocab * args.n_seq_max * 4


# ------------------------------------------------------------------------------------------------
# the plan
# ------------------------------------------------------------------------------------------------


def _raw_plan(view: _ModelView, args: PlacementArgs, gpus: list[PlanDevice], host: PlanDevice,
              flags: frozenset[str], calibration: Calibration | None,
              draft: tuple[Any, PlacementArgs] | None) -> tuple[MemoryPlan, list[PlanDevice]]:
    devs = _model_devices(args, gpus)
    layer_dev, n_gpu = _layer_devices(view, args, devs)
    placements = _place(view, args, devs, layer_dev, flags)
    bufs, weights, fit_weights = _weights_by_buffer(view, placements, devs, args)
    fa = _flash_attn(view, args, devs)
    kv, caches, kv_cells, swa_cells, kv_host_layer = _kv(view, args, layer_dev, fa)
    compute = _compute(view, args, layer_dev, placements, fa, kv_cells, swa_cells, devs, kv_host_layer)
    n_ctx, n_ctx_seq = _n_ctx(view, args)
    n_seq = args.n_seq_max
    out_b = (view.n_vocab + (view.n_embd if args.embeddings else 0)) * n_seq * 4 / MIB
    extra_model: dict[str, float] = {}
    extra_kv: dict[str, float] = {}
    extra_compute: dict[str, float] = {}
    warnings: list[str] = []
    # MTP context (--spec-type draft-mtp): the nextn block's own KV (draft cache types), output buffer
    # and compute (one attention block; the FFN only runs on the output rows), on the block's device
    if args.spec_mtp:
        if view.n_nextn == 0:
            warnings.append("--spec-type draft-mtp: this model has no MTP (nextn) layers; llama.cpp will refuse it.")
        else:
            mkv, mcaches, mcells, mswa, _ = _kv(view, args, layer_dev, fa, mtp_ctx=True,
                                               type_k=args.draft_cache_type_k, type_v=args.draft_cache_type_v)
            for d, v in mkv.items():
                extra_kv[d] = extra_kv.get(d, 0.0) + v
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
        _, dweights, _ = _weights_by_buffer(dview, dplace, ddevs, dargs)
        dfa = _flash_attn(dview, dargs, ddevs)
        dkv, _, dcells, dswa, dhost = _kv(dview, dargs, dlayer_dev, dfa)
        dcomp = _compute(dview, dargs, dlayer_dev, dplace, dfa, dcells, dswa, ddevs, dhost)
        for src, dst in ((dweights, extra_model), (dkv, extra_kv), (dcomp, extra_compute)):
            for d, v in src.items():
                dst[d] = dst.get(d, 0.0) + v
        out_b += dview.n_vocab * n_seq * 4 / MIB
    scale = (calibration.compute_scale if calibration else {}) or {}
    over = (calibration.overhead_mib if calibration else {}) or {}
    devices: list[DeviceMemory] = []
    for d in devs:
        backend = d.backend
        comp = compute.get(d.name, 0.0) * scale.get(backend, 1.0) + extra_compute.get(d.name, 0.0)
        used = weights.get(d.name, 0.0) + kv.get(d.name, 0.0) + comp + extra_model.get(d.name, 0.0)
        overhead = over.get(backend, RUNTIME_OVERHEAD_MIB.get(backend, 300)) if used > 0 or True else 0.0
        devices.append(DeviceMemory(
            name=d.name, backend=backend, model_mib=weights.get(d.name, 0.0) + extra_model.get(d.name, 0.0),
            kv_mib=kv.get(d.name, 0.0) + extra_kv.get(d.name, 0.0), compute_mib=comp, output_mib=0.0,
            overhead_mib=float(overhead), capacity_mib=d.capacity_mib, available_mib=d.free_mib,
            layers=sum(1 for x in layer_dev if x == d.name), buffers=dict(bufs.get(d.name, {})),
            hypothetical=d.hypothetical, runtime_in_free=d.free_includes_runtime and d.free_mib is not None,
            fit_model_mib=fit_weights.get(d.name, 0.0) + extra_model.get(d.name, 0.0)))
    hcomp = compute.get("Host", 0.0) * scale.get("CPU", 1.0) + extra_compute.get("Host", 0.0)
    devices.append(DeviceMemory(
        name="Host", backend="CPU", model_mib=weights.get("Host", 0.0) + extra_model.get("Host", 0.0),
        kv_mib=kv.get("Host", 0.0) + extra_kv.get("Host", 0.0), compute_mib=hcomp, output_mib=out_b,
        overhead_mib=float(over.get("Host", HOST_OVERHEAD_MIB)), capacity_mib=host.capacity_mib,
        available_mib=host.free_mib, layers=sum(1 for x in layer_dev if x == "Host"),
        buffers=dict(bufs.get("Host", {})), hypothetical=host.hypothetical,
        fit_model_mib=fit_weights.get("Host", 0.0) + extra_model.get("Host", 0.0)))
    plan = MemoryPlan(devices=tuple(devices), warnings=tuple(warnings), args=args, n_ctx=n_ctx,
                      n_ctx_seq=n_ctx_seq, n_seq_max=n_seq, kv_unified=args.unified, flash_attn=fa,
                      n_gpu_layers=n_gpu, n_layers_total=view.n_layer_all + 1, kv_cells=tuple(caches))
    return plan, devs


def _targets(args: PlacementArgs, devs: list[PlanDevice]) -> dict[str, int]:
    t = list(args.fit_target_mib) or [1024]
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
        use = _fit_use_mib(d) if fit_accounting else d.total_mib
        if use > b - targets.get(d.name, 0):
            return False
    return True


def plan_memory(model: Any, args: PlacementArgs, gpus: list[PlanDevice] | tuple[PlanDevice, ...] = (),
                host: PlanDevice | None = None, *, cpu_flags: tuple[str, ...] | frozenset[str] = (),
                calibration: Calibration | None = None, draft_model: Any = None,
                apply_fit: bool = True) -> MemoryPlan:
    """The memory plan for `model` (core.gguf_info.ModelInfo) run with `args` on `gpus` + `host`.

    `gpus` are the devices llama.cpp would see (detected or planned); `host` is RAM (name 'Host').
    `cpu_flags` decide which weights the CPU backend repacks. `draft_model` (ModelInfo) counts a
    `-md` draft. With `apply_fit` (and `args.fit`), what llama.cpp's fit step would change is applied
    and said in the warnings.
    """
    view = _view(model)
    gpus = list(gpus)
    host = host or PlanDevice("Host", "CPU", None)
    flags = normalize_cpu_flags(cpu_flags)
    draft = None
    if draft_model is not None:
        dargs = args.with_(ngl=args.draft_ngl, devices=args.draft_devices if args.draft_devices is not None
                           else args.devices, cache_type_k=args.draft_cache_type_k,
                           cache_type_v=args.draft_cache_type_v, overrides=(), tensor_split=())
        draft = (draft_model, dargs)
    plan, devs = _raw_plan(view, args, gpus, host, flags, calibration, draft)
    warnings = list(plan.warnings)
    changes: list[str] = []
    if apply_fit and args.fit and devs and args.split_mode != "tensor":
        targets = _targets(args, devs)
        if not _fits_with_margin(plan, targets, fit_accounting=True):
            fitted_args, changes = _emulate_fit(view, args, gpus, host, flags, calibration, draft, targets)
            if changes:
                plan, devs = _raw_plan(view, fitted_args, gpus, host, flags, calibration, draft)
                warnings = list(plan.warnings)
                warnings.extend(f"fit: {c}" for c in changes)
    elif apply_fit and args.fit and host.capacity_mib and (args.ctx is None):
        # no GPU: fit compares host use with total RAM minus the first -fitt margin and only shrinks context
        margin = (args.fit_target_mib or (1024,))[0]

        def host_ok(p: MemoryPlan) -> bool:
            h = p.device("Host")
            return h is None or _fit_use_mib(h) <= host.capacity_mib - margin

        if not host_ok(plan):
            step = 256 * (1 if args.unified else args.n_seq_max)
            lo = max(256, min(args.fit_ctx_min * (1 if args.unified else args.n_seq_max), view.n_ctx_train))
            best = _bisect_ctx(lambda c: host_ok(_raw_plan(view, args.with_(ctx=c), gpus, host, flags, calibration,
                                                           draft)[0]), lo, view.n_ctx_train, step)
            plan, devs = _raw_plan(view, args.with_(ctx=best), gpus, host, flags, calibration, draft)
            changes = [f"context reduced to {best} tokens to fit host memory minus the -fitt margin "
                       "(set -c to choose it yourself)"]
            warnings = list(plan.warnings) + [f"fit: {c}" for c in changes]
    warnings.extend(_warnings(view, plan, devs))
    return replace(plan, warnings=tuple(warnings), fit_changes=tuple(changes))


def _emulate_fit(view: _ModelView, args: PlacementArgs, gpus: list[PlanDevice], host: PlanDevice,
                 flags: frozenset[str], calibration: Calibration | None, draft: Any,
                 targets: dict[str, int]) -> tuple[PlacementArgs, list[str]]:
    """What common/fit.cpp would do: shrink an unset context, then place layers if the user did not."""
    changes: list[str] = []

    def ok(a: PlacementArgs) -> bool:
        return _fits_with_margin(_raw_plan(view, a, gpus, host, flags, calibration, draft)[0], targets,
                                 fit_accounting=True)

    cur = args
    if args.ctx is None:
        lo = max(256, min(args.fit_ctx_min * (1 if args.unified else args.n_seq_max), view.n_ctx_train))
        hi = view.n_ctx_train
        if ok(cur.with_(ctx=lo)):
            best = _bisect_ctx(lambda c: ok(cur.with_(ctx=c)), lo, hi, 256 * (1 if args.unified else args.n_seq_max))
            cur = cur.with_(ctx=best)
            changes.append(f"context reduced to {best} tokens so each device keeps its -fitt margin "
                           f"(set -c to choose it yourself)")
            return cur, changes
        cur = cur.with_(ctx=lo)
        changes.append(f"context reduced to the -fitc minimum {lo}")
    if args.user_placed or args.split_mode == "row":
        changes.append("layers not placed by fit: -ngl/-ts/-ot/--cpu-moe set by you (fit aborts that step)")
        return cur, changes
    n_all = view.n_layer_all + 1
    # MoE: keep all layers on the GPUs and move the experts of the first N blocks to the CPU
    if view.n_expert:
        for n in range(0, view.n_layer + 1):
            trial = cur.with_(overrides=tuple((rf"blk\.{j}{FFN_EXPS_REGEX}", "CPU") for j in range(n)))
            if ok(trial):
                if n:
                    changes.append(f"experts of the first {n} blocks moved to the CPU (as --n-cpu-moe {n})")
                return trial, changes
    for ngl in range(n_all, -1, -1):
        trial = cur.with_(ngl=ngl)
        if ok(trial):
            changes.append(f"{ngl} of {n_all} layers placed on GPUs (as -ngl {ngl})")
            return trial, changes
    changes.append("nothing fits even with every layer on the CPU")
    return cur.with_(ngl=0), changes


def _bisect_ctx(ok, lo: int, hi: int, step: int) -> int:
    lo_k, hi_k = lo // step, max(lo // step, hi // step)
    while lo_k < hi_k:
        mid = (lo_k + hi_k + 1) // 2
        if ok(mid * step):
            lo_k = mid
        else:
            hi_k = mid - 1
    return max(lo, lo_k * step)


def _warnings(view: _ModelView, plan: MemoryPlan, devs: list[PlanDevice]) -> list[str]:
    w = []
    a = plan.args
    for d in plan.devices:
        if d.fits is False:
            w.append(f"{d.name}: needs {d.total_mib:.0f} MiB but has {d.budget_mib} MiB "
                     f"({-d.headroom_mib:.0f} MiB short)")
    host = plan.device("Host")
    if host is not None and host.headroom_mib is not None and a.cache_ram_mib and 0 <= host.headroom_mib < a.cache_ram_mib:
        w.append(f"Host: the prompt cache may grow to {a.cache_ram_mib} MiB of RAM while serving (--cache-ram); "
                 f"only {host.headroom_mib:.0f} MiB are left")
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
        if u in ("--mlock", "--no-mmap", "--mmap"):
            w.append(f"{u} was removed from llama-server; use -lm/--load-mode")
    if a.split_mode == "row" and len(devs) > 1 and any(d.backend != "SYCL" for d in devs):
        w.append("-sm row: in this llama.cpp only SYCL has row-split buffers; with "
                 f"{', '.join(sorted({d.backend for d in devs}))} the load fails ('does not support split buffers'). "
                 "Use -sm layer (or -sm tensor)")
    if a.split_mode == "tensor":
        w.append("-sm tensor (experimental, needs flash attention): estimated as every layer's weights and KV "
                 "spread over the GPUs by -ts; fit does not run for it")
    known = {d.name for d in devs}
    odd = sorted({b for _p, b in a.overrides if not b.upper().startswith("CPU") and b not in known})
    if odd:
        w.append(f"-ot sends tensors to {', '.join(odd)}, which is not among the planned devices: "
                 "those weights are not counted anywhere in this plan")
    gpus_missing = [n for n in (a.devices or ()) if n not in {d.name for d in devs}]
    if gpus_missing:
        w.append(f"unknown device(s): {', '.join(gpus_missing)}")
    return w


# ------------------------------------------------------------------------------------------------
# solver
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FitAnswer:
    """A solver result: the arguments that fit (or None) and why, in words."""

    args: PlacementArgs | None
    value: Any
    reason: str
    plan: MemoryPlan | None = None


def solve(model: Any, args: PlacementArgs, gpus: list[PlanDevice] | tuple[PlanDevice, ...] = (),
          host: PlanDevice | None = None, *, goal: str = "context", targets_mib: dict[str, int] | None = None,
          cpu_flags: tuple[str, ...] = (), calibration: Calibration | None = None) -> FitAnswer:
    """Find what fits with each device keeping its margin (`targets_mib`, default `-fitt`).

    goal 'context': the largest context (multiple of 256, not above the trained one) with the
    placement as given. goal 'layers': the most GPU layers (then for MoE the fewest expert blocks on
    CPU) at the given context. goal 'split': a -ts over the GPUs that balances free memory.
    """
    view = _view(model)
    host = host or PlanDevice("Host", "CPU", None)
    flags = normalize_cpu_flags(cpu_flags)
    gl = list(gpus)
    devs = _model_devices(args, gl)
    targets = targets_mib or _targets(args, devs)
    base = args.with_(fit=False)

    def plan_of(a: PlacementArgs) -> MemoryPlan:
        return _raw_plan(view, a, gl, host, flags, calibration, None)[0]

    def ok(a: PlacementArgs) -> bool:
        return _fits_with_margin(plan_of(a), targets, host_too=True)

    def bottleneck(a: PlacementArgs) -> str:
        p = plan_of(a)
        worst = min((d for d in p.devices if d.budget_mib is not None),
                    key=lambda d: d.budget_mib - targets.get(d.name, 0) - d.total_mib, default=None)
        if worst is None:
            return "no device has a known capacity"
        short = worst.total_mib - (worst.budget_mib - targets.get(worst.name, 0))
        return (f"{worst.name} is the limit: {worst.total_mib:.0f} MiB needed "
                f"(weights {worst.model_mib:.0f}, KV {worst.kv_mib:.0f}, compute {worst.compute_mib:.0f}), "
                f"{worst.budget_mib} MiB available minus {targets.get(worst.name, 0)} MiB margin"
                + (f" ({short:.0f} MiB short)" if short > 0 else ""))

    if goal == "context":
        step = 256 * (1 if base.unified else base.n_seq_max)
        lo, hi = step, _pad(view.n_ctx_train, step)
        if not ok(base.with_(ctx=lo)):
            return FitAnswer(None, None, "even the smallest context does not fit: " + bottleneck(base.with_(ctx=lo)))
        best = _bisect_ctx(lambda c: ok(base.with_(ctx=c)), lo, hi, step)
        a = base.with_(ctx=best)
        why = ("the trained context fits" if best >= view.n_ctx_train
               else "one more step does not fit: " + bottleneck(base.with_(ctx=best + step)))
        return FitAnswer(a, best, f"largest context {best} tokens; {why}", plan_of(a))
    if goal == "layers":
        n_all = view.n_layer_all + 1
        if ok(base.with_(ngl=n_all)):
            if view.n_expert:
                return FitAnswer(base.with_(ngl=n_all), n_all, "every layer and expert fits on the GPUs",
                                 plan_of(base.with_(ngl=n_all)))
            return FitAnswer(base.with_(ngl=n_all), n_all, "every layer fits on the GPUs", plan_of(base.with_(ngl=n_all)))
        if view.n_expert:
            keep = tuple(o for o in base.overrides if "exps" not in o[0])
            for n in range(1, view.n_layer + 1):
                a = base.with_(ngl=n_all, overrides=keep + tuple(
                    (rf"blk\.{j}{FFN_EXPS_REGEX}", "CPU") for j in range(n)))
                if ok(a):
                    return FitAnswer(a, n, f"all layers on GPU with the experts of the first {n} blocks on CPU "
                                     f"(--n-cpu-moe {n}); {n - 1} is too few: " + bottleneck(
                                         base.with_(ngl=n_all, overrides=keep + tuple(
                                             (rf"blk\.{j}{FFN_EXPS_REGEX}", "CPU") for j in range(n - 1)))),
                                     plan_of(a))
        for ngl in range(n_all - 1, -1, -1):
            a = base.with_(ngl=ngl)
            if ok(a):
                return FitAnswer(a, ngl, f"-ngl {ngl} of {n_all}; one more layer does not fit: "
                                 + bottleneck(base.with_(ngl=ngl + 1)), plan_of(a))
        return FitAnswer(None, None, "nothing fits, even on the CPU: " + bottleneck(base.with_(ngl=0)))
    if goal == "split":
        if len(devs) < 2:
            return FitAnswer(None, None, "a split needs two or more GPUs")
        free = [max(1, (d.free_mib or d.capacity_mib or 0) - targets.get(d.name, 0)) for d in devs]
        # remove what does not move with layers (compute, overhead) before proportioning
        p = plan_of(base.with_(tensor_split=tuple(float(f) for f in free)))
        fixed = {d.name: d.compute_mib + d.overhead_mib for d in p.devices}
        share = [max(1.0, f - fixed.get(d.name, 0.0)) for f, d in zip(free, devs, strict=False)]
        tot = sum(share)
        ts = tuple(round(100 * s / tot) for s in share)
        a = base.with_(tensor_split=tuple(float(x) for x in ts))
        return FitAnswer(a, ts, f"-ts {','.join(str(x) for x in ts)} puts layers in proportion to the memory "
                         "each device has left after compute buffers and runtime" +
                         ("" if ok(a) else "; it still does not fit: " + bottleneck(a)), plan_of(a))
    raise ValueError(goal)


# ------------------------------------------------------------------------------------------------
# override-tensor builder
# ------------------------------------------------------------------------------------------------


def rule_ffn_every_nth(n: int, start: int = 0, n_layer: int | None = None, buffer: str = "CPU") -> str:
    """`-ot` rule for the FFN weights of every n-th block (start, start+n, ...)."""
    blocks = list(range(start, n_layer if n_layer is not None else 0, max(1, n)))
    return rf"blk\.({'|'.join(str(b) for b in blocks)})\.ffn_.*={buffer}"


def rule_experts_blocks(a: int, b: int, buffer: str = "CPU") -> str:
    """`-ot` rule for the expert weights of blocks a..b (inclusive)."""
    blocks = "|".join(str(i) for i in range(a, b + 1))
    return rf"blk\.({blocks}){FFN_EXPS_REGEX}={buffer}"


@dataclass(frozen=True)
class RulePreview:
    matched: tuple[str, ...]
    moved_mib: float  # weights that change device under the rule (MiB)
    error: str | None = None


def preview_rule(model: Any, args: PlacementArgs, rule: str, gpus: list[PlanDevice] | tuple[PlanDevice, ...] = (),
                 cpu_flags: tuple[str, ...] = ()) -> RulePreview:
    """Which tensors a `pattern=BUFFER` rule matches and how many MiB it moves, given the other rules."""
    if "=" not in rule:
        return RulePreview((), 0.0, "a rule is <regex>=<buffer>, e.g. blk\\.1\\.ffn_.*=CPU")
    pat, buf = rule.rsplit("=", 1)
    if _rx(pat) is None:
        return RulePreview((), 0.0, f"not a valid regular expression: {pat}")
    before = {p.name: p for p in place_tensors(model, args, gpus, cpu_flags)}
    after = {p.name: p for p in place_tensors(model, args.with_(overrides=((pat, buf), *args.overrides)), gpus,
                                              cpu_flags)}
    view = _view(model)
    matched = tuple(t.name for t in view.tensors if regex_search(pat, t.name))
    moved = sum(p.n_bytes for n, p in after.items() if n in before and before[n].device != p.device)
    return RulePreview(matched, moved / MIB)


def placement_argv(args: PlacementArgs, *, for_fit_params: bool = False) -> list[str]:
    """PlacementArgs -> llama-server arguments (only what differs from the defaults).

    `for_fit_params` leaves out what llama-fit-params does not accept (`-kvu`, speculative flags) and
    the `-fit` switch, so the same question can be asked of `llama-fit-params`.
    """
    d = PlacementArgs()
    out: list[str] = []
    if args.model:
        out += ["-m", args.model]
    if args.ctx is not None:
        out += ["-c", str(args.ctx)]
    if args.ngl is not None:
        out += ["-ngl", {-1: "auto", -2: "all"}.get(args.ngl, str(args.ngl))]
    if args.split_mode != d.split_mode:
        out += ["-sm", args.split_mode]
    if args.devices is not None:
        out += ["-dev", ",".join(args.devices) or "none"]
    if args.tensor_split:
        out += ["-ts", ",".join(f"{x:g}" for x in args.tensor_split)]
    if args.main_gpu:
        out += ["-mg", str(args.main_gpu)]
    if args.overrides:
        out += ["-ot", ",".join(f"{p}={b}" for p, b in args.overrides)]
    for flag, name in (("-ctk", "cache_type_k"), ("-ctv", "cache_type_v"), ("-fa", "flash_attn"),
                       ("-b", "n_batch"), ("-ub", "n_ubatch"), ("-lm", "load_mode")):
        if getattr(args, name) != getattr(d, name):
            out += [flag, str(getattr(args, name))]
    if args.n_parallel not in (-1, None):
        out += ["-np", str(args.n_parallel)]
    if args.kv_unified is not None and not for_fit_params:
        out.append("-kvu" if args.kv_unified else "-no-kvu")
    if args.swa_full:
        out.append("--swa-full")
    if args.no_kv_offload:
        out.append("-nkvo")
    if not args.op_offload:
        out.append("--no-op-offload")
    if args.no_host:
        out.append("--no-host")
    if not args.repack:
        out.append("--no-repack")
    if args.fit_target_mib != d.fit_target_mib:
        out += ["-fitt", ",".join(str(x) for x in args.fit_target_mib)]
    if args.fit_ctx_min != d.fit_ctx_min:
        out += ["-fitc", str(args.fit_ctx_min)]
    if args.cache_ram_mib != d.cache_ram_mib and not for_fit_params:
        out += ["-cram", str(args.cache_ram_mib)]
    if not for_fit_params:
        if not args.fit:
            out += ["-fit", "off"]
        if args.spec_types:
            out += ["--spec-type", ",".join(args.spec_types)]
        if args.draft_model:
            out += ["-md", args.draft_model]
    return out
