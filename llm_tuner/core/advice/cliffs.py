"""Advice rules for what llama.cpp switches off or moves silently (docs:
../shared/reference/speed-and-cliffs.md, each fact checked against the tested build's source, cited by file
and line): pipeline parallelism lost, K/V types this build cannot run in a GPU attention kernel, the prompt
cache crowding the host, a draft model that is the main model, -sm tensor with quantized K/V or fit, a
negative -ngl and an explicit -np without -kvu."""

from __future__ import annotations

import os
from collections.abc import Iterator

from llm_tuner.core import flags
from llm_tuner.core.advice.base import Advice, Facts, advice
from llm_tuner.core.memory import PIPELINE_SOURCE, args_from_profile, why_off
from llm_tuner.core.units import format_mib

# the pairs every CUDA build compiles a flash-attention vector kernel for (ggml/CMakeLists.txt:208, the
# default GGML_CUDA_FA_QUANTS; f16-f16 always, ggml/cmake/common.cmake:75)
DEFAULT_FA_QUANTS = ("q4_0-q4_0", "q8_0-q8_0", "f16-f16", "bf16-bf16")
# K/V types CUDA flash attention takes at all (fattn.cu:525-539 ggml_cuda_fattn_kv_type_supported); others
# make the op unsupported on the GPU, so the scheduler runs attention on the CPU
CUDA_FA_TYPES = ("f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0")
FA_SOURCE = ("ggml/src/ggml-cuda/fattn.cu:496-510 (no vector kernel compiled: K and V converted to f16, "
             "slow), :525-539 (types CUDA flash attention takes); ggml/cmake/common.cmake:53-110 "
             "(GGML_CUDA_FA_QUANTS); llama.cpp PR #28456")


def _ngl_int(f: Facts) -> int | None:
    g = f.p.gpu_layers
    return g if isinstance(g, int) else None


# -- pipeline parallelism ------------------------------------------------------------------------------
def pipeline_parallel_off(f: Facts) -> Iterator[Advice]:
    """Several devices on a layer split, and something turns pipeline parallelism off: any tensor override
    (-ot,
    --cpu-moe, --n-cpu-moe, or fit's own expert overflow, which only a plan knows), -nkvo, or -ngl equal to
    the model's layer count. A partial offload (-ngl below it) is a choice the Plan's line describes, not a
    trap."""
    p, plan = f.p, f.plan
    if plan is not None and plan.pipeline_parallel is not None:  # a multi-device plan: its args are after fit
        if plan.pipeline_parallel is not False:
            return
        # the profile's own: fit's overrides told apart
        reasons = why_off(plan.args, plan, args_from_profile(f.raw))
        n_layer = plan.n_layers_total - 1
        equal = plan.args.ngl == n_layer
        nkvo = flags.short("kv_offload", negative=True)
        if not any("override" in r or nkvo in r for r in reasons) and not equal:
            return  # off for a partial offload, -sm other than layer, or a device without events: no trap
    else:
        if not f.layer_split_multi:
            return
        ngl, n_layer = _ngl_int(f), f.n_layer
        equal = ngl is not None and n_layer is not None and ngl == n_layer
        reasons = []
        if ngl is not None and n_layer is not None and ngl == n_layer:
            reasons.append(f"-ngl {ngl} equals the model's {n_layer} layers, so the output layer stays on "
                           f"the CPU; -ngl {ngl + 1} (or all) puts it on a GPU")
        elif ngl is not None and 0 <= ngl and n_layer is not None and ngl < n_layer:
            return  # a partial offload: pipeline parallelism is off by design
        if p.kv_offload is False:
            reasons.append(f"{flags.short('kv_offload', negative=True)}: the K/V stays in host memory")
        moved = ([f"{flags.short('override_tensor')} {r}" for r in p.override_tensor[:2]]
                 + ([flags.short("cpu_moe")] if p.cpu_moe else [])
                 + ([f"{flags.short('n_cpu_moe')} {p.n_cpu_moe}"] if p.n_cpu_moe is not None else []))
        if moved:
            reasons.append(f"a tensor override is set ({', '.join(moved)}): any override turns it off")
        if not reasons:
            return
    cost = f" With it on, compute buffers would take {f.pipeline.memory_text()}." if f.pipeline is not None else ""
    yield advice("pipeline-parallel-off", "warning" if equal else "info",
                 "pipeline parallelism is off on this multi-device split: " + "; ".join(reasons),
                 "llama.cpp overlaps the devices' work on a batch (what makes prompt throughput scale over GPUs) "
                 "only with more than one device, every layer and the output offloaded (-ngl above the layer count: "
                 "999 or all keep it), -sm layer, the K/V offloaded and no tensor override at all; its log then says "
                 "'pipeline parallelism enabled'. It costs compute memory (the graph inputs in 4 copies)." + cost,
                 PIPELINE_SOURCE, "gpu_layers", "override_tensor", "n_cpu_moe", "cpu_moe")


