"""Rules that flag the known traps of a launch profile before the user wastes an evening on them.

Each finding has a stable id (tests, the UI and saved reports key on it), a severity
(info / warning / error: error means llama-server refuses or fails), a one-line message, the reason,
and where the fact comes from. Rules read the *effective* profile (LLAMA_ARG_* variables applied), the
chosen binary's flag catalog, and optional model facts (`nextn_layers`, `context_length`, as
`core.gguf_info.ModelInfo` has them).
"""

from __future__ import annotations

import ipaddress
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict

from llm_tuner.core import flags
from llm_tuner.core.cmdline import FlagCatalog, effective_profile, profile_to_argv, validate
from llm_tuner.core.profile import CACHE_TYPES, LaunchProfile, ModelFacts

Severity = Literal["info", "warning", "error"]
_ORDER = {"error": 0, "warning": 1, "info": 2}

FIELD_NOTES = "users' measurements (docs/field-reports.md)"


class Advice(BaseModel):
    """One finding about a profile."""

    model_config = ConfigDict(frozen=True)

    id: str
    severity: Severity
    message: str
    reason: str = ""
    source: str = ""
    fields: tuple[str, ...] = ()  # profile fields involved (the editor highlights them)

    def to_json(self) -> dict:
        return {"id": self.id, "severity": self.severity, "message": self.message, "reason": self.reason,
                "source": self.source, "fields": list(self.fields)}


def _is_loopback(host: str) -> bool:
    host = host.strip().strip("[]")
    if host.endswith(".sock") or host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _backend(device: str) -> str:
    """A llama.cpp device name's backend: CUDA0 -> CUDA, Vulkan2 -> Vulkan, RPC1 -> RPC."""
    return device.rstrip("0123456789") or device


def _n_devices(p: LaunchProfile, n_gpus: int | None = None) -> int:
    """How many devices the main model is split over: the profile's -dev/-ts, else every GPU the machine
    has (llama-server's default) when `n_gpus` is known; 0 when unknown."""
    if p.split_mode == "none" or p.gpu_layers == 0 or list(p.devices) == ["none"]:
        return 1 if p.split_mode == "none" else 0
    devs = [d for d in p.devices if d and d != "none"]
    shares = [x for x in p.tensor_split if x > 0]
    if devs or shares:
        return max(len(devs), len(shares))
    return n_gpus or 0


def _server_argv(profile: LaunchProfile) -> list[str]:
    """The arguments llama-server acts on: the profile's own, then what its LLAMA_ARG_* variables add."""
    argv, env = profile_to_argv(profile)
    return [*argv, *flags.env_to_argv(env, argv)]


def is_router(profile: LaunchProfile) -> bool:
    """Whether the profile starts llama-server's router mode on purpose: no model of its own (-m, -hf,
    --model-url) and a models folder (--models-dir) or a presets file (--models-preset) to load models from on
    demand (flags or LLAMA_ARG_* variables). Neither a model nor these is the "no-model" error, not a router."""
    argv = _server_argv(profile)
    if any(flags.has(argv, key) for key in ("model", "hf_repo", "model_url")):
        return False
    return flags.has(argv, "models_dir") or flags.has(argv, "models_preset")


def router_text(profile: LaunchProfile) -> str | None:
    """The Profile tab's line for a router profile (None for any other): what it serves and how."""
    if not is_router(profile):
        return None
    argv = _server_argv(profile)
    where = [f"the GGUF files in {d}" for d in [flags.value_of(argv, "models_dir")] if d]
    where += [f"the models of the presets file {f}" for f in [flags.value_of(argv, "models_preset")] if f]
    return (f"Router mode: no model of its own. llama-server serves {' and '.join(where)}, loading each when a "
            "request names it (the request's \"model\"). Live lists them and which are loaded; a benchmark "
            "measures the one you name.")


