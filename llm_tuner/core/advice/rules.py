"""The advice rules on flags, the model file, the K/V cache, devices, threads, fit, drafting, context,
batching, chat, exposure and the environment: one small function per finding, each with its id, severity,
message, reason and source. A rule takes the Facts and returns its findings (none when it does not apply)."""

from __future__ import annotations

import json
from collections.abc import Iterator

from llm_tuner.core import flags
from llm_tuner.core.advice.base import FIELD_NOTES, Advice, Facts, advice, backend, is_loopback, is_router
from llm_tuner.core.profile import CACHE_TYPES

_OFF = ("off", "disabled", "false", "0")


# -- flags the binary refuses ------------------------------------------------------------------------
def removed_flag(f: Facts) -> Iterator[Advice]:
    for r in f.validation.removed if f.validation else ():
        yield advice("removed-flag", "error", f"{' '.join(r.tokens)} was removed: use {r.replacement}",
                     "llama-server stops at start-up with 'error: invalid argument' or 'the argument has "
                     "been removed'.", "common/arg.cpp (arg_removed, 4408-4445); --mlock/--no-mmap became -lm/--load-mode",
                     "extra_args")


def bad_value(f: Facts) -> Iterator[Advice]:
    for bad in f.validation.bad_values if f.validation else ():
        yield advice("bad-value", "error", bad,
                     "llama-server stops at start-up with 'error while handling argument' for a value it cannot read.",
                     "common/arg.cpp (common_params_parse_ex)", "extra_args")


def unknown_flag(f: Facts) -> Iterator[Advice]:
    if f.validation is None or not f.validation.unknown or f.catalog is None:
        return
    unknown = f.validation.unknown
    hints = [f"{t}: did you mean {s}?" for t in unknown if (s := f.catalog.suggest(t)) is not None]
    yield advice("unknown-flag", "error", f"this llama-server does not know: {' '.join(unknown)}"
                 + (f" ({'; '.join(hints)})" if hints else ""),
                 "An unknown flag makes llama-server exit with 'error: invalid argument'. A fork's own flags need "
                 "that fork's binary (choose it as the profile's binary).", "common/arg.cpp:830", "extra_args")


def value_out_of_range(f: Facts) -> Iterator[Advice]:
    """llama-server reads numbers with std::stoi: 32-bit."""
    for ff in flags.FIELD_FLAGS:
        n = getattr(f.p, ff.field, None) if ff.field and ff.key != "seed" else None  # --seed: std::stoul
        if type(n) is int and not -2**31 <= n < 2**31:
            yield advice("value-out-of-range", "error", f"{ff.flag} {n} is beyond the numbers llama-server reads "
                         f"({-2**31} to {2**31 - 1})", "llama-server stops at start-up with 'error while handling "
                         "argument' (std::stoi: out of range).", "common/arg.cpp (common_params_parse_ex)",
                         ff.field or "")


# -- the model file ----------------------------------------------------------------------------------
def _downloads(f: Facts) -> bool:
    return f.p.hf_repo is not None or flags.has(f.p.extra_args, "model_url")


def no_model(f: Facts) -> Iterator[Advice]:
    if not f.p.model and not _downloads(f) and not is_router(f.p):
        yield advice("no-model", "error", "no model: give the model file (-m), or pick one in Models; for a "
                     "server of several models (router mode) give a models folder (--models-dir) or a "
                     "presets file (--models-preset)",
                     "Without -m (or -hf / --model-url) llama-server starts its router mode, a front for "
                     "other servers with no model loaded: it reports ready, and every request fails with "
                     "'model name is missing'. Router mode is set up with --models-dir or --models-preset.",
                     "tools/server/README.md (router mode)", "model")


def model_file_unreadable(f: Facts) -> Iterator[Advice]:
    err, p = f.model_error, f.p
    if err and p.model and not _downloads(f):
        what = (err.removeprefix("the file ") if err.startswith("the file is ")
                else f"cannot be read as a GGUF model: {err}")
        yield advice("model-file-unreadable", "error", f"{p.model} {what}",
                     "llama-server stops at start-up with 'failed to open GGUF file' or 'failed to read' (a folder, a "
                     "truncated or damaged download, not a GGUF file).", "the GGUF header reader (core/gguf_info)",
                     "model")


