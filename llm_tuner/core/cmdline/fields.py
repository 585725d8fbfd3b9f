"""The modelled flags: one `FieldFlag` per profile field, lookup tables, secrets and removed flags."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from llm_tuner.core.profile import LaunchProfile

# =============================================================================================
# Profile <-> argv/env
# =============================================================================================
#
# Every modelled flag is one `FieldFlag`: the profile field, its spellings (the first long one is
# written on output), how its value is read and written, the editor section and its LLAMA_ARG_*.
# Spellings are those of the tested build (common/arg.cpp); the chosen binary's catalog adds any
# alias it knows for the same flag.

Kind = Literal["str", "int", "float", "switch", "toggle", "onoff", "layers", "list", "floats", "ints",
               "append", "overrides", "secret", "fa"]

SECTIONS = ("Model", "Context & KV", "GPU offload & split", "Speculative decoding", "Batching & threads",
            "Chat", "Sampling", "Server")


@dataclass(frozen=True)
class FieldFlag:
    """How one LaunchProfile field maps to llama-server flags."""

    field: str
    names: tuple[str, ...]  # positive spellings; names[0] of the long ones is written
    kind: Kind
    section: str
    env: str | None = None
    neg: tuple[str, ...] = ()  # negative spellings of a toggle ('--no-kv-offload')
    label: str = ""

    @property
    def flag(self) -> str:
        longs = [n for n in self.names if n.startswith("--")]
        return longs[0] if longs else self.names[0]

    @property
    def neg_flag(self) -> str | None:
        longs = [n for n in self.neg if n.startswith("--")]
        return longs[0] if longs else (self.neg[0] if self.neg else None)


def _ff(field, names, kind, section, env=None, neg=(), label=""):
    return FieldFlag(field, tuple(names), kind, section, env, tuple(neg), label or field.replace("_", " "))


_M, _KV, _GPU, _SPEC, _BT, _CHAT, _SAMP, _SRV = SECTIONS
FIELD_FLAGS: tuple[FieldFlag, ...] = (
    _ff("model", ("--model", "-m"), "str", _M, "LLAMA_ARG_MODEL", label="model file"),
    _ff("hf_repo", ("--hf-repo", "-hf", "-hfr"), "str", _M, "LLAMA_ARG_HF_REPO", label="Hugging Face repo"),
    _ff("mmproj", ("--mmproj", "-mm"), "str", _M, "LLAMA_ARG_MMPROJ", label="multimodal projector"),
    _ff("alias", ("--alias", "-a"), "str", _M, "LLAMA_ARG_ALIAS", label="model alias"),
    _ff("ctx_size", ("--ctx-size", "-c"), "int", _KV, "LLAMA_ARG_CTX_SIZE", label="context (tokens)"),
    _ff("cache_type_k", ("--cache-type-k", "-ctk"), "str", _KV, "LLAMA_ARG_CACHE_TYPE_K", label="K cache type"),
    _ff("cache_type_v", ("--cache-type-v", "-ctv"), "str", _KV, "LLAMA_ARG_CACHE_TYPE_V", label="V cache type"),
    _ff("flash_attn", ("--flash-attn", "-fa"), "fa", _KV, "LLAMA_ARG_FLASH_ATTN", label="flash attention"),
    _ff("swa_full", ("--swa-full",), "switch", _KV, "LLAMA_ARG_SWA_FULL", label="full-size SWA cache"),
    _ff("kv_offload", ("--kv-offload", "-kvo"), "toggle", _KV, "LLAMA_ARG_KV_OFFLOAD",
        neg=("--no-kv-offload", "-nkvo"), label="KV cache on GPU"),
    _ff("cache_ram_mib", ("--cache-ram", "-cram"), "int", _KV, "LLAMA_ARG_CACHE_RAM", label="prompt cache RAM (MiB)"),
    _ff("context_shift", ("--context-shift",), "toggle", _KV, "LLAMA_ARG_CONTEXT_SHIFT",
        neg=("--no-context-shift",), label="context shift"),
    _ff("gpu_layers", ("--n-gpu-layers", "-ngl", "--gpu-layers"), "layers", _GPU, "LLAMA_ARG_N_GPU_LAYERS",
        label="GPU layers"),
    _ff("split_mode", ("--split-mode", "-sm"), "str", _GPU, "LLAMA_ARG_SPLIT_MODE", label="split mode"),
    _ff("devices", ("--device", "-dev"), "list", _GPU, "LLAMA_ARG_DEVICE", label="devices"),
    _ff("tensor_split", ("--tensor-split", "-ts"), "floats", _GPU, "LLAMA_ARG_TENSOR_SPLIT", label="tensor split"),
    _ff("main_gpu", ("--main-gpu", "-mg"), "int", _GPU, "LLAMA_ARG_MAIN_GPU", label="main GPU"),
    _ff("override_tensor", ("--override-tensor", "-ot"), "overrides", _GPU, "LLAMA_ARG_OVERRIDE_TENSOR",
        label="override tensor rules"),
    _ff("cpu_moe", ("--cpu-moe", "-cmoe"), "switch", _GPU, "LLAMA_ARG_CPU_MOE", label="all MoE experts on CPU"),
    _ff("n_cpu_moe", ("--n-cpu-moe", "-ncmoe"), "int", _GPU, "LLAMA_ARG_N_CPU_MOE", label="MoE layers on CPU"),
    _ff("fit", ("--fit", "-fit"), "onoff", _GPU, "LLAMA_ARG_FIT", label="fit to free memory"),
    _ff("fit_target_mib", ("--fit-target", "-fitt"), "ints", _GPU, "LLAMA_ARG_FIT_TARGET",
        label="fit margin per device (MiB)"),
    _ff("fit_ctx", ("--fit-ctx", "-fitc"), "int", _GPU, "LLAMA_ARG_FIT_CTX", label="fit minimum context"),
    _ff("spec_type", ("--spec-type",), "append", _SPEC, "LLAMA_ARG_SPEC_TYPE", label="speculative types"),
    _ff("draft_n_max", ("--spec-draft-n-max",), "int", _SPEC, "LLAMA_ARG_SPEC_DRAFT_N_MAX", label="draft max tokens"),
    _ff("draft_n_min", ("--spec-draft-n-min",), "int", _SPEC, "LLAMA_ARG_SPEC_DRAFT_N_MIN", label="draft min tokens"),
    _ff("draft_model", ("--spec-draft-model", "-md", "--model-draft"), "str", _SPEC, "LLAMA_ARG_SPEC_DRAFT_MODEL",
        label="draft model"),
    _ff("draft_device", ("--spec-draft-device", "-devd", "--device-draft"), "list", _SPEC, label="draft devices"),
    _ff("draft_gpu_layers", ("--spec-draft-ngl", "-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft"), "layers",
        _SPEC, "LLAMA_ARG_N_GPU_LAYERS_DRAFT", label="draft GPU layers"),
    _ff("draft_cache_type_k", ("--spec-draft-type-k", "-ctkd", "--cache-type-k-draft"), "str", _SPEC,
        "LLAMA_ARG_SPEC_DRAFT_CACHE_TYPE_K", label="draft K cache type"),
    _ff("draft_cache_type_v", ("--spec-draft-type-v", "-ctvd", "--cache-type-v-draft"), "str", _SPEC,
        "LLAMA_ARG_SPEC_DRAFT_CACHE_TYPE_V", label="draft V cache type"),
    _ff("draft_override_tensor", ("--spec-draft-override-tensor", "-otd", "--override-tensor-draft"), "overrides",
        _SPEC, label="draft override tensor rules"),
    _ff("draft_p_min", ("--spec-draft-p-min", "--draft-p-min"), "float", _SPEC, "LLAMA_ARG_SPEC_DRAFT_P_MIN",
        label="draft p-min"),
    *(_ff(f"ngram_{kind}_{par}", (f"--spec-ngram-{kind.replace('_', '-')}-{par.replace('_', '-')}",), "int", _SPEC,
          label=f"ngram {kind.replace('_', '-')} {par.replace('_', '-')}")
      for kind, pars in (("mod", ("n_min", "n_max", "n_match")), ("simple", ("size_n", "size_m", "min_hits")),
                         ("map_k", ("size_n", "size_m", "min_hits")), ("map_k4v", ("size_n", "size_m", "min_hits")))
      for par in pars),
    _ff("batch_size", ("--batch-size", "-b"), "int", _BT, "LLAMA_ARG_BATCH", label="batch (tokens)"),
    _ff("ubatch_size", ("--ubatch-size", "-ub"), "int", _BT, "LLAMA_ARG_UBATCH", label="micro-batch (tokens)"),
    _ff("threads", ("--threads", "-t"), "int", _BT, "LLAMA_ARG_THREADS", label="threads"),
    _ff("threads_batch", ("--threads-batch", "-tb"), "int", _BT, label="batch threads"),
    _ff("load_mode", ("--load-mode", "-lm"), "str", _BT, "LLAMA_ARG_LOAD_MODE", label="load mode"),
    _ff("cont_batching", ("--cont-batching", "-cb"), "toggle", _BT, "LLAMA_ARG_CONT_BATCHING",
        neg=("--no-cont-batching", "-nocb"), label="continuous batching"),
    _ff("jinja", ("--jinja",), "toggle", _CHAT, "LLAMA_ARG_JINJA", neg=("--no-jinja",), label="jinja templates"),
    _ff("chat_template", ("--chat-template",), "str", _CHAT, "LLAMA_ARG_CHAT_TEMPLATE", label="chat template"),
    _ff("chat_template_file", ("--chat-template-file",), "str", _CHAT, "LLAMA_ARG_CHAT_TEMPLATE_FILE",
        label="chat template file"),
    _ff("chat_template_kwargs", ("--chat-template-kwargs",), "str", _CHAT, "LLAMA_ARG_CHAT_TEMPLATE_KWARGS",
        label="chat template kwargs (JSON)"),
    _ff("reasoning_format", ("--reasoning-format",), "str", _CHAT, "LLAMA_ARG_THINK", label="reasoning format"),
    _ff("reasoning", ("--reasoning", "-rea"), "str", _CHAT, "LLAMA_ARG_REASONING", label="reasoning"),
    _ff("reasoning_effort", ("--reasoning-effort",), "str", _CHAT, "LLAMA_ARG_REASONING_EFFORT",
        label="reasoning effort"),
    _ff("reasoning_budget", ("--reasoning-budget",), "int", _CHAT, "LLAMA_ARG_THINK_BUDGET", label="reasoning budget"),
    _ff("reasoning_preserve", ("--reasoning-preserve",), "toggle", _CHAT, "LLAMA_ARG_REASONING_PRESERVE",
        neg=("--no-reasoning-preserve",), label="preserve reasoning"),
    _ff("temp", ("--temp", "--temperature"), "float", _SAMP, "LLAMA_ARG_TEMPERATURE", label="temperature"),
    _ff("top_p", ("--top-p",), "float", _SAMP, "LLAMA_ARG_TOP_P", label="top-p"),
    _ff("top_k", ("--top-k",), "int", _SAMP, "LLAMA_ARG_TOP_K", label="top-k"),
    _ff("min_p", ("--min-p",), "float", _SAMP, "LLAMA_ARG_MIN_P", label="min-p"),
    _ff("presence_penalty", ("--presence-penalty",), "float", _SAMP, "LLAMA_ARG_PRESENCE_PENALTY",
        label="presence penalty"),
    _ff("frequency_penalty", ("--frequency-penalty",), "float", _SAMP, "LLAMA_ARG_FREQUENCY_PENALTY",
        label="frequency penalty"),
    _ff("repeat_penalty", ("--repeat-penalty",), "float", _SAMP, "LLAMA_ARG_REPEAT_PENALTY", label="repeat penalty"),
    _ff("seed", ("--seed", "-s"), "int", _SAMP, label="seed"),
    _ff("host", ("--host",), "str", _SRV, "LLAMA_ARG_HOST", label="host"),
    _ff("port", ("--port",), "int", _SRV, "LLAMA_ARG_PORT", label="port"),
    _ff("api_key", ("--api-key",), "secret", _SRV, "LLAMA_API_KEY", label="API key"),
    _ff("api_key_file", ("--api-key-file",), "str", _SRV, "LLAMA_ARG_API_KEY_FILE", label="API key file"),
    _ff("parallel", ("--parallel", "-np"), "int", _SRV, "LLAMA_ARG_N_PARALLEL", label="parallel slots"),
    _ff("kv_unified", ("--kv-unified", "-kvu"), "toggle", _SRV, "LLAMA_ARG_KV_UNIFIED",
        neg=("--no-kv-unified", "-no-kvu"), label="unified KV"),
    _ff("metrics", ("--metrics",), "switch", _SRV, "LLAMA_ARG_ENDPOINT_METRICS", label="/metrics endpoint"),
    _ff("slots", ("--slots",), "toggle", _SRV, "LLAMA_ARG_ENDPOINT_SLOTS", neg=("--no-slots",),
        label="/slots endpoint"),
    _ff("props", ("--props",), "switch", _SRV, "LLAMA_ARG_ENDPOINT_PROPS", label="POST /props"),
)
FIELD_BY_NAME: dict[str, FieldFlag] = {f.field: f for f in FIELD_FLAGS}
_BY_SPELLING: dict[str, tuple[FieldFlag, bool]] = {}
for _f in FIELD_FLAGS:
    for _n in _f.names:
        _BY_SPELLING[_n] = (_f, True)
    for _n in _f.neg:
        _BY_SPELLING[_n] = (_f, False)
_BY_ENV: dict[str, FieldFlag] = {f.env: f for f in FIELD_FLAGS if f.env}

SECRET_FLAGS = frozenset({"--api-key", "-hft", "--hf-token"})
SECRET_ENV_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
MASK = "********"


@dataclass(frozen=True)
class _Removed:
    replacement: str
    fix: tuple[str, ...] = ()
    arity: int = 0


# Flags the tested build no longer defines at all (so its --help cannot say so); `fix` is the argv
# that replaces them. Removed flags that --help still lists are recognised from their help text.
REMOVED_FLAGS: dict[str, _Removed] = {
    "--mlock": _Removed("--load-mode mlock (use mmap+mlock to keep mmap)", ("--load-mode", "mlock")),
    "--no-mmap": _Removed("--load-mode none", ("--load-mode", "none")),
    "--mmap": _Removed("--load-mode mmap", ("--load-mode", "mmap")),
    "--direct-io": _Removed("--load-mode dio", ("--load-mode", "dio")),
    "-dio": _Removed("--load-mode dio", ("--load-mode", "dio")),
    "--no-direct-io": _Removed("--load-mode auto", ("--load-mode", "auto")),
    "--draft": _Removed("--spec-draft-n-max N (or --spec-ngram-mod-n-max N)", ("--spec-draft-n-max",), 1),
    "--draft-n": _Removed("--spec-draft-n-max N (or --spec-ngram-mod-n-max N)", ("--spec-draft-n-max",), 1),
    "--draft-max": _Removed("--spec-draft-n-max N (or --spec-ngram-mod-n-max N)", ("--spec-draft-n-max",), 1),
    "--draft-min": _Removed("--spec-draft-n-min N (or --spec-ngram-mod-n-min N)", ("--spec-draft-n-min",), 1),
    "--draft-n-min": _Removed("--spec-draft-n-min N (or --spec-ngram-mod-n-min N)", ("--spec-draft-n-min",), 1),
}
_FA_VALUES = frozenset({"on", "enabled", "true", "1", "off", "disabled", "false", "0", "auto", "-1"})
_TRUE = frozenset({"on", "enabled", "true", "1"})
_FALSE = frozenset({"off", "disabled", "false", "0"})
_INT_RE = re.compile(r"^[+-]?\d+$")
_FLOAT_RE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_ASSIGN_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_NEG_NUMBER = re.compile(r"^-\d")


class RemovedFlag(BaseModel):
    """A flag the binary no longer accepts, kept as written; `replacement` says what to use instead."""

    model_config = ConfigDict(frozen=True)

    tokens: tuple[str, ...]
    flag: str
    replacement: str
    fix: tuple[str, ...] = ()  # argv that replaces `tokens` (a value is appended for `--draft N`)


class ImportResult(BaseModel):
    """What `import_command` understood: the profile, and what it kept without understanding."""

    model_config = ConfigDict(frozen=True)

    profile: LaunchProfile
    unknown: list[str] = []  # tokens not known to the catalog, in order (also kept in profile.extra_args)
    removed: list[RemovedFlag] = []
    notes: list[str] = []
    binary: str | None = None  # the program as written in the pasted text


class ValidationResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    unknown: list[str] = []
    removed: list[RemovedFlag] = []

    @property
    def ok(self) -> bool:
        return not self.unknown and not self.removed