# -- flash attention kernels -----------------------------------------------------------------------------
def kv_type_gpu_attention(f: Facts) -> Iterator[Advice]:
    """K/V types this build cannot run in a GPU flash-attention kernel, read from its log's FA_QUANTS line
    once it has started; before that, a pair beyond the default build's is "unknown". Mixed pairs:
    kv-type-mismatch."""
    p = f.p
    k, v = (p.cache_type_k or "f16").lower(), (p.cache_type_v or "f16").lower()
    # nothing to offload to here
    no_gpu = f.n_gpus == 0 and not p.rpc and not p.devices and f.fa_quants is None
    if k != v or f.fa_off or p.gpu_layers == 0 or list(p.devices) == ["none"] or f.fa_quants == () or no_gpu:
        return
    pair = f"{k}-{v}"
    known = f.fa_quants
    if k not in CUDA_FA_TYPES:
        if known is None and k not in ("iq4_nl",):
            return  # a fork's type: kv-type-unsupported says so
        yield advice("kv-type-gpu-attention", "warning",
                     f"-ctk {k} -ctv {v}: CUDA flash attention does not take {k}, so attention runs on the CPU",
                     "The op is unsupported on the GPU and the scheduler moves it (with its K/V reads) to "
                     "the CPU; attention on the CPU cost one report prefill 1511 -> 197 t/s (llama.cpp PR "
                     "#28456). Use q8_0, q4_0 or f16.", FA_SOURCE,
                     "cache_type_k", "cache_type_v")
        return
    if known is not None and ("all" in known or pair in known or pair == "f16-f16"):
        return
    if known is None:
        if pair in DEFAULT_FA_QUANTS:
            return
        yield advice("kv-type-gpu-attention", "info",
                     f"-ctk {k} -ctv {v}: whether this llama-server has a GPU attention kernel for {pair} is "
                     "unknown until it has started",
                     "A CUDA build compiles the flash-attention vector kernel (generation) only for the K-V pairs in "
                     "its FA_QUANTS (the default: q4_0, q8_0, f16 and bf16, K = V); for another pair it converts K "
                     "and V to f16 at every step (slow). Its log's system_info line lists them: start it once (Live, "
                     "a benchmark) and this advice reads it.", FA_SOURCE, "cache_type_k", "cache_type_v")
        return
    yield advice("kv-type-gpu-attention", "warning",
                 f"-ctk {k} -ctv {v}: this llama-server has no GPU attention kernel for {pair} "
                 f"(FA_QUANTS = {','.join(known)})",
                 "Generation's flash-attention vector kernel is compiled only for the pairs in FA_QUANTS; "
                 f"for {pair} it converts K and V to f16 at every step (slow; the log warns 'no "
                 "FlashAttention vector kernel compiled'). Use a pair it lists, or a build with "
                 "GGML_CUDA_FA_QUANTS including it.",
                 FA_SOURCE, "cache_type_k", "cache_type_v")