def model_file_missing(f: Facts) -> Iterator[Advice]:
    p = f.p
    if not f.model_error and f.model_file_exists is False and p.model and not _downloads(f):
        literal = p.model.startswith("~") or "$" in p.model
        yield advice("model-file-missing", "error",
                     f"the model file {p.model} does not exist: pick the file in Models or correct the path",
                     ("llama-server does not expand ~ or $VARIABLES: write the full path. " if literal else "")
                     + "llama-server stops at start-up with 'failed to open GGUF file'.",
                     "ggml/src/gguf.cpp (gguf_init_from_file)", "model")


# -- GPUs ----------------------------------------------------------------------------------------------
def no_gpu_for_layers(f: Facts) -> Iterator[Advice]:
    p = f.p
    ngl = str(p.gpu_layers).strip().lower() if p.gpu_layers is not None else None
    # RPC workers are offload devices too (GPUs or CPUs on another machine): with them, -ngl places layers
    # there
    if f.n_gpus == 0 and ngl not in (None, "0", "auto", "-1") and not p.devices and not p.rpc:
        yield advice("no-gpu-for-layers", "info",
                     f"no offload device on this machine: -ngl {p.gpu_layers} keeps every layer on the CPU",
                     "llama-server only offloads to the devices its build can see (GPUs, RPC workers); with none, the "
                     "setting has no effect (it matters when this profile runs where there is one).",
                     "llama-server --list-devices", "gpu_layers")


# -- KV cache ------------------------------------------------------------------------------------------
def kv_type_mismatch(f: Facts) -> Iterator[Advice]:
    k, v = f.p.cache_type_k or "f16", f.p.cache_type_v or "f16"
    if k != v:
        yield advice("kv-type-mismatch", "warning", f"K cache is {k} but V cache is {v}: prefill can be 4-13x slower",
                     "Mixed K/V types fall back silently to a slow attention kernel; keep K and V types equal.",
                     f"{FIELD_NOTES}, case A", "cache_type_k", "cache_type_v")


def draft_kv_type_mismatch(f: Facts) -> Iterator[Advice]:
    dk, dv = f.p.draft_cache_type_k or "f16", f.p.draft_cache_type_v or "f16"
    if dk != dv:
        yield advice("draft-kv-type-mismatch", "warning", f"draft K cache is {dk} but draft V cache is {dv}",
                     "The draft model hits the same slow mixed-type kernel as the main model.",
                     f"{FIELD_NOTES}, case A", "draft_cache_type_k", "draft_cache_type_v")


def quantized_v_needs_fa(f: Facts) -> Iterator[Advice]:
    v = f.p.cache_type_v or "f16"
    if v not in ("f16", "f32", "bf16") and f.fa_off:
        yield advice("quantized-v-needs-fa", "error", f"V cache {v} needs flash attention, but it is off",
                     "llama-server fails: 'quantized V cache requires flash_attn to be enabled' (auto turns it on).",
                     "src/llama-context.cpp:3843-3849", "cache_type_v", "flash_attn")


def kv_type_unsupported(f: Facts) -> Iterator[Advice]:
    p = f.p
    for field, t in (("cache_type_k", p.cache_type_k), ("cache_type_v", p.cache_type_v),
                     ("draft_cache_type_k", p.draft_cache_type_k), ("draft_cache_type_v", p.draft_cache_type_v)):
        if t is not None and t not in CACHE_TYPES:
            yield advice("kv-type-unsupported", "error", f"{t} is not a KV cache type of this llama-server",
                         f"Allowed: {', '.join(CACHE_TYPES)}; others fail with 'Unsupported cache type'. A "
                         "fork's own KV formats need that fork's binary.", "common/arg.cpp:304-330", field)


# -- multi-GPU ---------------------------------------------------------------------------------------
def mtp_multi_gpu_prefill(f: Facts) -> Iterator[Advice]:
    if "draft-mtp" in f.p.spec_type and f.layer_split_multi:
        yield advice("mtp-multi-gpu-prefill", "warning",
                     "MTP drafting with a layer split over several devices halves prefill",
                     "With draft-mtp on a multi-GPU layer split, prefill fell from ~900 to ~500 t/s (1.8-2.0x "
                     "latency). Benchmark both; consider one device for the whole model.", f"{FIELD_NOTES}, case A",
                     "spec_type", "devices", "tensor_split")


