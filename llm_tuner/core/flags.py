"""llama-server's and llama-bench's flags: the one table, and the small functions that read argv with it.

Every spelling and alias, whether a flag takes a value, which flags and variables hold secrets, the
`LLAMA_ARG_*` variable of each flag and its llama-bench equivalent live here and nowhere else. The code
names a flag by its key (`"ctx_size"`, a LaunchProfile field where the profile models the flag), never by
a spelling: `spelling("ctx_size")` is `--ctx-size`, `names("ctx_size")` every alias. Which spelling a
launch writes is decided from the chosen binary's `--help` (`spelling(key, known=...)`), so a fork or an
older build that only knows an alias still gets a flag it accepts.

Sources: llama.cpp `common/arg.cpp` (flags, aliases, `set_env`), `tools/llama-bench/llama-bench.cpp`
(llama-bench's flags and its list separators), and the tested build's `--help` (llm_tuner/data).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["str", "int", "float", "switch", "toggle", "onoff", "layers", "list", "floats", "ints",
               "append", "overrides", "secret", "fa"]

SECTIONS = ("Model", "Context & KV", "GPU offload & split", "Speculative decoding", "Batching & threads",
            "Chat", "Sampling", "Server")

ENV_PREFIX = "LLAMA_ARG_"  # llama-server reads LLAMA_ARG_<NAME> for most flags (common/arg.cpp set_env)
API_KEY_ENV = "LLAMA_API_KEY"  # `--api-key`: a comma-separated list (arg.cpp set_env("LLAMA_API_KEY"))
HF_TOKEN_ENV = "HF_TOKEN"  # `--hf-token` (arg.cpp set_env("HF_TOKEN"))
SECRET_ENV_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")  # any variable named like this is shown masked
MASK = "********"


@dataclass(frozen=True)
class Flag:
    """One llama-server flag.

    `key` names it in code; for a flag the profile models it is also the LaunchProfile field (`field`).
    `names` are its positive spellings, the one written first unless the binary lacks it; `neg` the negative
    spellings of a toggle. `kind` says whether and what value it takes ('switch' and 'toggle' take none).
    `env` is the variable llama-server reads for it. `bench` is llama-bench's spelling (None: llama-bench has
    no such setting) and `bench_sep` the separator llama-bench wants inside a list value ('/' for `-ts`, since
    it uses ',' between configurations). `serving` flags only concern serving (network, UI, logging) and
    have no effect on speed. `repeats`: llama-server adds each use's value to a list.
    """

    key: str
    names: tuple[str, ...]
    kind: Kind = "str"
    section: str = ""
    env: str | None = None
    neg: tuple[str, ...] = ()
    label: str = ""
    field: str | None = None  # the LaunchProfile field that holds it (None: kept in extra_args)
    secret: bool = False
    bench: str | None = None
    bench_sep: str | None = None
    serving: bool = False
    repeats: bool = False  # each use adds a value (-r A -r B): no single field can hold it

    @property
    def flag(self) -> str:
        """The long spelling where one exists ('--ctx-size'), else the first."""
        longs = [n for n in self.names if n.startswith("--")]
        return longs[0] if longs else self.names[0]

    @property
    def neg_flag(self) -> str | None:
        longs = [n for n in self.neg if n.startswith("--")]
        return longs[0] if longs else (self.neg[0] if self.neg else None)

    @property
    def takes_value(self) -> bool:
        return self.kind not in ("switch", "toggle")


def _f(key: str, names: str, kind: Kind = "str", section: str = "", env: str | None = None, neg: str = "",
       label: str = "", *, modelled: bool = True, secret: bool = False, bench: str | None = None,
       bench_sep: str | None = None, serving: bool = False, repeats: bool = False) -> Flag:
    return Flag(key, tuple(names.split()), kind, section, env, tuple(neg.split()), label or key.replace("_", " "),
                key if modelled else None, secret, bench, bench_sep, serving, repeats)


def _x(key: str, names: str, kind: Kind = "str", **kw: Any) -> Flag:
    """A flag the profile does not model (kept in extra_args), known here for its arity or its role."""
    return _f(key, names, kind, modelled=False, **kw)


_M, _KV, _GPU, _SPEC, _BT, _CHAT, _SAMP, _SRV = SECTIONS
_A = "LLAMA_ARG_"

# The flags a LaunchProfile models, in the order a command line writes them.
_FIELDS: tuple[Flag, ...] = (
    _f("model", "--model -m", "str", _M, _A + "MODEL", label="model file", bench="-m"),
    _f("hf_repo", "--hf-repo -hf -hfr", "str", _M, _A + "HF_REPO", label="Hugging Face repo"),
    _f("mmproj", "--mmproj -mm", "str", _M, _A + "MMPROJ", label="multimodal projector"),
    _f("alias", "--alias -a", "str", _M, _A + "ALIAS", label="model alias", serving=True),
    _f("ctx_size", "--ctx-size -c", "int", _KV, _A + "CTX_SIZE", label="context (tokens)"),
    _f("cache_type_k", "--cache-type-k -ctk", "str", _KV, _A + "CACHE_TYPE_K", label="K cache type", bench="-ctk"),
    _f("cache_type_v", "--cache-type-v -ctv", "str", _KV, _A + "CACHE_TYPE_V", label="V cache type", bench="-ctv"),
    _f("flash_attn", "--flash-attn -fa", "fa", _KV, _A + "FLASH_ATTN", label="flash attention", bench="-fa"),
    _f("swa_full", "--swa-full", "switch", _KV, _A + "SWA_FULL", label="full-size SWA cache"),
    _f("kv_offload", "--kv-offload -kvo", "toggle", _KV, _A + "KV_OFFLOAD", neg="--no-kv-offload -nkvo",
       label="KV cache on GPU", bench="-nkvo"),
    _f("cache_ram_mib", "--cache-ram -cram", "int", _KV, _A + "CACHE_RAM", label="prompt cache RAM (MiB)"),
    _f("context_shift", "--context-shift", "toggle", _KV, _A + "CONTEXT_SHIFT", neg="--no-context-shift",
       label="context shift"),
    _f("gpu_layers", "--n-gpu-layers -ngl --gpu-layers", "layers", _GPU, _A + "N_GPU_LAYERS", label="GPU layers",
       bench="-ngl"),
    _f("split_mode", "--split-mode -sm", "str", _GPU, _A + "SPLIT_MODE", label="split mode", bench="-sm"),
    # before -dev: llama-server registers RPC devices while parsing, so `-dev RPC0` needs --rpc first
    _f("rpc", "--rpc", "list", _GPU, _A + "RPC", label="RPC servers (host:port)", bench="--rpc"),
    _f("devices", "--device -dev", "list", _GPU, _A + "DEVICE", label="devices", bench="-dev", bench_sep="/"),
    _f("tensor_split", "--tensor-split -ts", "floats", _GPU, _A + "TENSOR_SPLIT", label="tensor split", bench="-ts",
       bench_sep="/"),
    _f("main_gpu", "--main-gpu -mg", "int", _GPU, _A + "MAIN_GPU", label="main GPU", bench="-mg"),
    _f("override_tensor", "--override-tensor -ot", "overrides", _GPU, _A + "OVERRIDE_TENSOR",
       label="override tensor rules", bench="-ot", bench_sep=";"),
    _f("cpu_moe", "--cpu-moe -cmoe", "switch", _GPU, _A + "CPU_MOE", label="all MoE experts on CPU"),
    _f("n_cpu_moe", "--n-cpu-moe -ncmoe", "int", _GPU, _A + "N_CPU_MOE", label="MoE layers on CPU", bench="-ncmoe"),
    _f("fit", "--fit -fit", "onoff", _GPU, _A + "FIT", label="fit to free memory"),
    _f("fit_target_mib", "--fit-target -fitt", "ints", _GPU, _A + "FIT_TARGET", label="fit margin per device (MiB)"),
    _f("fit_ctx", "--fit-ctx -fitc", "int", _GPU, _A + "FIT_CTX", label="fit minimum context"),
    _f("spec_type", "--spec-type", "append", _SPEC, _A + "SPEC_TYPE", label="speculative types"),
    _f("draft_n_max", "--spec-draft-n-max", "int", _SPEC, _A + "SPEC_DRAFT_N_MAX", label="draft max tokens"),
    _f("draft_n_min", "--spec-draft-n-min", "int", _SPEC, _A + "SPEC_DRAFT_N_MIN", label="draft min tokens"),
    _f("draft_model", "--spec-draft-model -md --model-draft", "str", _SPEC, _A + "SPEC_DRAFT_MODEL",
       label="draft model"),
    _f("draft_device", "--spec-draft-device -devd --device-draft", "list", _SPEC, label="draft devices"),
    _f("draft_gpu_layers", "--spec-draft-ngl -ngld --gpu-layers-draft --n-gpu-layers-draft", "layers", _SPEC,
       _A + "N_GPU_LAYERS_DRAFT", label="draft GPU layers"),
    _f("draft_cache_type_k", "--spec-draft-type-k -ctkd --cache-type-k-draft", "str", _SPEC,
       _A + "SPEC_DRAFT_CACHE_TYPE_K", label="draft K cache type"),
    _f("draft_cache_type_v", "--spec-draft-type-v -ctvd --cache-type-v-draft", "str", _SPEC,
       _A + "SPEC_DRAFT_CACHE_TYPE_V", label="draft V cache type"),
    _f("draft_override_tensor", "--spec-draft-override-tensor -otd "
                                "--override-tensor-draft", "overrides", _SPEC,
       label="draft override tensor rules"),
    _f("draft_p_min", "--spec-draft-p-min --draft-p-min", "float", _SPEC, _A + "SPEC_DRAFT_P_MIN",
       label="draft p-min"),
    *(_f(f"ngram_{kind}_{par}", f"--spec-ngram-{kind.replace('_', '-')}-{par.replace('_', '-')}", "int", _SPEC,
         label=f"ngram {kind.replace('_', '-')} {par.replace('_', '-')}")
      for kind, pars in (("mod", ("n_min", "n_max", "n_match")), ("simple", ("size_n", "size_m", "min_hits")),
                         ("map_k", ("size_n", "size_m", "min_hits")), ("map_k4v", ("size_n", "size_m", "min_hits")))
      for par in pars),
    _f("batch_size", "--batch-size -b", "int", _BT, _A + "BATCH", label="batch (tokens)", bench="-b"),
    _f("ubatch_size", "--ubatch-size -ub", "int", _BT, _A + "UBATCH", label="micro-batch (tokens)", bench="-ub"),
    _f("threads", "--threads -t", "int", _BT, _A + "THREADS", label="threads", bench="-t"),
    _f("threads_batch", "--threads-batch -tb", "int", _BT, label="batch threads"),
    _f("load_mode", "--load-mode -lm", "str", _BT, _A + "LOAD_MODE", label="load mode"),
    _f("cont_batching", "--cont-batching -cb", "toggle", _BT, _A + "CONT_BATCHING", neg="--no-cont-batching -nocb",
       label="continuous batching"),
    _f("jinja", "--jinja", "toggle", _CHAT, _A + "JINJA", neg="--no-jinja", label="jinja templates", serving=True),
    _f("chat_template", "--chat-template", "str", _CHAT, _A + "CHAT_TEMPLATE", label="chat template"),
    _f("chat_template_file", "--chat-template-file", "str", _CHAT, _A + "CHAT_TEMPLATE_FILE",
       label="chat template file"),
    _f("chat_template_kwargs", "--chat-template-kwargs", "str", _CHAT, _A + "CHAT_TEMPLATE_KWARGS",
       label="chat template kwargs (JSON)"),
    _f("reasoning_format", "--reasoning-format", "str", _CHAT, _A + "THINK", label="reasoning format"),
    _f("reasoning", "--reasoning -rea", "str", _CHAT, _A + "REASONING", label="reasoning"),
    _f("reasoning_effort", "--reasoning-effort", "str", _CHAT, _A + "REASONING_EFFORT", label="reasoning effort"),
    _f("reasoning_budget", "--reasoning-budget", "int", _CHAT, _A + "THINK_BUDGET", label="reasoning budget"),
    _f("reasoning_preserve", "--reasoning-preserve", "toggle", _CHAT, _A + "REASONING_PRESERVE",
       neg="--no-reasoning-preserve", label="preserve reasoning"),
    _f("temp", "--temp --temperature", "float", _SAMP, _A + "TEMPERATURE", label="temperature"),
    _f("top_p", "--top-p", "float", _SAMP, _A + "TOP_P", label="top-p"),
    _f("top_k", "--top-k", "int", _SAMP, _A + "TOP_K", label="top-k"),
    _f("min_p", "--min-p", "float", _SAMP, _A + "MIN_P", label="min-p"),
    _f("presence_penalty", "--presence-penalty", "float", _SAMP, _A + "PRESENCE_PENALTY", label="presence penalty"),
    _f("frequency_penalty", "--frequency-penalty", "float", _SAMP, _A + "FREQUENCY_PENALTY",
       label="frequency penalty"),
    _f("repeat_penalty", "--repeat-penalty", "float", _SAMP, _A + "REPEAT_PENALTY", label="repeat penalty"),
    _f("seed", "--seed -s", "int", _SAMP, label="seed"),
    _f("host", "--host", "str", _SRV, _A + "HOST", label="host", serving=True),
    _f("port", "--port", "int", _SRV, _A + "PORT", label="port", serving=True),
    _f("api_key", "--api-key", "secret", _SRV, API_KEY_ENV, label="API key", secret=True, serving=True),
    _f("api_key_file", "--api-key-file", "str", _SRV, _A + "API_KEY_FILE", label="API key file", serving=True),
    _f("parallel", "--parallel -np", "int", _SRV, _A + "N_PARALLEL", label="parallel slots"),
    _f("kv_unified", "--kv-unified -kvu", "toggle", _SRV, _A + "KV_UNIFIED", neg="--no-kv-unified -no-kvu",
       label="unified KV"),
    _f("metrics", "--metrics", "switch", _SRV, _A + "ENDPOINT_METRICS", label="/metrics endpoint", serving=True),
    _f("slots", "--slots", "toggle", _SRV, _A + "ENDPOINT_SLOTS", neg="--no-slots", label="/slots endpoint",
       serving=True),
    _f("props", "--props", "switch", _SRV, _A + "ENDPOINT_PROPS", label="POST /props", serving=True),
)

# Flags the profile keeps verbatim in extra_args, known here for their arity, their meaning to the memory
# plan or the app's own use of them.
_OTHERS: tuple[Flag, ...] = (
    _x("hf_token", "--hf-token -hft", env=HF_TOKEN_ENV, secret=True, serving=True),
    _x("model_url", "--model-url -mu"),
    _x("models_dir", "--models-dir", env=_A + "MODELS_DIR"),  # router mode: a server of models, no -m
    _x("models_preset", "--models-preset", env=_A + "MODELS_PRESET"),
    _x("models_max", "--models-max", "int", env=_A + "MODELS_MAX"),  # router: instances at once (0: no limit)
    _x("models_autoload", "--models-autoload", "toggle", env=_A + "MODELS_AUTOLOAD", neg="--no-models-autoload"),
    _x("hf_file", "--hf-file -hff"),
    _x("mmproj_url", "--mmproj-url"),
    _x("n_cpu_ffn", "--n-cpu-ffn -ncffn", "int"),
    _x("op_offload", "--op-offload", "toggle", neg="--no-op-offload"),
    _x("no_host", "--no-host", "switch", bench="--no-host"),
    _x("repack", "--repack", "toggle", neg="--no-repack -nr"),
    _x("embedding", "--embedding --embeddings", "switch"),
    _x("spec_draft_sampling", "--spec-draft-sampling"),
    _x("predict", "--predict -n --n-predict", "int", env=_A + "N_PREDICT"),
    _x("threads_http", "--threads-http", "int", serving=True),
    _x("timeout", "--timeout -to", "int", serving=True),
    _x("cache_reuse", "--cache-reuse", "int"),
    _x("verbosity", "--verbosity -lv --log-verbosity", "int", serving=True),
    _x("verbose", "--verbose -v", "switch", serving=True),
    _x("log_file", "--log-file", serving=True),
    _x("log_colors", "--log-colors", serving=True),
    _x("log_prefix", "--log-prefix", "switch", serving=True),
    _x("log_timestamps", "--log-timestamps", "switch", serving=True),
    _x("log_jsonl", "--log-jsonl", "toggle", neg="--no-log-jsonl", serving=True),
    _x("webui", "--webui", "toggle", neg="--no-webui", serving=True),
    _x("webui_config", "--webui-config", serving=True),
    _x("webui_config_file", "--webui-config-file", serving=True),
    _x("slot_save_path", "--slot-save-path", serving=True),
    _x("sleep_idle_seconds", "--sleep-idle-seconds", "int", serving=True),
    _x("api_prefix", "--api-prefix", serving=True),
    _x("path", "--path", serving=True),
    _x("media_path", "--media-path", serving=True),
    _x("sse_ping_interval", "--sse-ping-interval", serving=True),
    _x("ssl_key_file", "--ssl-key-file", serving=True),
    _x("ssl_cert_file", "--ssl-cert-file", serving=True),
    _x("tools", "--tools", serving=True),
    _x("rope_scaling", "--rope-scaling"),
    _x("rope_scale", "--rope-scale", "float"),
    _x("rope_freq_base", "--rope-freq-base", "float"),
    _x("rope_freq_scale", "--rope-freq-scale", "float"),
    _x("yarn_orig_ctx", "--yarn-orig-ctx", "int"),
    _x("grp_attn_n", "--grp-attn-n", "int"),
    _x("grp_attn_w", "--grp-attn-w", "int"),
    _x("defrag_thold", "--defrag-thold -dt", "float"),
    _x("keep", "--keep", "int"),
    _x("lora", "--lora"),
    _x("lora_scaled", "--lora-scaled"),
    _x("control_vector", "--control-vector"),
    _x("cpu_mask", "--cpu-mask -C"),
    _x("cpu_mask_batch", "--cpu-mask-batch -Cb"),
    _x("prio", "--prio", "int"),
    _x("prio_batch", "--prio-batch", "int"),
    _x("poll", "--poll", "int"),
    _x("numa", "--numa"),
    _x("special", "--special -sp", "switch"),
    _x("reasoning_budget_message", "--reasoning-budget-message"),
    _x("ctx_checkpoints", "--ctx-checkpoints -ctxcp", "int"),
    # each use adds one more (common/arg.cpp push_back): a stop word, a token bias, a DRY sequence breaker
    _x("reverse_prompt", "--reverse-prompt -r", repeats=True),
    _x("logit_bias", "--logit-bias -l", repeats=True),
    _x("dry_sequence_breaker", "--dry-sequence-breaker", repeats=True),
    _x("fit_print", "--fit-print -fitp", "onoff"),
    # what the app runs a binary with to learn about it
    _x("help", "--help -h", "switch"),
    _x("version", "--version", "switch"),
    _x("list_devices", "--list-devices", "switch"),
)

# ggml-rpc-server's own flags (tools/rpc/rpc-server.cpp; its cache folder is the LLAMA_CACHE variable's)
RPC_SERVER_FLAGS = {"host": "-H", "port": "-p", "device": "-d", "threads": "-t", "cache": "-c"}
RPC_CACHE_ENV = "LLAMA_CACHE"
FLAGS: tuple[Flag, ...] = _FIELDS + _OTHERS
FIELD_FLAGS: tuple[Flag, ...] = _FIELDS
_BY_KEY: dict[str, Flag] = {f.key: f for f in FLAGS}
_BY_SPELLING: dict[str, tuple[Flag, bool]] = {}
for _flag in FLAGS:
    for _n in _flag.names:
        _BY_SPELLING[_n] = (_flag, True)
    for _n in _flag.neg:
        _BY_SPELLING[_n] = (_flag, False)
_BY_ENV: dict[str, Flag] = {f.env: f for f in FLAGS if f.env}


@dataclass(frozen=True)
class Removed:
    """A flag the tested build no longer defines at all (so its --help cannot say so)."""

    replacement: str
    fix: tuple[str, ...] = ()  # argv that replaces it; a value is appended when `arity` is 1
    arity: int = 0


_DRAFT_MAX = "--spec-draft-n-max N (a draft model or MTP) or --spec-ngram-mod-n-max N (n-gram drafting)"
_DRAFT_MIN = "--spec-draft-n-min N (a draft model or MTP) or --spec-ngram-mod-n-min N (n-gram drafting)"
REMOVED: dict[str, Removed] = {
    # --mlock locked the mapped model (mmap stayed on): mmap+mlock is what it did; "mlock" alone loads without
    # mmap
    "--mlock": Removed("--load-mode mmap+mlock (what --mlock did; mlock alone also turns mmap off)",
                       ("--load-mode", "mmap+mlock")),
    "--no-mmap": Removed("--load-mode none", ("--load-mode", "none")),
    "--mmap": Removed("--load-mode mmap", ("--load-mode", "mmap")),
    "--direct-io": Removed("--load-mode dio", ("--load-mode", "dio")),
    "-dio": Removed("--load-mode dio", ("--load-mode", "dio")),
    "--no-direct-io": Removed("--load-mode auto", ("--load-mode", "auto")),
    # the --draft* flags split in two (a draft model or MTP, and n-gram drafting): which one a profile meant is
    # the user's choice (the migration offers both), so there is no mechanical fix
    "--draft": Removed(_DRAFT_MAX, (), 1),
    "--draft-n": Removed(_DRAFT_MAX, (), 1),
    "--draft-max": Removed(_DRAFT_MAX, (), 1),
    "--draft-min": Removed(_DRAFT_MIN, (), 1),
    "--draft-n-min": Removed(_DRAFT_MIN, (), 1),
}

# values of -fa; old builds took -fa as a switch
FA_VALUES = frozenset({"on", "enabled", "true", "1", "off", "disabled", "false", "0", "auto", "-1"})
TRUE_WORDS = frozenset({"on", "enabled", "true", "1"})
FALSE_WORDS = frozenset({"off", "disabled", "false", "0"})
_NEG_NUMBER = re.compile(r"^-\d")

# llama-bench's own flags (tools/llama-bench/llama-bench.cpp): the measurement it is asked for
BENCH_PROMPT, BENCH_GEN, BENCH_REPS, BENCH_OUTPUT, BENCH_DEPTH, BENCH_NO_WARMUP = "-p", "-n", "-r", "-o", "-d", \
    "--no-warmup"
# llama-perplexity's own options (the text to score, how many chunks of it)
PPL_FILE, PPL_CHUNKS = "-f", "--chunks"
_BENCH_VALUES: dict[str, Mapping[str, str]] = {"gpu_layers": {"all": "999"}}  # llama-bench has no 'all'


# -- lookups --------------------------------------------------------------------------------------

def flag(key: str) -> Flag:
    """The flag a key names (KeyError for a key that is not in the table: a programming error)."""
    return _BY_KEY[key]


def spelling(key: str, known: Callable[[str], bool] | None = None, prefer: str | None = None) -> str:
    """The spelling to write for a flag: `prefer` (the user's own) when the binary knows it, else the long
    spelling, else the first alias the binary knows. `known` says whether the chosen binary's `--help`
    lists a spelling; without it every spelling counts as known."""
    f = _BY_KEY[key]
    ordered = [f.flag, *[n for n in f.names if n != f.flag]]
    if prefer is not None and (prefer in f.names) and (known is None or known(prefer)):
        return prefer
    if known is None:
        return ordered[0]
    return next((n for n in ordered if known(n)), ordered[0])


def neg_spelling(key: str, known: Callable[[str], bool] | None = None) -> str:
    f = _BY_KEY[key]
    ordered = [n for n in (f.neg_flag, *f.neg) if n]
    if not ordered:
        raise KeyError(f"{key} has no negative spelling")
    return next((n for n in ordered if known is None or known(n)), ordered[0])


def short(key: str, *, negative: bool = False) -> str:
    """The shortest spelling ('-ngl', or '-nkvo' for the negative of a toggle): compact command lines and
    messages that name a flag the way people type it."""
    f = _BY_KEY[key]
    return min(f.neg if negative else f.names, key=len)


def names(key: str) -> tuple[str, ...]:
    """Every spelling of a flag, negative ones of a toggle included."""
    f = _BY_KEY[key]
    return f.names + f.neg


def normalize(token: str) -> str:
    """`--flag=value` -> `--flag`; `_` for `-` in long flags, as llama.cpp accepts."""
    if token.startswith("--"):
        token = token.split("=", 1)[0]
        return "--" + token[2:].replace("_", "-")
    return token


def lookup(token: str) -> tuple[Flag, bool] | None:
    """(flag, positive) for any spelling, `--flag=value` and `_` in long flags included; None if unknown."""
    return _BY_SPELLING.get(normalize(token))




def all_spellings() -> frozenset[str]:
    """Every spelling the table knows (positive, negative and removed): the one-home test uses it."""
    return frozenset(_BY_SPELLING) | frozenset(REMOVED)


def by_env(name: str) -> Flag | None:
    return _BY_ENV.get(name)


def is_llama_env(name: str) -> bool:
    """A variable llama-server reads as a flag (LLAMA_ARG_*, LLAMA_API_KEY, HF_TOKEN)."""
    return name.startswith(ENV_PREFIX) or name in _BY_ENV


def looks_like_value(tok: str) -> bool:
    """A token that cannot be a flag: a word, a negative number or '-'."""
    return not tok.startswith("-") or bool(_NEG_NUMBER.match(tok)) or tok == "-"


# -- reading and editing argv ---------------------------------------------------------------------

def _arity(tok: str, argv: Sequence[str], i: int) -> int:
    """How many value words follow argv[i] (0 or 1); unknown flags take the next word if it is a value."""
    if tok.startswith("--") and "=" in tok:
        return 0
    hit = lookup(tok)
    nxt = argv[i + 1] if i + 1 < len(argv) else None
    if nxt is None:
        return 0
    if hit is not None:
        f, positive = hit
        return 1 if positive and f.takes_value else 0
    return 1 if tok.startswith("-") and looks_like_value(nxt) else 0


def iter_flags(argv: Sequence[str]) -> Iterable[tuple[int, str, str | None]]:
    """(index, token, value or None) for each flag in argv, values read with the table's arities."""
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok.startswith("-") and not _NEG_NUMBER.match(tok):
            if tok.startswith("--") and "=" in tok:
                yield i, tok, tok.split("=", 1)[1]
                i += 1
                continue
            k = _arity(tok, argv, i)
            yield i, tok, (argv[i + 1] if k else None)
            i += 1 + k
        else:
            i += 1


def value_of(argv: Sequence[str], key: str) -> str | None:
    """The last value given for a flag (any spelling, `--flag=value` too); None when absent."""
    value = None
    for _i, tok, v in iter_flags(argv):
        hit = lookup(tok)
        if hit is not None and hit[0].key == key and hit[1]:
            value = v
    return value


def has(argv: Sequence[str], key: str) -> bool:
    """Whether argv gives the flag, in any spelling (negative ones included)."""
    return any((hit := lookup(tok)) is not None and hit[0].key == key for _i, tok, _v in iter_flags(argv))


def without(argv: Sequence[str], *keys: str) -> list[str]:
    """argv without the given flags (any spelling) and their values."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        hit = lookup(tok) if tok.startswith("-") else None
        if hit is not None and hit[0].key in keys:
            i += 1 + _arity(tok, argv, i)
            continue
        out.append(tok)
        i += 1
    return out




def argv_for(key: str, value: str | None = None) -> list[str]:
    """The words that set one flag: ['--ctx-size', '4096'] (or the switch alone)."""
    return [spelling(key), *([] if value is None else [str(value)])]


# -- secrets --------------------------------------------------------------------------------------

def is_secret_env(name: str) -> bool:
    return any(w in name.upper() for w in SECRET_ENV_WORDS)


def is_secret_flag(token: str) -> bool:
    hit = lookup(token)
    return hit is not None and hit[0].secret


def mask_argv(argv: Sequence[str]) -> list[str]:
    """argv as it may be shown, logged or stored: the value of every secret flag replaced by MASK."""
    out: list[str] = []
    hide_next = False
    for tok in argv:
        if hide_next:
            out.append(MASK if tok else tok)  # an empty key is no key: show it as it is
            hide_next = False
            continue
        if tok.startswith("--") and "=" in tok and is_secret_flag(tok):
            name, value = tok.split("=", 1)
            out.append(f"{name}={MASK if value else ''}")
            continue
        out.append(tok)
        hide_next = is_secret_flag(tok)
    return out


def mask_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment as it may be shown: every variable named like a secret (or read as one) masked."""
    return {k: (MASK if v and _env_is_secret(k) else v) for k, v in env.items()}




def secrets_to_env(argv: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """Move every secret flag's value out of argv into the variable llama-server reads it from.

    A process's argv is world-readable (`ps`, /proc/PID/cmdline) while its environment is readable only by
    its owner (/proc/PID/environ is 0400). `--api-key` values (each a comma-separated list, appended by
    llama-server) join LLAMA_API_KEY after any keys already there; `--hf-token` becomes HF_TOKEN. Empty
    keys are no keys. Returns new lists; nothing is modified.
    """
    out: list[str] = []
    env = dict(env)
    i = 0
    while i < len(argv):
        tok = argv[i]
        hit = lookup(tok) if tok.startswith("-") else None
        if hit is None or not hit[0].secret or not hit[0].env:
            out.append(tok)
            i += 1
            continue
        if tok.startswith("--") and "=" in tok:
            value, i = tok.split("=", 1)[1], i + 1
        elif i + 1 < len(argv):
            value, i = argv[i + 1], i + 2
        else:
            out.append(tok)
            i += 1
            continue
        name = hit[0].env
        if name == API_KEY_ENV:
            have = [k for k in env.get(name, "").split(",") if k]
            env[name] = ",".join(have + [k for k in value.split(",") if k and k not in have])
            if not env[name]:
                del env[name]
        elif value:
            env[name] = value
    return out, env


def strip_secrets(argv: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """argv and environment as a record keeps them (history, exports): every secret left out, not masked,
    so nothing replays a masked value as a real key."""
    rest, _moved = secrets_to_env(argv, {})
    return rest, {k: v for k, v in env.items() if not _env_is_secret(k)}


def _env_is_secret(name: str) -> bool:
    return is_secret_env(name) or (name in _BY_ENV and _BY_ENV[name].secret)


def api_keys(env: Mapping[str, str]) -> list[str]:
    """The API keys a server started with this environment accepts (empty: none, it is open)."""
    return [k for k in env.get(API_KEY_ENV, "").split(",") if k.strip()]


# -- environment ----------------------------------------------------------------------------------

def env_to_argv(env: Mapping[str, str], argv: Sequence[str] = ()) -> list[str]:
    """The flags that LLAMA_ARG_* variables set, for the flags argv does not give itself.

    llama-server applies its variables first and lets a flag on the command line override them, so
    `[*env_to_argv(env, argv), *argv]` is what the server acts on. Toggles read `LLAMA_ARG_NO_<NAME>`
    too; switch variables take true/false words. Secrets are left out (they never matter to a plan).
    """
    out: list[str] = []
    given = {hit[0].key for _i, tok, _v in iter_flags(argv) if (hit := lookup(tok)) is not None}
    for name, raw in env.items():
        f = _BY_ENV.get(name)
        negative = False
        if f is None and name.startswith(ENV_PREFIX + "NO_"):
            f = _BY_ENV.get(ENV_PREFIX + name[len(ENV_PREFIX + "NO_"):])
            negative = f is not None and f.kind == "toggle"
            if not negative:
                f = None
        if f is None or f.secret or f.key in given:
            continue
        off = f.neg_flag  # a toggle's negative spelling (`--no-mmap`); None for a switch
        if negative:
            if off:
                out.append(off)
        elif f.kind in ("switch", "toggle"):
            if raw.lower() in TRUE_WORDS:
                out.append(f.flag)
            elif raw.lower() in FALSE_WORDS and f.kind == "toggle" and off:
                out.append(off)
        else:
            out += [f.flag, raw]
        given.add(f.key)
    return out


def effective_argv(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """The arguments llama-server acts on: the flags its LLAMA_ARG_* variables set, then argv."""
    return [*env_to_argv(env, argv), *argv]


# -- llama-bench ----------------------------------------------------------------------------------

def to_llama_bench(server_argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """llama-bench arguments for the same settings, and the llama-server flags llama-bench lacks (listed,
    not silently dropped). List values get llama-bench's separators (`-ts 40/60`, `-ot a=CPU;b=CPU`)."""
    out: list[str] = []
    lacking: list[str] = []
    for _i, tok, value in iter_flags(server_argv):
        hit = lookup(tok)
        name = normalize(tok)
        if hit is None:
            lacking.append(f"{name} {value}" if value is not None else name)
            continue
        f, positive = hit
        if f.serving:
            continue
        if f.bench is None:
            lacking.append(f"{name} {value}" if value is not None else name)
        elif f.kind == "toggle":
            if not positive:  # --no-kv-offload -> -nkvo 1
                out += [f.bench, "1"]
        elif f.kind == "switch":
            out += [f.bench, "1"]
        elif value is not None:
            if f.key == "gpu_layers" and value == "auto":
                lacking.append(f"{name} auto")
                continue
            v = _BENCH_VALUES.get(f.key, {}).get(value, value)
            out += [f.bench, v.replace(",", f.bench_sep) if f.bench_sep else v]
    return out, lacking