def advise(profile: LaunchProfile, catalog: FlagCatalog | None = None, model: ModelFacts | None = None,
           *, n_gpus: int | None = None, model_file_exists: bool | None = None,
           physical_cores: int | None = None) -> list[Advice]:
    """All findings for a profile, errors first. Never raises.

    Args:
        profile: the profile as edited (LLAMA_ARG_* variables in its env are taken into account).
        catalog: the chosen binary's flags; without it removed/unknown flags are not checked.
        model: facts of the model file (`nextn_layers`, `context_length`), when known; a ModelInfo whose
            `error` is set (the header reader could not read the file: a folder, a truncated download) is an
            error finding itself.
        n_gpus: GPUs on this machine, used when the profile leaves the device list to llama-server.
        model_file_exists: whether the effective profile's model path is a file on this machine; None when
            not checked (core does no I/O: the caller looks, off the GUI thread).
        physical_cores: the host's physical CPU cores (not hyper-threads), when known (the caller reads it).
    """
    p = effective_profile(profile)
    n_dev = _n_devices(p, n_gpus)
    layer_split_multi = n_dev > 1 and p.split_mode in (None, "layer")
    out: list[Advice] = []

    def add(id_, severity, message, reason, source, *fields):
        out.append(Advice(id=id_, severity=severity, message=message, reason=reason, source=source,
                          fields=tuple(fields)))

    # -- flags the binary refuses ----------------------------------------------------------------
    if catalog is not None:
        res = validate(profile, catalog)
        for r in res.removed:
            add("removed-flag", "error", f"{' '.join(r.tokens)} was removed: use {r.replacement}",
                "llama-server stops at start-up with 'error: invalid argument' or 'the argument has been removed'.",
                "common/arg.cpp (arg_removed, 4408-4445); --mlock/--no-mmap became -lm/--load-mode", "extra_args")
        for bad in res.bad_values:
            add("bad-value", "error", bad,
                "llama-server stops at start-up with 'error while handling argument' for a value it cannot read.",
                "common/arg.cpp (common_params_parse_ex)", "extra_args")
        if res.unknown:
            hints = [f"{t}: did you mean {s}?" for t in res.unknown if (s := catalog.suggest(t)) is not None]
            add("unknown-flag", "error", f"this llama-server does not know: {' '.join(res.unknown)}"
                + (f" ({'; '.join(hints)})" if hints else ""),
                "An unknown flag makes llama-server exit with 'error: invalid argument'. A fork's own flags need "
                "that fork's binary (choose it as the profile's binary).", "common/arg.cpp:830", "extra_args")

    # -- numbers out of range (llama-server reads them with std::stoi: 32-bit) ----------------------------
    for ff in flags.FIELD_FLAGS:
        n = getattr(p, ff.field, None) if ff.field and ff.key != "seed" else None  # --seed: std::stoul
        if type(n) is int and not -2**31 <= n < 2**31:
            add("value-out-of-range", "error", f"{ff.flag} {n} is beyond the numbers llama-server reads "
                f"({-2**31} to {2**31 - 1})", "llama-server stops at start-up with 'error while handling argument' "
                "(std::stoi: out of range).", "common/arg.cpp (common_params_parse_ex)", ff.field)

    # -- the model file ------------------------------------------------------------------------------
    downloads = p.hf_repo is not None or flags.has(p.extra_args, "model_url")
    if not p.model and not downloads and not is_router(p):
        add("no-model", "error", "no model: give the model file (-m), or pick one in Models; for a "
            "server of several models (router mode) give a models folder (--models-dir) or a presets file "
            "(--models-preset)",
            "Without -m (or -hf / --model-url) llama-server starts its router mode, a front for other servers with "
            "no model loaded: it reports ready, and every request fails with 'model name is missing'. Router mode "
            "is set up with --models-dir or --models-preset.", "tools/server/README.md (router mode)", "model")
    model_error = getattr(model, "error", None) if model is not None else None
    if model_error:
        model = None  # its facts are unknown: no rule may read them
    if model_error and p.model and not downloads:
        what = (model_error.removeprefix("the file ") if model_error.startswith("the file is ")
                else f"cannot be read as a GGUF model: {model_error}")
        add("model-file-unreadable", "error", f"{p.model} {what}",
            "llama-server stops at start-up with 'failed to open GGUF file' or 'failed to read' (a folder, a "
            "truncated or damaged download, not a GGUF file).", "the GGUF header reader (core/gguf_info)", "model")
    elif model_file_exists is False and p.model and not downloads:
        literal = p.model.startswith("~") or "$" in p.model
        add("model-file-missing", "error",
            f"the model file {p.model} does not exist: pick the file in Models or correct the path",
            ("llama-server does not expand ~ or $VARIABLES: write the full path. " if literal else "")
            + "llama-server stops at start-up with 'failed to open GGUF file'.",
            "ggml/src/gguf.cpp (gguf_init_from_file)", "model")

    # -- GPUs ------------------------------------------------------------------------------------------
    ngl = str(p.gpu_layers).strip().lower() if p.gpu_layers is not None else None
    # RPC workers are offload devices too (GPUs or CPUs on another machine): with them, -ngl places layers there
    if n_gpus == 0 and ngl not in (None, "0", "auto", "-1") and not p.devices and not p.rpc:
        add("no-gpu-for-layers", "info",
            f"no offload device on this machine: -ngl {p.gpu_layers} keeps every layer on the CPU",
            "llama-server only offloads to the devices its build can see (GPUs, RPC workers); with none, the setting "
            "has no effect (it matters when this profile runs where there is one).", "llama-server --list-devices",
            "gpu_layers")

    # -- KV cache --------------------------------------------------------------------------------
    k, v = p.cache_type_k or "f16", p.cache_type_v or "f16"
    if k != v:
        add("kv-type-mismatch", "warning", f"K cache is {k} but V cache is {v}: prefill can be 4-13x slower",
            "Mixed K/V types fall back silently to a slow attention kernel; keep K and V types equal.",
            f"{FIELD_NOTES}, case A", "cache_type_k", "cache_type_v")
    dk, dv = p.draft_cache_type_k or "f16", p.draft_cache_type_v or "f16"
    if dk != dv:
        add("draft-kv-type-mismatch", "warning", f"draft K cache is {dk} but draft V cache is {dv}",
            "The draft model hits the same slow mixed-type kernel as the main model.", f"{FIELD_NOTES}, case A",
            "draft_cache_type_k", "draft_cache_type_v")
    if v not in ("f16", "f32", "bf16") and p.flash_attn in ("off", "disabled", "false", "0"):
        add("quantized-v-needs-fa", "error", f"V cache {v} needs flash attention, but it is off",
            "llama-server fails: 'quantized V cache requires flash_attn to be enabled' (auto turns it on).",
            "src/llama-context.cpp:3843-3849", "cache_type_v", "flash_attn")
    for field, t in (("cache_type_k", p.cache_type_k), ("cache_type_v", p.cache_type_v),
                     ("draft_cache_type_k", p.draft_cache_type_k), ("draft_cache_type_v", p.draft_cache_type_v)):
        if t is not None and t not in CACHE_TYPES:
            add("kv-type-unsupported", "error", f"{t} is not a KV cache type of this llama-server",
                f"Allowed: {', '.join(CACHE_TYPES)}; others fail with 'Unsupported cache type'. A fork's own KV "
                "formats need that fork's binary.", "common/arg.cpp:304-330", field)

    # -- multi-GPU --------------------------------------------------------------------------------
    if "draft-mtp" in p.spec_type and layer_split_multi:
        add("mtp-multi-gpu-prefill", "warning", "MTP drafting with a layer split over several devices halves prefill",
            "With draft-mtp on a multi-GPU layer split, prefill fell from ~900 to ~500 t/s (1.8-2.0x latency). "
            "Benchmark both; consider one device for the whole model.", f"{FIELD_NOTES}, case A",
            "spec_type", "devices", "tensor_split")
    if (p.ubatch_size or 512) >= 1024 and n_dev > 1:
        add("large-ubatch-multi-gpu", "warning", f"-ub {p.ubatch_size} on several devices cut prefill by 13-31%",
            "On a multi-GPU layer split, -ub 1024 and 2048 were slower than 512 at prefill. Measure on the server.",
            f"{FIELD_NOTES}, case A", "ubatch_size")
    if p.split_mode == "tensor" and p.flash_attn in ("off", "disabled", "false", "0"):
        add("split-tensor-needs-fa", "error", "split mode 'tensor' needs flash attention",
            "-sm tensor is experimental and requires FA.", "src/llama-context.cpp:3824-3832", "split_mode", "flash_attn")

    backends = sorted({_backend(d) for d in p.devices if d and d != "none"})
    if len(backends) > 1:
        add("mixed-backends", "info", f"devices from {len(backends)} backends ({', '.join(backends)}): "
            "benchmark which side does what best",
            "In one mixed CUDA + Vulkan setup the CUDA GPU was 34% faster at cold prefill, the Vulkan GPU 27% faster "
            "at generation without speculation (2.5x at 98k depth), and MTP acceptance differed by backend (CUDA 41%, "
            "Vulkan 64%): put the draft (--spec-draft-device) and the larger -ts share where the benchmark says.",
            f"{FIELD_NOTES}, case A", "devices", "tensor_split")

    # -- RPC workers ----------------------------------------------------------------------------------
    if p.rpc:
        add("rpc-network", "info", f"{len(p.rpc)} RPC worker(s): every token crosses the network at each boundary "
            "between machines in the split",
            "A layer split hands each token's hidden state from one device to the next; a device on another machine "
            "adds a network round trip per token (and per -ub chunk of a prompt). Fewer boundaries (-dev to leave out "
            "what you do not need), a wired link and the larger shares local keep it low. Without -dev llama.cpp puts "
            "the RPC devices FIRST, so -ts lists their shares first.",
            "src/llama.cpp (\"add RPC servers at the front of the list to minimize network transfers\")",
            "rpc", "devices", "tensor_split")
        add("rpc-ubatch", "info", f"-ub {p.ubatch_size or 512}: prompts go to the workers in chunks of this many tokens",
            "Each chunk's activations cross every machine boundary once, so a larger -ub makes fewer, larger "
            "transfers (a slow link favours it), while on a layer split a larger -ub was slower at prefill "
            f"({FIELD_NOTES}, case A): benchmark -ub 512 against 2048 with the workers.",
            "tools/rpc/README.md; llama_context::decode (n_ubatch chunks)", "ubatch_size", "rpc")
        add("rpc-worker-cache", "info", "start each worker with its cache (ggml-rpc-server -c) so that a new "
            "llama-server does not send the weights again",
            "Without the cache every load sends all of the worker's weights over the network; with it the worker "
            "keeps large tensors in $LLAMA_CACHE/rpc and a later load sends their hashes only. `llm-tuner workers "
            "start --cache DIR` (and Settings' Start) does it.", "tools/rpc/README.md (Local cache)", "rpc")

    # -- threads ------------------------------------------------------------------------------------
    if physical_cores:
        if p.threads is not None and p.threads > physical_cores:
            add("threads-over-physical", "warning",
                f"-t {p.threads} is more than the {physical_cores} physical cores: generation is usually slower",
                "Generation is memory-bound; hyper-threads share a core's units and add contention. One thread per "
                "physical (performance) core was best for generation; prompt batches (-tb) may use more.",
                f"{FIELD_NOTES}, case B (-t 8 on physical cores, -tb 16)", "threads")
        if p.threads_batch is not None and p.threads_batch > 2 * physical_cores:
            add("threads-batch-over-logical", "info",
                f"-tb {p.threads_batch} is more than two threads per physical core ({physical_cores} cores)",
                "Beyond the logical cores, threads only wait for each other.", f"{FIELD_NOTES}, case B",
                "threads_batch")

    # -- fit ----------------------------------------------------------------------------------------
    if p.fit is not False:
        blockers = [flags.short(key) for key, on in (
            ("gpu_layers", p.gpu_layers is not None and p.gpu_layers != "auto"), ("tensor_split", bool(p.tensor_split)),
            ("override_tensor", bool(p.override_tensor)), ("cpu_moe", p.cpu_moe),
            ("n_cpu_moe", p.n_cpu_moe is not None)) if on]
        if blockers:
            explicit = p.fit is True or bool(p.fit_target_mib) or p.fit_ctx is not None
            add("fit-ignored", "warning" if explicit else "info",
                f"--fit will not place layers because {', '.join(blockers)} {'is' if len(blockers) == 1 else 'are'} set",
                "Fit only shrinks an automatic context then aborts layer placement when -ngl, -ts, -ot or the MoE "
                "flags are set (a warning in the log, nothing more); -fitt has no effect on placement.",
                "common/fit.cpp:183-185, 459-487", "fit", "gpu_layers", "tensor_split", "override_tensor")

    # -- speculative decoding --------------------------------------------------------------------
    if model is not None and "draft-mtp" in p.spec_type and (getattr(model, "nextn_layers", None) or 0) == 0:
        add("draft-mtp-without-mtp-layers", "error", "draft-mtp needs a model with MTP layers; this one has none",
            "draft-mtp drafts with the main model's nextn (MTP) layers; the GGUF has nextn_predict_layers = 0.",
            "common/common.cpp:1683; src/llama-model.cpp:1331", "spec_type")
    if p.draft_model and not p.spec_type:
        add("draft-model-without-spec-type", "warning", "a draft model alone does not turn on speculative decoding",
            "-md loads the draft model but speculation needs --spec-type draft-simple (auto only for MTP/DFlash "
            "draft GGUFs).", "common/arg.cpp:545-572", "draft_model", "spec_type")
    if p.draft_n_min is not None and p.draft_n_max is not None and p.draft_n_min > p.draft_n_max:
        add("draft-min-over-max", "warning", "draft min tokens exceed draft max tokens", "",
            "common/arg.cpp (--spec-draft-n-min, --spec-draft-n-max)",
            "draft_n_min", "draft_n_max")

    # -- context ----------------------------------------------------------------------------------
    trained = getattr(model, "context_length", None) if model is not None else None
    if trained and p.ctx_size and p.ctx_size > trained:
        add("ctx-over-trained", "warning", f"context {p.ctx_size} is over the model's trained {trained} tokens",
            "Beyond n_ctx_train quality degrades unless RoPE scaling (YaRN) is configured for it.",
            "src/llama-context.cpp:330 (possible training context overflow)", "ctx_size")
    if p.parallel is not None and p.parallel > 1 and p.kv_unified is not True and p.ctx_size:
        add("ctx-per-slot", "info", f"each of {p.parallel} slots gets {p.ctx_size // p.parallel} tokens of context",
            "Without a unified KV cache the context is divided between the slots.",
            "src/llama-context.cpp:292-307", "parallel", "ctx_size")
    if p.parallel == 0:
        add("parallel-zero", "error", "--parallel 0 is rejected", "Use -1 (auto) or at least 1.",
            "common/arg.cpp:2547-2555", "parallel")

    # -- batching -----------------------------------------------------------------------------------
    if p.ubatch_size and p.ubatch_size > (p.batch_size or 2048):
        add("ubatch-over-batch", "info", "micro-batch larger than batch is cut down to the batch",
            "n_ubatch is clamped to n_batch.", "src/llama-context.cpp:250", "ubatch_size", "batch_size")
    if p.batch_size and p.batch_size > 2048:
        add("large-batch-bench-only", "info", f"-b {p.batch_size}: a llama-bench gain that may not reach the server",
            "-b 4096 gave +9% in llama-bench and 0% in the real server; measure with the server.",
            f"{FIELD_NOTES}, case A", "batch_size")

    # -- chat -----------------------------------------------------------------------------------------
    if p.chat_template_kwargs is not None:
        try:
            ok = isinstance(json.loads(p.chat_template_kwargs), dict)
        except ValueError:
            ok = False
        if not ok:
            add("chat-template-kwargs-json", "error", "chat template kwargs must be a JSON object",
                "llama-server parses the value as a JSON object and exits otherwise.", "common/arg.cpp:3544-3560",
                "chat_template_kwargs")

    # -- server exposure ----------------------------------------------------------------------------
    hosts = [h for h in (p.host or "127.0.0.1").split(",") if h]
    keys = (p.api_key.get_secret_value() if p.api_key is not None else "").split(",")
    has_key = any(k.strip() for k in keys) or p.api_key_file is not None or bool(flags.api_keys(p.env))
    if not has_key and any(not _is_loopback(h) for h in hosts):
        add("exposed-without-api-key", "warning", f"listening on {p.host} without an API key",
            "Anyone who can reach this address can use the model, /slots and /props; set --api-key.",
            "tools/server/server-http.cpp:251-302", "host", "api_key")

    # -- environment --------------------------------------------------------------------------------
    val = profile.env.get("GGML_CUDA_DISABLE_GRAPHS")
    if val is not None:
        off = val.strip().lower() in ("0", "false", "off", "no", "")
        add("cuda-graphs-env-presence", "warning" if off else "info",
            f"GGML_CUDA_DISABLE_GRAPHS={val} " + ("still disables CUDA graphs" if off else "disables CUDA graphs"),
            "The variable is presence-based: any value, even 0, turns CUDA graphs off for every CUDA device, which "
            "costs some generation speed on small batches. Users set it against driver stalls with dynamic offload "
            "on RTX 50-series; remove it to keep graphs.",
            f"ggml/src/ggml-cuda/common.cuh:1289; {FIELD_NOTES}, case B", "env")
    uma = profile.env.get("GGML_CUDA_ENABLE_UNIFIED_MEMORY")
    if uma is not None:
        add("cuda-unified-memory", "info",
            f"GGML_CUDA_ENABLE_UNIFIED_MEMORY={uma}: CUDA memory can spill into host RAM, and --fit sees host memory",
            "Any value (presence-based) makes CUDA allocate managed memory, which pages to host RAM instead of failing "
            "when VRAM is full (slower, no out-of-memory error), and on Linux each CUDA device then reports the "
            "host's available memory (/proc/meminfo) as free: --fit and the default split plan against that, not "
            "the GPU's free VRAM. This plan still counts the GPU's own memory.",
            "ggml/src/ggml-cuda/ggml-cuda.cu (ggml_cuda_device_malloc; device get_memory, llama.cpp PR 17368); "
            f"{FIELD_NOTES}, case B", "env")
    if flags.has(profile.extra_args, "defrag_thold"):
        add("defrag-deprecated", "info", "--defrag-thold is deprecated and does nothing",
            "llama-server only prints a deprecation warning.", "common/arg.cpp:2536-2544", "extra_args")

    out.sort(key=lambda a: _ORDER[a.severity])
    return out