def large_ubatch_multi_gpu(f: Facts) -> Iterator[Advice]:
    if (f.p.ubatch_size or 512) >= 1024 and f.n_dev > 1:
        yield advice("large-ubatch-multi-gpu", "warning", f"-ub {f.p.ubatch_size} on several devices cut "
                     "prefill by 13-31%", "On a multi-GPU layer split, -ub 1024 and 2048 were slower than "
                     "512 at prefill. Measure on the server.", f"{FIELD_NOTES}, case A", "ubatch_size")


def split_tensor_needs_fa(f: Facts) -> Iterator[Advice]:
    if f.p.split_mode == "tensor" and f.fa_off:
        yield advice("split-tensor-needs-fa", "error", "split mode 'tensor' needs flash attention",
                     "-sm tensor is experimental and requires FA.", "src/llama-context.cpp:3824-3832",
                     "split_mode", "flash_attn")


def mixed_backends(f: Facts) -> Iterator[Advice]:
    backends = sorted({backend(d) for d in f.p.devices if d and d != "none"})
    if len(backends) > 1:
        yield advice("mixed-backends", "info", f"devices from {len(backends)} backends "
                     f"({', '.join(backends)}): benchmark which side does what best",
                     "In one mixed CUDA + Vulkan setup the CUDA GPU was 34% faster at cold prefill, the Vulkan GPU 27% "
                     "faster at generation without speculation (2.5x at 98k depth), and MTP acceptance differed by "
                     "backend (CUDA 41%, Vulkan 64%): put the draft (--spec-draft-device) and the larger -ts share "
                     "where the benchmark says.", f"{FIELD_NOTES}, case A", "devices", "tensor_split")


# -- RPC workers -------------------------------------------------------------------------------------
def rpc_network(f: Facts) -> Iterator[Advice]:
    if f.p.rpc:
        yield advice("rpc-network", "info", f"{len(f.p.rpc)} RPC worker(s): every token crosses the network "
                     "at each boundary between machines in the split",
                     "A layer split hands each token's hidden state from one device to the next; a device on "
                     "another machine adds a network round trip per token (and per -ub chunk of a prompt). "
                     "Fewer boundaries (-dev to leave out what you do not need), a wired link and the larger "
                     "shares local keep it low. Without -dev llama.cpp puts the RPC devices FIRST, so -ts "
                     "lists their shares first.",
                     "src/llama.cpp (\"add RPC servers at the front of the list to minimize network transfers\")",
                     "rpc", "devices", "tensor_split")


def rpc_ubatch(f: Facts) -> Iterator[Advice]:
    if f.p.rpc:
        yield advice("rpc-ubatch", "info", f"-ub {f.p.ubatch_size or 512}: prompts go to the workers in "
                     "chunks of this many tokens",
                     "Each chunk's activations cross every machine boundary once, so a larger -ub makes fewer, larger "
                     "transfers (a slow link favours it), while on a layer split a larger -ub was slower at prefill "
                     f"({FIELD_NOTES}, case A): benchmark -ub 512 against 2048 with the workers.",
                     "tools/rpc/README.md; llama_context::decode (n_ubatch chunks)", "ubatch_size", "rpc")


def rpc_worker_cache(f: Facts) -> Iterator[Advice]:
    if f.p.rpc:
        yield advice("rpc-worker-cache", "info", "start each worker with its cache (ggml-rpc-server -c) so "
                     "that a new llama-server does not send the weights again",
                     "Without the cache every load sends all of the worker's weights over the network; with "
                     "it the worker keeps large tensors in $LLAMA_CACHE/rpc and a later load sends their "
                     "hashes only. `llm-tuner workers start --cache DIR` (and Settings' Start) does it.",
                     "tools/rpc/README.md (Local cache)", "rpc")


# -- threads -----------------------------------------------------------------------------------------
def threads_over_physical(f: Facts) -> Iterator[Advice]:
    cores, t = f.physical_cores, f.p.threads
    if cores and t is not None and t > cores:
        yield advice("threads-over-physical", "warning",
                     f"-t {t} is more than the {cores} physical cores: generation is usually slower",
                     "Generation is memory-bound; hyper-threads share a core's units and add contention. One thread "
                     "per physical (performance) core was best for generation; prompt batches (-tb) may use more.",
                     f"{FIELD_NOTES}, case B (-t 8 on physical cores, -tb 16)", "threads")


def threads_batch_over_logical(f: Facts) -> Iterator[Advice]:
    cores, tb = f.physical_cores, f.p.threads_batch
    if cores and tb is not None and tb > 2 * cores:
        yield advice("threads-batch-over-logical", "info",
                     f"-tb {tb} is more than two threads per physical core ({cores} cores)",
                     "Beyond the logical cores, threads only wait for each other.", f"{FIELD_NOTES}, case B",
                     "threads_batch")