# -- host RAM --------------------------------------------------------------------------------------------
def cache_ram_crowds_host(f: Facts) -> Iterator[Advice]:
    """The prompt cache's ceiling (--cache-ram, default 8192 MiB) against the host RAM the plan leaves beside
    the model (without a plan: against the RAM available now)."""
    plan, set_ = f.plan, f.p.cache_ram_mib
    host = plan.device("Host") if plan is not None else None
    if host is not None:
        ceiling, room_mib = host.prompt_cache_mib, host.headroom_mib
        beside = "beside the model"
    else:
        ceiling = float(8192 if set_ is None else set_)
        room_mib, beside = f.host_available_mib, "available on this machine now"
    if not ceiling or ceiling < 0 or room_mib is None or room_mib < 0 or room_mib >= ceiling:
        return  # the cache off, the host's memory unknown or short already (the plan says so), or room enough
    what = (f"--cache-ram {set_}" if set_ is not None and set_ >= 0 else
            "--cache-ram -1 (no size limit: n_ctx tokens of states)" if set_ is not None else
            "the default --cache-ram 8192")
    room = max(0, int(room_mib) // 1024 * 1024)
    yield advice("cache-ram-crowds-host", "warning",
                 f"the prompt cache may grow to {format_mib(ceiling)} of host RAM ({what}), but only "
                 f"{format_mib(room_mib)} are {beside}: set {flags.short('cache_ram_mib')} {room} or less "
                 "(0 turns it off)",
                 "llama-server keeps prompts' K/V states in host RAM to reuse them; the cache grows while it "
                 "serves, up to that size, so a server that starts fine can push mapped weights out of the "
                 "page cache (slow) or be killed for memory hours later.",
                 "common/arg.cpp:1718-1724 (--cache-ram, default 8192); tools/server/server-task.h:652-656; "
                 "llama.cpp PR #16391", "cache_ram_mib")


# -- drafting --------------------------------------------------------------------------------------------
def _same_file(a: str, b: str) -> bool:
    def norm(x: str) -> str:
        return os.path.normcase(os.path.normpath(os.path.expanduser(x.strip())))
    return norm(a) == norm(b)


def draft_is_main_model(f: Facts) -> Iterator[Advice]:
    p = f.p
    if p.draft_model and p.model and _same_file(p.draft_model, p.model):
        yield advice("draft-is-main-model", "warning", "the draft model (-md) is the main model: speculation "
                     "with it is slower than none",
                     "Each drafted token costs a full pass of a model as large as the target, and the target "
                     "still verifies them: generation ran at 0.47x of no drafting when measured here. Use a "
                     "much smaller model of the same family (shared vocabulary), the model's own MTP layers "
                     "(--spec-type draft-mtp), or n-gram drafting.",
                     "common/speculative.cpp (draft-simple: one draft-model decode per drafted token); "
                     "llm-tuner's measurement (issue 38)", "draft_model")


# -- split mode tensor -----------------------------------------------------------------------------------
def split_tensor_quantized_kv(f: Facts) -> Iterator[Advice]:
    p = f.p
    k, v = p.cache_type_k or "f16", p.cache_type_v or "f16"
    if p.split_mode == "tensor" and (k not in ("f32", "f16", "bf16") or v not in ("f32", "f16", "bf16")):
        yield advice("split-tensor-quantized-kv", "warning",
                     f"-sm tensor with a quantized K/V cache ({k}/{v}): it is made for f16, bf16 or f32",
                     "Tensor parallelism splits the K/V cache over the GPUs by heads; it was written and tested for "
                     "unquantized caches (f32/f16/bf16), and the default f16 cache is the one recommended.",
                     "llama.cpp PR #19378; docs/backend/SYCL.md ('The default f16 KV cache is recommended')",
                     "split_mode", "cache_type_k", "cache_type_v")


def split_tensor_no_fit(f: Facts) -> Iterator[Advice]:
    p = f.p
    if p.split_mode == "tensor" and p.fit is not False:
        explicit = p.fit is True or bool(p.fit_target_mib) or p.fit_ctx is not None
        yield advice("split-tensor-no-fit", "warning" if explicit else "info",
                     "--fit does nothing with -sm tensor: set the context (-c) and the split (-ts) yourself",
                     "Fit stops at once for tensor split mode ('llama_params_fit is not implemented for "
                     "SPLIT_MODE_TENSOR, abort', a warning in the log): neither the context nor the layers "
                     "are fitted to the GPUs, so an automatic context may not fit.", "common/fit.cpp:183-185",
                     "split_mode", "fit")


# -- -ngl and -np ----------------------------------------------------------------------------------------
def ngl_negative(f: Facts) -> Iterator[Advice]:
    ngl = _ngl_int(f)
    if ngl is not None and ngl < -2:
        yield advice("ngl-negative", "warning",
                     f"-ngl {ngl} is read as every layer on the GPUs, and it turns off --fit's placement",
                     "llama.cpp's own negative values are -1 (auto: fit places layers) and -2 (all); any other negative "
                     "number means all layers too (n_gpu_layers < 0), but fit sees a value set by the user and does "
                     "not place layers. Write -ngl all, or auto to let fit place them.",
                     "common/arg.cpp:2790-2808; src/llama-model.cpp:2008-2010; "
                     "common/fit.cpp:463-465", "gpu_layers")


def parallel_without_kvu(f: Facts) -> Iterator[Advice]:
    p = f.p
    if p.parallel is not None and p.parallel > 1 and p.kv_unified is None:
        yield advice("parallel-without-kvu", "info",
                     f"-np {p.parallel} set explicitly turns the unified K/V cache off: add "
                     f"{flags.short('kv_unified')} to share the context between the slots",
                     "With -np auto llama-server uses 4 slots and one unified K/V cache that any slot can "
                     "fill; an explicit -np keeps the default kv_unified = false, so each slot gets a fixed "
                     "share of the context. -kvu keeps the slots and shares the cache.",
                     "tools/server/server.cpp:168-172; llama.cpp PR #17997", "parallel", "kv_unified")
