"""Rules that flag the known traps of a launch profile before the user wastes an evening on them.

Each finding has a stable id (tests, the UI and saved reports key on it), a severity (info / warning / error:
error means llama-server refuses or fails), a one-line message, the reason, and where the fact comes from. The
rules are small functions (`rules`: flags, model file, K/V, devices, threads, fit, drafting, context,
batching, chat, exposure, environment; `cliffs`: what llama.cpp switches off or moves silently), each
returning its findings from the Facts (`base`); `advise` runs them in order. Rules read the *effective*
profile (LLAMA_ARG_* variables applied), the chosen binary's flag catalog, optional model facts
(`nextn_layers`, `context_length`, `block_count`, as `core.gguf_info.ModelInfo` has them) and optional facts
of this machine and build (GPUs, cores, the binary's FA_QUANTS, the memory plan).
"""

from __future__ import annotations

from typing import Any

from llm_tuner.core import flags
from llm_tuner.core.advice import cliffs, rules
from llm_tuner.core.advice.base import ORDER, Advice, Facts, Rule, Severity, is_router, server_argv
from llm_tuner.core.cmdline import FlagCatalog, effective_profile
from llm_tuner.core.profile import LaunchProfile, ModelFacts

# in the order findings are listed within a severity (errors first: advise sorts by severity, stably)
RULES: tuple[Rule, ...] = (
    rules.removed_flag, rules.bad_value, rules.unknown_flag, rules.value_out_of_range,
    rules.no_model, rules.model_file_unreadable, rules.model_file_missing,
    rules.no_gpu_for_layers, cliffs.ngl_negative,
    rules.kv_type_mismatch, rules.draft_kv_type_mismatch, rules.quantized_v_needs_fa, rules.kv_type_unsupported,
    cliffs.kv_type_gpu_attention,
    rules.mtp_multi_gpu_prefill, rules.large_ubatch_multi_gpu, rules.split_tensor_needs_fa,
    cliffs.split_tensor_quantized_kv, cliffs.split_tensor_no_fit, cliffs.pipeline_parallel_off, rules.mixed_backends,
    rules.rpc_network, rules.rpc_ubatch, rules.rpc_worker_cache,
    rules.threads_over_physical, rules.threads_batch_over_logical,
    rules.fit_ignored,
    rules.draft_mtp_without_mtp_layers, rules.draft_model_without_spec_type, cliffs.draft_is_main_model,
    rules.draft_min_over_max,
    rules.ctx_over_trained, rules.ctx_per_slot, cliffs.parallel_without_kvu, rules.parallel_zero,
    rules.ubatch_over_batch, rules.large_batch_bench_only,
    cliffs.cache_ram_crowds_host,
    rules.chat_template_kwargs_json,
    rules.exposed_without_api_key,
    rules.cuda_graphs_env_presence, rules.cuda_unified_memory, rules.defrag_deprecated,
)

__all__ = ["RULES", "Advice", "Facts", "Rule", "Severity", "advise", "is_router", "router_text"]


def router_text(profile: LaunchProfile) -> str | None:
    """The Profile tab's line for a router profile (None for any other): what it serves and how."""
    if not is_router(profile):
        return None
    argv = server_argv(profile)
    where = [f"the GGUF files in {d}" for d in [flags.value_of(argv, "models_dir")] if d]
    where += [f"the models of the presets file {f}" for f in [flags.value_of(argv, "models_preset")] if f]
    return (f"Router mode: no model of its own. llama-server serves {' and '.join(where)}, loading each when "
            "a request names it (the request's \"model\"). Live lists them and which are loaded; a benchmark "
            "measures the one you name.")


def advise(profile: LaunchProfile, catalog: FlagCatalog | None = None, model: ModelFacts | None = None,
           *, n_gpus: int | None = None, model_file_exists: bool | None = None,
           physical_cores: int | None = None, host_available_mib: int | None = None,
           fa_quants: tuple[str, ...] | None = None,
           plan: Any = None, pipeline: Any = None) -> list[Advice]:
    """All findings for a profile, errors first.

    Args:
        profile: the profile as edited (LLAMA_ARG_* variables in its env are taken into account).
        catalog: the chosen binary's flags; without it removed/unknown flags are not checked.
        model: facts of the model file (`nextn_layers`, `context_length`, `block_count`), when known; a
            ModelInfo whose `error` is set (the header reader could not read the file: a folder, a truncated
            download) is an error finding itself.
        n_gpus: GPUs on this machine, used when the profile leaves the device list to llama-server.
        model_file_exists: whether the effective profile's model path is a file on this machine; None when
            not checked (core does no I/O: the caller looks, off the GUI thread).
        physical_cores: the host's physical CPU cores (not hyper-threads), when known (the caller reads it).
        host_available_mib: this machine's available RAM (MiB), when read: the prompt cache's check without a
        plan. fa_quants: the binary's CUDA flash-attention K-V pairs from its log
        (core.devices.fa_quants_from_log):
            None until it has started, () for a build without CUDA.
        plan: the profile's core.memory.MemoryPlan on this machine (host RAM, fit's own overrides), when made.
        pipeline: that plan's core.memory.Pipeline (what pipeline parallelism changes in memory), when made.
    """
    model_error = getattr(model, "error", None) if model is not None else None
    facts = Facts(raw=profile, p=effective_profile(profile), catalog=catalog, model=None if model_error else model,
                  model_error=model_error or None, n_gpus=n_gpus, model_file_exists=model_file_exists,
                  physical_cores=physical_cores, host_available_mib=host_available_mib, fa_quants=fa_quants, plan=plan, pipeline=pipeline)
    out = [a for rule in RULES for a in rule(facts)]
    out.sort(key=lambda a: ORDER[a.severity])
    return out