# -- fit ------------------------------------------------------------------------------------------------
def fit_ignored(f: Facts) -> Iterator[Advice]:
    p = f.p
    # -sm tensor: fit does not run at all (split-tensor-no-fit)
    if p.fit is False or p.split_mode == "tensor":
        return
    # -ngl -1 is llama.cpp's own "auto" (fit's default), not a setting that stops it (common/fit.cpp:463)
    blockers = [flags.short(key) for key, on in (
        ("gpu_layers", p.gpu_layers not in (None, "auto", -1)), ("tensor_split", bool(p.tensor_split)),
        ("override_tensor", bool(p.override_tensor)), ("cpu_moe", p.cpu_moe),
        ("n_cpu_moe", p.n_cpu_moe is not None)) if on]
    if blockers:
        explicit = p.fit is True or bool(p.fit_target_mib) or p.fit_ctx is not None
        yield advice("fit-ignored", "warning" if explicit else "info",
                     f"--fit will not place layers because {', '.join(blockers)} "
                     f"{'is' if len(blockers) == 1 else 'are'} set",
                     "Fit only shrinks an automatic context then aborts layer placement when -ngl, -ts, -ot or the "
                     "MoE flags are set (a warning in the log, nothing more); -fitt has no effect on placement.",
                     "common/fit.cpp:183-185, 459-487", "fit", "gpu_layers", "tensor_split", "override_tensor")


# -- speculative decoding ----------------------------------------------------------------------------
def draft_mtp_without_mtp_layers(f: Facts) -> Iterator[Advice]:
    if f.model is not None and "draft-mtp" in f.p.spec_type and not f.model.nextn_layers:
        yield advice("draft-mtp-without-mtp-layers", "error", "draft-mtp needs a model with MTP layers; this one has "
                     "none", "draft-mtp drafts with the main model's nextn (MTP) layers; the GGUF has "
                     "nextn_predict_layers = 0.", "common/common.cpp:1683; "
                                                  "src/llama-model.cpp:1331", "spec_type")


def draft_model_without_spec_type(f: Facts) -> Iterator[Advice]:
    if f.p.draft_model and not f.p.spec_type:
        yield advice("draft-model-without-spec-type", "warning", "a draft model alone does not turn on "
                     "speculative decoding", "-md loads the draft model but speculation needs --spec-type draft-simple (auto only "
                     "for MTP/DFlash draft GGUFs).", "common/arg.cpp:545-572", "draft_model", "spec_type")


def draft_min_over_max(f: Facts) -> Iterator[Advice]:
    p = f.p
    if p.draft_n_min is not None and p.draft_n_max is not None and p.draft_n_min > p.draft_n_max:
        yield advice("draft-min-over-max", "warning", "draft min tokens exceed draft max tokens", "",
                     "common/arg.cpp (--spec-draft-n-min, --spec-draft-n-max)", "draft_n_min", "draft_n_max")


# -- context -----------------------------------------------------------------------------------------
def ctx_over_trained(f: Facts) -> Iterator[Advice]:
    trained = f.model.context_length if f.model is not None else None
    if trained and f.p.ctx_size and f.p.ctx_size > trained:
        yield advice("ctx-over-trained", "warning", f"context {f.p.ctx_size} is over the model's trained "
                     f"{trained} tokens", "Beyond n_ctx_train quality degrades unless RoPE scaling (YaRN) is configured for it.",
                     "src/llama-context.cpp:330 (possible training context overflow)", "ctx_size")


def ctx_per_slot(f: Facts) -> Iterator[Advice]:
    p = f.p
    if p.parallel is not None and p.parallel > 1 and p.kv_unified is not True and p.ctx_size:
        yield advice("ctx-per-slot", "info", f"each of {p.parallel} slots gets {p.ctx_size // p.parallel} tokens of "
                     "context", "Without a unified KV cache the context is divided between the slots.",
                     "src/llama-context.cpp:292-307", "parallel", "ctx_size")


def parallel_zero(f: Facts) -> Iterator[Advice]:
    if f.p.parallel == 0:
        yield advice("parallel-zero", "error", "--parallel 0 is rejected", "Use -1 (auto) or at least 1.",
                     "common/arg.cpp:2547-2555", "parallel")


