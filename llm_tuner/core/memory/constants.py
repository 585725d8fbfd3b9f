"""llama.cpp's constants and measured overheads that the memory plan uses."""

from __future__ import annotations

from gguf import GGMLQuantizationType

MIB = 1024 * 1024

# ------------------------------------------------------------------------------------------------
# constants from llama.cpp
# ------------------------------------------------------------------------------------------------

# llama.cpp pads a context to a multiple of 256 cells (llama_kv_cache::get_padding): the context's step.
CTX_PAD = 256
# -fitt's default: MiB that --fit leaves free on each device (common/arg.cpp, fit_params_target).
FIT_TARGET_MIB = 1024

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
# CUDA, measured on an H200 (driver 580, CUDA 13; tests/data/memory/cuda/memory_accuracy_cuda_h200.txt):
# llama.cpp's breakdown 'unaccounted' (used - buffers) was 596..630 MiB, median 597, over 16 configurations.
# The driver's own reservation (NVML v2 `reserved`, 615 MiB on that card, h200x2-nvml-idle-10s.jsonl) is NOT
# part of it: it is never in free memory (idle free 143155 = total 143771 - reserved 616), so a plan against
# free memory must not count it, and a plan against a card's nominal total must (see PlanDevice.capacity_mib).
# Vulkan, measured on NVIDIA's Vulkan driver (H200, driver 580.159;
# benchmarks/sessions/2026-12-01-h200-vulkan/README.md): NVML used minus llama.cpp's Vulkan0 buffers was
# 581..582 MiB when the server was ready, 587..597 after a request, over 2 models x 2 contexts:
# VULKAN_NVIDIA_OVERHEAD_MIB. The "Vulkan" figure below is for other drivers (AMD's RADV or AMDVLK, Intel): a
# default from public reports, not measured here; AMD's driver may differ. Other backends: defaults from
# public reports until measured. RPC: a worker reports its free memory with its own runtime already held (its
# ggml-rpc-server made the context before answering), so nothing more counts against that figure here.
RUNTIME_OVERHEAD_MIB = {"CUDA": 600, "ROCm": 400, "MUSA": 400, "Vulkan": 180, "SYCL": 300, "Metal": 0,
                        "CPU": 0, "RPC": 0}
VULKAN_NVIDIA_OVERHEAD_MIB = 590
# Two backends on one card in one process (-dev CUDA0,Vulkan0 on the same H200) do not take two runtime
# overheads: NVML used minus both devices' buffers was 651..653 MiB at ready (CUDA alone: 613, so 38..40 more)
# and 676..764 after a request (CUDA alone: 623..719, so 45..53 more), same session, NVIDIA's Vulkan driver.
# So a card under two backends (a shared pool) counts the largest of its devices' overheads plus this much.
SHARED_POOL_EXTRA_MIB = 55


def runtime_overhead_mib(backend: str, description: str = "") -> float:
    """The runtime overhead a llama.cpp device of `backend` takes beyond its buffers (see above): NVIDIA's
    Vulkan driver measured, other backends and drivers from RUNTIME_OVERHEAD_MIB."""
    if backend == "Vulkan" and "nvidia" in description.lower():
        return float(VULKAN_NVIDIA_OVERHEAD_MIB)
    return float(RUNTIME_OVERHEAD_MIB.get(backend, 300))


def runtime_overhead_note(backend: str, description: str = "") -> str | None:
    """Where a backend's overhead figure comes from, for the plan to say (None: measured on this kind of
    card)."""
    if backend != "Vulkan":
        return None
    if "nvidia" in description.lower():
        return (f"Vulkan's runtime overhead ({VULKAN_NVIDIA_OVERHEAD_MIB} MiB) is measured on NVIDIA's "
                "Vulkan driver (H200); other drivers may differ.")
    return (f"Vulkan's runtime overhead ({RUNTIME_OVERHEAD_MIB['Vulkan']} MiB) is a default from public "
            f"reports; it was measured only on NVIDIA's Vulkan driver ({VULKAN_NVIDIA_OVERHEAD_MIB} MiB), AMD's "
            "may differ.")
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
# A draft model (-md) is a second llama_model in the same process: its vocabulary (token texts, the text -> id
# map, the piece cache) and metadata live on the heap beside its buffers. Measured with the demo model as its
# own draft (CPU build, -c 4096 -np 1): peak RSS 703.9 MiB against 358.7 alone, 46 MiB beyond the draft's
# buffers for its 262144 tokens, so about this many bytes per vocabulary token.
DRAFT_HOST_BYTES_PER_TOKEN = 184

# Compute-buffer model coefficients (floats per token) fitted on real runs, see benchmarks/memory_accuracy.py.
_C_FFN_RESIDUAL = 2.0   # residual stream + normed input live through the FFN
_C_FFN = 4.0            # gate, up, activation, product (per n_ff)
_C_ATTN_NOFA = (2.0, 4.0, 3.0)  # (n_embd, q width, kv width) live beside KQ without flash attention