# -- batching ----------------------------------------------------------------------------------------
def ubatch_over_batch(f: Facts) -> Iterator[Advice]:
    if f.p.ubatch_size and f.p.ubatch_size > (f.p.batch_size or 2048):
        yield advice("ubatch-over-batch", "info", "micro-batch larger than batch is cut down to the batch",
                     "n_ubatch is clamped to n_batch.", "src/llama-context.cpp:250", "ubatch_size", "batch_size")


def large_batch_bench_only(f: Facts) -> Iterator[Advice]:
    if f.p.batch_size and f.p.batch_size > 2048:
        yield advice("large-batch-bench-only", "info", f"-b {f.p.batch_size}: a llama-bench gain that may "
                     "not reach the server", "-b 4096 gave +9% in llama-bench and 0% in the real server; "
                                             "measure with the server.",
                     f"{FIELD_NOTES}, case A", "batch_size")


# -- chat ----------------------------------------------------------------------------------------------
def chat_template_kwargs_json(f: Facts) -> Iterator[Advice]:
    if f.p.chat_template_kwargs is None:
        return
    try:
        ok = isinstance(json.loads(f.p.chat_template_kwargs), dict)
    except ValueError:
        ok = False
    if not ok:
        yield advice("chat-template-kwargs-json", "error", "chat template kwargs must be a JSON object",
                     "llama-server parses the value as a JSON object and exits otherwise.", "common/arg.cpp:3544-3560",
                     "chat_template_kwargs")


# -- server exposure ---------------------------------------------------------------------------------
def exposed_without_api_key(f: Facts) -> Iterator[Advice]:
    p = f.p
    hosts = [h for h in (p.host or "127.0.0.1").split(",") if h]
    keys = (p.api_key.get_secret_value() if p.api_key is not None else "").split(",")
    has_key = any(k.strip() for k in keys) or p.api_key_file is not None or bool(flags.api_keys(p.env))
    if not has_key and any(not is_loopback(h) for h in hosts):
        yield advice("exposed-without-api-key", "warning", f"listening on {p.host} without an API key",
                     "Anyone who can reach this address can use the model, /slots and /props; set --api-key.",
                     "tools/server/server-http.cpp:251-302", "host", "api_key")


# -- environment ---------------------------------------------------------------------------------------
def cuda_graphs_env_presence(f: Facts) -> Iterator[Advice]:
    val = f.raw.env.get("GGML_CUDA_DISABLE_GRAPHS")
    if val is None:
        return
    off = val.strip().lower() in ("0", "false", "off", "no", "")
    yield advice("cuda-graphs-env-presence", "warning" if off else "info",
                 f"GGML_CUDA_DISABLE_GRAPHS={val} " + ("still disables CUDA graphs" if off else "disables CUDA graphs"),
                 "The variable is presence-based: any value, even 0, turns CUDA graphs off for every CUDA "
                 "device, which costs some generation speed on small batches. Users set it against driver "
                 "stalls with dynamic offload on RTX 50-series; remove it to keep graphs.",
                 f"ggml/src/ggml-cuda/common.cuh:1289; {FIELD_NOTES}, case B", "env")


def cuda_unified_memory(f: Facts) -> Iterator[Advice]:
    uma = f.raw.env.get("GGML_CUDA_ENABLE_UNIFIED_MEMORY")
    if uma is not None:
        yield advice("cuda-unified-memory", "info", f"GGML_CUDA_ENABLE_UNIFIED_MEMORY={uma}: CUDA memory can "
                     "spill into host RAM, and --fit sees host memory",
                     "Any value (presence-based) makes CUDA allocate managed memory, which pages to host RAM "
                     "instead of failing when VRAM is full (slower, no out-of-memory error), and on Linux "
                     "each CUDA device then reports the host's available memory (/proc/meminfo) as free: "
                     "--fit and the default split plan against that, not the GPU's free VRAM. This plan "
                     "still counts the GPU's own memory.",
                     "ggml/src/ggml-cuda/ggml-cuda.cu (ggml_cuda_device_malloc; device get_memory, llama.cpp "
                     f"PR 17368); {FIELD_NOTES}, case B", "env")


def defrag_deprecated(f: Facts) -> Iterator[Advice]:
    if flags.has(f.raw.extra_args, "defrag_thold"):
        yield advice("defrag-deprecated", "info", "--defrag-thold is deprecated and does nothing",
                     "llama-server only prints a deprecation warning.", "common/arg.cpp:2536-2544", "extra_args")
