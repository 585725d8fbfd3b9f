"""Command lines: a binary's --help text -> flag catalog; profile <-> llama-server argv/env.

The flag catalog is read from the chosen binary's own `--help`, so forks and newer builds are
understood and removed flags are caught.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, SecretStr

from llm_tuner.core.profile import LaunchProfile, OverrideRule


class FlagSpec(BaseModel):
    """One flag of a binary: every spelling, its value placeholder, env var, default and help text."""

    model_config = ConfigDict(frozen=True)

    names: tuple[str, ...]
    value: str | None = None  # placeholder ('N', 'FNAME', '[on|off|auto]'); None for switches
    env: str | None = None
    default: str | None = None
    help: str = ""
    section: str = ""

    @property
    def canonical(self) -> str:
        """The long spelling where one exists ('--ctx-size'), else the first."""
        longs = [n for n in self.names if n.startswith("--")]
        return longs[0] if longs else self.names[0]


class FlagCatalog(BaseModel):
    model_config = ConfigDict(frozen=True)

    flags: tuple[FlagSpec, ...] = ()

    def lookup(self, name: str) -> FlagSpec | None:
        """Find a flag by any spelling; `_` is accepted for `-` in long flags as llama.cpp does."""
        index = self._index()
        spec = index.get(name)
        if spec is None and name.startswith("--"):
            spec = index.get(name.replace("_", "-"))
        return spec

    def _index(self) -> dict[str, FlagSpec]:
        # Frozen model: cache the name index in the instance dict on first use.
        cached = self.__dict__.get("_idx")
        if cached is None:
            cached = {n: f for f in self.flags for n in f.names}
            self.__dict__["_idx"] = cached
        return cached

    def by_env(self, env: str) -> FlagSpec | None:
        for f in self.flags:
            if f.env == env:
                return f
        return None


_SECTION_RE = re.compile(r"^-{3,}\s*(.+?)\s*-{3,}\s*$")
_ENV_RE = re.compile(r"\(env:\s*([A-Z0-9_]+)\)")


def _default_of(help_text: str) -> str | None:
    """The text inside '(default: ...)', parentheses balanced ('(default: 0, 0 = loaded from model)')."""
    i = help_text.find("default:")
    if i < 0:
        return None
    depth, j = 0, i + len("default:")
    for k in range(j, len(help_text)):
        ch = help_text[k]
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                return help_text[j:k].strip().strip("'\"")
            depth -= 1
    return help_text[j:].strip().split(")")[0].strip("'\"") or None


def _split_names_and_value(head: str) -> tuple[tuple[str, ...], str | None]:
    """'-hf, -hfr, --hf-repo <user>/<model>[:quant]' -> (('-hf', '-hfr', '--hf-repo'), '<user>/<model>[:quant]').

    Spellings are separated by a comma and whitespace (or just whitespace, as in llama-bench's
    '-ot --override-tensor'); commas inside placeholders ('N0,N1,...') do not separate.
    """
    names: list[str] = []
    value_parts: list[str] = []
    for part in re.split(r",\s+", head.strip()):
        for token in part.split():
            if not value_parts and _FLAG_TOKEN.match(token):
                names.append(token)
            else:
                value_parts.append(token)
    return tuple(names), (" ".join(value_parts) or None)


_FLAG_TOKEN = re.compile(r"^--?[A-Za-z][A-Za-z0-9_-]*$")
_GAP = re.compile(r"(?<![,\s])\s{2,}")  # the gap before help text: 2+ spaces not after a comma


def parse_help(text: str) -> FlagCatalog:
    """Parse llama.cpp's `--help` output into a FlagCatalog.

    Format (common/arg.cpp): a flag line starts at column 0 (llama-bench: column 2) with its spellings
    separated by ', ', then an optional value placeholder; the help text follows after a gap of 2+
    spaces (or on the next line when the spellings are long); continuation lines are indented;
    `(env: LLAMA_ARG_X)` and `(default: ...)` appear in the help text; '----- name -----' starts a section.
    """
    lines = text.splitlines()
    flags: list[FlagSpec] = []
    section = ""
    cur: dict | None = None

    def flush() -> None:
        nonlocal cur
        if cur is None:
            return
        help_text = " ".join(h for h in cur["help"] if h).strip()
        env = _ENV_RE.search(help_text)
        flags.append(FlagSpec(
            names=cur["names"], value=cur["value"], env=env.group(1) if env else None,
            default=_default_of(help_text), help=_ENV_RE.sub("", help_text).strip(), section=section,
        ))
        cur = None

    for raw in lines:
        line = raw.rstrip()
        if not line.strip():
            flush()
            continue
        if not line.startswith(" "):
            m = _SECTION_RE.match(line)
            if m:
                flush()
                section = m.group(1)
                continue
        stripped = line.lstrip(" ")
        if stripped.startswith("-") and len(line) - len(stripped) <= 4:
            flush()
            parts = _GAP.split(stripped, maxsplit=1)
            head, rest = parts[0], (parts[1] if len(parts) > 1 else "")
            names, value = _split_names_and_value(head)
            if value and "(default:" in value:  # '<auto|none|...> (default: auto)' with one space
                value, _, tail = value.partition("(default:")
                value, rest = value.strip() or None, f"(default:{tail} {rest}"
            if names:
                cur = {"names": names, "value": value, "help": [rest.strip()]}
        elif line.endswith(":") and not line.startswith(" "):  # llama-bench: 'test parameters:'
            flush()
            section = line[:-1]
        elif cur is not None:
            cur["help"].append(line.strip())
    flush()
    return FlagCatalog(flags=tuple(flags))


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


# -- value formatting ---------------------------------------------------------------------------

def format_number(x: float | int) -> str:
    """Shortest text that reads back to the same number ('40' for 40.0, '0.95')."""
    if isinstance(x, bool):
        return "1" if x else "0"
    if isinstance(x, int):
        return str(x)
    if x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return repr(x)


def field_tokens(profile: LaunchProfile, ff: FieldFlag) -> list[str]:
    """The argv tokens for one field (empty when the flag is absent)."""
    v = getattr(profile, ff.field)
    k = ff.kind
    if k == "switch":
        return [ff.flag] if v else []
    if k == "toggle":
        if v is None:
            return []
        return [ff.flag] if v else [ff.neg_flag or ff.flag]
    if k == "onoff":
        return [] if v is None else [ff.flag, "on" if v else "off"]
    if k in ("list", "append"):
        return [ff.flag, ",".join(v)] if v else []
    if k in ("floats", "ints"):
        return [ff.flag, ",".join(format_number(x) for x in v)] if v else []
    if k == "overrides":
        return [ff.flag, ",".join(str(r) for r in v)] if v else []
    if v is None:
        return []
    if k == "secret":
        return [ff.flag, v.get_secret_value()]
    if k in ("int", "float"):
        return [ff.flag, format_number(v)]
    if k == "layers":
        return [ff.flag, v if isinstance(v, str) else str(v)]
    return [ff.flag, str(v)]


def profile_to_argv(profile: LaunchProfile) -> tuple[list[str], dict[str, str]]:
    """The exact llama-server argument list (binary excluded) and extra environment of a profile.

    Modelled flags come first in a fixed order, with their long spelling; `extra_args` follow verbatim
    and in order. The environment is `profile.env` as is (LLAMA_ARG_* included): the caller adds it to
    the child's environment. The result is an argument list for exec, never a shell string.
    """
    argv: list[str] = []
    for ff in FIELD_FLAGS:
        argv += field_tokens(profile, ff)
    argv += list(profile.extra_args)
    return argv, dict(profile.env)


def field_value_text(profile: LaunchProfile, field: str, *, mask_secrets: bool = True) -> str | None:
    """A field as the command line shows it ('8192', 'on', 'q8_0'), None when the flag is absent."""
    ff = FIELD_BY_NAME[field]
    toks = field_tokens(profile, ff)
    if not toks:
        return None
    if ff.kind == "secret" and mask_secrets:
        return MASK
    if ff.kind in ("switch",):
        return "on"
    if ff.kind == "toggle":
        return "on" if getattr(profile, field) else "off"
    return " ".join(toks[1:])


def profile_diff(a: LaunchProfile, b: LaunchProfile) -> list[tuple[str, str | None, str | None]]:
    """Which flags differ between two profiles: (flag, value in a, value in b); None = absent.

    Modelled flags by their long spelling, then environment variables ('env NAME'), extra arguments
    and the binary. Secrets are masked.
    """
    out: list[tuple[str, str | None, str | None]] = []
    for ff in FIELD_FLAGS:
        va, vb = field_value_text(a, ff.field), field_value_text(b, ff.field)
        if va != vb or (ff.kind == "secret" and a.api_key != b.api_key):
            out.append((ff.flag, va, vb))
    for name in dict.fromkeys([*a.env, *b.env]):
        va, vb = a.env.get(name), b.env.get(name)
        if va != vb:
            if _is_secret_env(name):
                va, vb = (MASK if va is not None else None), (MASK if vb is not None else None)
            out.append((f"env {name}", va, vb))
    if a.extra_args != b.extra_args:
        out.append(("extra arguments", shlex.join(a.extra_args) or None, shlex.join(b.extra_args) or None))
    if a.binary != b.binary:
        out.append(("binary", a.binary, b.binary))
    return out


# -- shell rendering ----------------------------------------------------------------------------

def _is_secret_env(name: str) -> bool:
    return any(w in name.upper() for w in SECRET_ENV_WORDS)


def render_shell(argv: Sequence[str], env: Mapping[str, str] | None = None, binary: str | None = None,
                 mask_secrets: bool = True, *, multiline: bool = False) -> str:
    """A POSIX shell line a user can copy: `VAR=value ... binary args...`, every word quoted as needed.

    Secrets (the value after --api-key/--hf-token, env vars named like *KEY*/*TOKEN*) are masked
    unless `mask_secrets` is False. `multiline` breaks before each flag with backslash-newline.
    """
    words: list[list[str]] = []
    for name, value in (env or {}).items():
        shown = MASK if mask_secrets and _is_secret_env(name) else value
        words.append([f"{name}={shlex.quote(shown)}"])
    words.append([shlex.quote(binary or "llama-server")])
    prev_secret = False
    for tok in argv:
        shown = MASK if (mask_secrets and prev_secret) else tok
        q = shlex.quote(shown)
        if tok.startswith("-") and not _NEG_NUMBER.match(tok) or not words:
            words.append([q])
        else:
            words[-1].append(q)
        prev_secret = tok in SECRET_FLAGS
    groups = [" ".join(g) for g in words]
    return (" \\\n  " if multiline else " ").join(groups)


# -- tokenising pasted text (never a shell) ------------------------------------------------------

def _split_commands(text: str) -> tuple[list[str], list[str]]:
    """Split pasted text into simple commands at unquoted newlines, `;`, `&&`, `||`, `|`, `&`, and drop
    redirections (`> file`, `2>&1`). Returns (command texts, notes). Quotes are respected; nothing is
    expanded or executed.
    """
    text = re.sub(r"[ \t][\^`]\r?\n", " ", text)  # cmd.exe ^ and PowerShell ` continuations
    commands: list[str] = []
    notes: list[str] = []
    cur: list[str] = []
    i, n = 0, len(text)
    quote: str | None = None

    def end_command() -> None:
        chunk = "".join(cur).strip()
        if chunk:
            commands.append(chunk)
        cur.clear()

    while i < n:
        ch = text[i]
        if quote:
            if ch == "\\" and quote == '"' and i + 1 < n:
                if text[i + 1] == "\n":  # backslash-newline inside double quotes is removed
                    i += 2
                    continue
                cur.append(text[i:i + 2])
                i += 2
                continue
            cur.append(ch)
            if ch == quote:
                quote = None
            i += 1
            continue
        if ch in "'\"":
            quote = ch
            cur.append(ch)
            i += 1
            continue
        if ch == "\\" and i + 1 < n:
            if text[i + 1] == "\n" or text[i + 1:i + 3] == "\r\n":  # POSIX line continuation
                cur.append(" ")
                i += 2 if text[i + 1] == "\n" else 3
                continue
            cur.append(text[i:i + 2])
            i += 2
            continue
        if ch == "#" and (not cur or cur[-1][-1:].isspace()):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if ch in "\n;|&":
            if ch == "&" and i + 1 < n and text[i + 1] == ">":  # &> file
                i = _skip_redirect(text, i + 2, notes)
                continue
            end_command()
            if text[i:i + 2] in ("&&", "||"):
                i += 1
            i += 1
            continue
        if ch in "<>":
            # a file-descriptor digit glued to the operator belongs to it (2>&1)
            if cur and cur[-1].isdigit() and (len(cur) == 1 or cur[-2][-1:].isspace()):
                cur.pop()
            j = i + 1
            if j < n and text[j] in ">&":
                j += 1
            i = _skip_redirect(text, j, notes)
            continue
        cur.append(ch)
        i += 1
    end_command()
    return commands, notes


def _skip_redirect(text: str, i: int, notes: list[str]) -> int:
    """Skip the target word of a redirection starting at `i`; returns the index after it."""
    n = len(text)
    while i < n and text[i] in " \t":
        i += 1
    start = i
    quote = None
    while i < n:
        ch = text[i]
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in " \t\n;|&<>":
            break
        i += 1
    notes.append(f"ignored the shell redirection to {text[start:i] or '(nothing)'}")
    return i


_WRAPPED_SERVER = re.compile(r"(^|[\\/])(llama-server|server)(\.exe)?$|(^|[\\/])llama(\.exe)?$")
_WINDOWS_PROGRAM = re.compile(r"^\s*(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(?:\.\\|[A-Za-z]:\\|\S*\.exe(?:\s|$))")


def _keep_windows_backslashes(cmd: str) -> str:
    """A command for Windows uses backslash as the path separator, not as an escape: double every
    backslash outside single quotes (and not before a double quote) so shlex keeps it."""
    out: list[str] = []
    in_single = False
    for i, ch in enumerate(cmd):
        if ch == "'":
            in_single = not in_single
        if ch == "\\" and not in_single and cmd[i + 1:i + 2] != '"':
            out.append("\\\\")
        else:
            out.append(ch)
    return "".join(out)


_TILDE = re.compile(r"~([A-Za-z0-9._-]*)(?=[/\s]|$)")
_HOME_VAR = re.compile(r"\$(?:HOME\b|\{HOME\})")
_ASSIGN_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _expand_home(cmd: str, home: str) -> tuple[str, bool]:
    """Expand what a POSIX shell expands to a home folder, and nothing else: an unquoted `~` or `~user`
    starting a word (or an assignment's value: `VAR=~/x`), and `$HOME` / `${HOME}` outside single quotes.
    A quoted `'~/x'` or `"~/x"` stays literal, as in bash. The expansion is quoted so shlex keeps it one
    word. Returns (text, whether anything was expanded).
    """
    out: list[str] = []
    i, n = 0, len(cmd)
    quote: str | None = None
    word_start, expanded = True, False
    while i < n:
        ch = cmd[i]
        if quote is None and word_start:
            word_start = False
            assign = _ASSIGN_PREFIX.match(cmd, i)
            j = assign.end() if assign else i
            tilde = _TILDE.match(cmd, j)
            if tilde is not None:
                value = home if not tilde.group(1) else os.path.expanduser(tilde.group(0))
                if value != tilde.group(0):  # ~nosuchuser stays as written, as in bash
                    out.append(cmd[i:j] + shlex.quote(value))
                    i, expanded = tilde.end(), True
                    continue
        if quote != "'":
            var = _HOME_VAR.match(cmd, i)
            if var is not None:
                out.append(shlex.quote(home) if quote is None else home.replace("\\", "\\\\").replace('"', '\\"'))
                i, expanded = var.end(), True
                continue
        if ch == "\\" and quote != "'" and i + 1 < n:
            out.append(cmd[i:i + 2])
            i += 2
            continue
        if quote is None and ch in "'\"":
            quote = ch
        elif ch == quote:
            quote = None
        elif quote is None and ch.isspace():
            word_start = True
        out.append(ch)
        i += 1
    return "".join(out), expanded


def _is_server_program(word: str) -> bool:
    base = re.split(r"[\\/]", word)[-1].lower()
    return "llama" in base or "server" in base or base.endswith(".exe")


# -- reading argv -------------------------------------------------------------------------------

def _value_arity(spec: FlagSpec) -> int:
    if spec.value is None:
        return 0
    return 2 if re.fullmatch(r"[A-Z_]+ [A-Z_]+", spec.value) else 1


def _removed_from_catalog(spec: FlagSpec | None) -> str | None:
    if spec is None:
        return None
    m = re.match(r"the argument has been removed\.?\s*(.*)", spec.help)
    return m.group(1).strip() if m else None


def _looks_like_value(tok: str) -> bool:
    return not tok.startswith("-") or bool(_NEG_NUMBER.match(tok)) or tok == "-"


def _norm(name: str) -> str:
    return name.replace("_", "-") if name.startswith("--") else name


def _lookup_field(name: str, catalog: FlagCatalog | None) -> tuple[FieldFlag, bool] | None:
    hit = _BY_SPELLING.get(_norm(name))
    if hit is None and catalog is not None:
        spec = catalog.lookup(name)
        if spec is not None:
            for n in spec.names:
                if n in _BY_SPELLING:
                    ff, _pos = _BY_SPELLING[n]
                    # a catalog alias of a toggle: positive unless it reads like a negative spelling
                    neg = bool(re.match(r"^--?no-|^-n[a-z]", name)) and ff.kind == "toggle"
                    return ff, not neg
    return hit


class _Parsed:
    def __init__(self) -> None:
        self.values: dict[str, object] = {}
        self.extra: list[str] = []
        self.unknown: list[str] = []
        self.removed: list[RemovedFlag] = []
        self.notes: list[str] = []


def parse_field_value(ff: FieldFlag, raw: str, current: object) -> object:
    """Convert one flag value; raises ValueError when it is not valid for the field."""
    k = ff.kind
    if k == "int":
        if not _INT_RE.match(raw):
            raise ValueError(f"{ff.flag} needs a whole number, got {raw!r}")
        return int(raw)
    if k == "float":
        if not _FLOAT_RE.match(raw):
            raise ValueError(f"{ff.flag} needs a number, got {raw!r}")
        return float(raw)
    if k == "layers":
        if raw in ("auto", "all"):
            return raw
        if not _INT_RE.match(raw):
            raise ValueError(f"{ff.flag} needs a number, 'auto' or 'all', got {raw!r}")
        return int(raw)
    if k == "onoff":
        if raw in _TRUE:
            return True
        if raw in _FALSE:
            return False
        raise ValueError(f"{ff.flag} needs on or off, got {raw!r}")
    if k == "list":
        return tuple(raw.split(","))
    if k == "append":
        return tuple(current or ()) + tuple(raw.split(","))
    if k in ("floats", "ints"):
        parts = re.split(r"[,/]", raw)
        rx = _INT_RE if k == "ints" else _FLOAT_RE
        if not all(rx.match(p) for p in parts):
            raise ValueError(f"{ff.flag} needs numbers separated by commas, got {raw!r}")
        return tuple(int(p) if k == "ints" else float(p) for p in parts)
    if k == "overrides":
        rules = []
        for part in raw.split(","):
            if "=" not in part:
                raise ValueError(f"{ff.flag} needs PATTERN=BUFFER rules, got {part!r}")
            pat, buf = part.split("=", 1)
            rules.append(OverrideRule(pattern=pat, buffer=buf))
        return tuple(current or ()) + tuple(rules)
    if k == "secret":
        return SecretStr(raw)
    return raw


def _parse_argv(argv: Sequence[str], catalog: FlagCatalog | None, out: _Parsed) -> None:
    i, n = 0, len(argv)
    seen: set[str] = set()
    while i < n:
        tok = argv[i]
        name = _norm(tok)
        spec = catalog.lookup(tok) if catalog is not None else None
        # 1. removed flags: hard-coded ones (absent from --help) and those --help calls removed
        removed_help = _removed_from_catalog(spec)
        hard = REMOVED_FLAGS.get(name)
        if hard is not None and (spec is None or removed_help is not None):
            arity = hard.arity
            toks = list(argv[i:i + 1 + arity])
            fix = hard.fix + tuple(toks[1:]) if hard.fix and arity else hard.fix
            out.removed.append(RemovedFlag(tokens=tuple(toks), flag=tok, replacement=removed_help or hard.replacement,
                                           fix=fix))
            out.extra += toks
            out.notes.append(f"{tok} was removed from llama-server: use {hard.replacement}")
            i += len(toks)
            continue
        if removed_help is not None:
            toks = list(argv[i:i + 1 + _value_arity(spec)])
            out.removed.append(RemovedFlag(tokens=tuple(toks), flag=tok, replacement=removed_help))
            out.extra += toks
            out.notes.append(f"{tok} was removed from llama-server: {removed_help}")
            i += len(toks)
            continue
        # 2. modelled flags
        hit = _lookup_field(tok, catalog) if tok.startswith("-") else None
        if hit is not None:
            ff, positive = hit
            if ff.kind == "fa" and (i + 1 >= n or argv[i + 1] not in _FA_VALUES):
                # old builds: -fa was a switch. This build needs a value: keep it as written, flag it.
                out.removed.append(RemovedFlag(tokens=(tok,), flag=tok, replacement="--flash-attn on",
                                               fix=("--flash-attn", "on")))
                out.extra.append(tok)
                out.notes.append(f"{tok} without a value is the old switch form: use --flash-attn on")
                i += 1
                continue
            if ff.kind in ("switch", "toggle"):
                out.values[ff.field] = positive if ff.kind == "toggle" else True
                if ff.field in seen:
                    out.notes.append(f"{ff.flag} given more than once: the last one counts, as in llama-server")
                seen.add(ff.field)
                i += 1
                continue
            if i + 1 >= n:
                out.extra.append(tok)
                out.unknown.append(tok)
                out.notes.append(f"{tok} has no value: kept as written")
                i += 1
                continue
            raw = argv[i + 1]
            try:
                value = parse_field_value(ff, raw, out.values.get(ff.field))
            except ValueError as exc:
                out.extra += [tok, raw]
                out.unknown += [tok, raw]
                out.notes.append(f"{exc}: kept as written")
                i += 2
                continue
            if ff.field in seen and ff.kind not in ("append", "overrides"):
                out.notes.append(f"{ff.flag} given more than once: the last value counts, as in llama-server")
            seen.add(ff.field)
            out.values[ff.field] = value
            if isinstance(value, str) and ("$" in value or value.startswith("~")):
                out.notes.append(f"{raw!r} is kept as written: llama-server does not expand ~ or $VARIABLES "
                                 "(only an unquoted ~ and $HOME are expanded when a command is pasted); "
                                 "write the full path")
            i += 2
            continue
        # 3. flags the binary knows but the profile does not model: kept verbatim
        if spec is not None:
            toks = list(argv[i:i + 1 + _value_arity(spec)])
            out.extra += toks
            if "=" in tok and tok.startswith("--"):
                pass
            i += len(toks)
            continue
        # 4. unknown: a fork's flag (with the value that follows), or a stray word
        toks = [tok]
        if tok.startswith("-") and not _NEG_NUMBER.match(tok) and i + 1 < n and _looks_like_value(argv[i + 1]):
            toks.append(argv[i + 1])
        if tok.startswith("--") and "=" in tok:
            out.notes.append(f"{tok}: llama-server does not accept --flag=value; write the value as its own word")
        out.extra += toks
        out.unknown += toks
        i += len(toks)


class SplitCommand(BaseModel):
    """A pasted command taken apart (no flag is interpreted yet)."""

    model_config = ConfigDict(frozen=True)

    binary: str | None = None
    argv: tuple[str, ...] = ()
    env: dict[str, str] = {}
    notes: tuple[str, ...] = ()


def split_command_text(text: str, home: str | None = None) -> SplitCommand:
    """Take pasted shell text apart: `export`/`VAR=value` assignments, the program, its arguments.

    Tokenises with shlex (POSIX rules) and never runs anything. Given `home`, an unquoted `~` and
    `$HOME` are expanded to it as a shell would (not in a Windows command); nothing else is expanded.
    Pipes, `&&` chains and redirections are dropped with a note; a `docker run ... llama.cpp:server ...`
    keeps the server's arguments.
    """
    notes: list[str] = []
    env_out: dict[str, str] = {}
    binary: str | None = None
    commands, split_notes = _split_commands(text)
    notes += split_notes
    argv: list[str] = []
    found = expanded = False
    for cmd in commands:
        if _WINDOWS_PROGRAM.match(cmd):
            cmd = _keep_windows_backslashes(cmd)
        elif home is not None:
            cmd, did = _expand_home(cmd, home)
            expanded = expanded or did
        try:
            words = shlex.split(cmd, posix=True)
        except ValueError as exc:  # unbalanced quotes: fall back to whitespace words
            notes.append(f"could not read the quoting ({exc}); split on spaces instead")
            words = cmd.split()
        if found and words and words[0].startswith("-") and not _NEG_NUMBER.match(words[0]):
            argv += words  # arguments continued on the next line without a backslash
            notes.append("joined arguments written on several lines without a trailing backslash")
            continue
        if found:
            notes.append(f"ignored what follows the server command: {cmd[:80]}")
            continue
        w = 0
        if words and words[0] in ("export", "set", "env"):
            w = 1
        while w < len(words) and _ASSIGN_RE.match(words[w]):
            k, v = _ASSIGN_RE.match(words[w]).groups()
            env_out[k] = v
            w += 1
        rest = words[w:]
        if not rest:
            continue
        if words[0] == "export":
            notes.append(f"ignored export of a name without a value: {' '.join(rest)}")
            continue
        if rest[0] in ("docker", "podman"):
            img = next((j for j, x in enumerate(rest) if "llama.cpp:" in x or "llama-server" in x), None)
            if img is None:
                notes.append(f"ignored a {rest[0]} command without a llama.cpp image")
                continue
            for j, x in enumerate(rest[:img]):
                if x in ("-e", "--env") and j + 1 < img and _ASSIGN_RE.match(rest[j + 1]):
                    k, v = _ASSIGN_RE.match(rest[j + 1]).groups()
                    env_out[k] = v
            notes.append(f"read the llama-server arguments of a {rest[0]} command; the container options "
                         "were left out")
            binary, argv, found = rest[img], rest[img + 1:], True
            continue
        if rest[0].startswith("-"):
            argv, found = rest, True
            continue
        if not _is_server_program(rest[0]):
            # a wrapper in front of the server: gdb --args, xargs, nohup, numactl ..., sudo, time
            j = next((j for j, x in enumerate(rest) if _WRAPPED_SERVER.search(x)), None)
            if j is not None:
                notes.append(f"ignored the wrapper in front of the server: {' '.join(rest[:j])}")
                rest = rest[j:]
        if _is_server_program(rest[0]):
            binary = rest[0]
            argv = rest[1:]
            if argv and argv[0] in ("serve", "server") and re.split(r"[\\/]", binary)[-1] in ("llama", "llama.exe"):
                argv = argv[1:]
            found = True
            continue
        notes.append(f"ignored a command that is not llama-server: {cmd[:80]}")
    if not found:
        notes.append("no llama-server command found")
    if expanded:
        notes.append(f"expanded ~ and $HOME to {home}, as a shell would")
    return SplitCommand(binary=binary, argv=tuple(argv), env=env_out, notes=tuple(notes))


def import_command(source: str | Sequence[str], catalog: FlagCatalog | None = None, *,
                   env: Mapping[str, str] | None = None, home: str | None = None) -> ImportResult:
    """Read a pasted command line (text) or an argument list into a LaunchProfile.

    Text may carry `export VAR=...` lines, leading `VAR=value` assignments, a program path
    (`./build/bin/llama-server`), backslash-newline continuations, quotes, pipes and redirections
    (ignored, with a note). It is tokenised with shlex and never run; an unquoted `~` and `$HOME` are
    expanded to `home` (default: this user's home folder) as the shell would have, since llama-server
    itself expands nothing. An argument list is taken as the shell already expanded it, and has no
    program unless its first word names one.

    Every alias maps to one field; a flag the catalog knows but the profile does not model is kept
    in `extra_args` verbatim; a removed flag is kept as written and reported with its replacement;
    unknown tokens (a fork's `-tbq 4`) are kept in order and reported. Without a catalog only the
    modelled flags count as known. `LLAMA_ARG_*` variables stay environment variables. Never raises
    on odd input.
    """
    out = _Parsed()
    env_out: dict[str, str] = dict(env or {})
    binary: str | None = None
    if isinstance(source, str):
        home = home or os.path.expanduser("~")
        split = split_command_text(source, home if home != "~" else None)  # "~": no home folder is known
        binary, argv = split.binary, list(split.argv)
        env_out.update(split.env)
        out.notes += split.notes
    else:
        argv = [str(a) for a in source]
        if argv and not argv[0].startswith("-") and _is_server_program(argv[0]):
            binary, argv = argv[0], argv[1:]
    try:
        _parse_argv(argv, catalog, out)
    except Exception as exc:  # noqa: BLE001 - the importer must never crash on odd input
        out.notes.append(f"could not read the arguments ({exc}); kept them as written")
        out.extra, out.unknown = list(argv), list(argv)
        out.values.clear()

    for name, value in env_out.items():
        if name.startswith("LLAMA_ARG_") or name == "LLAMA_API_KEY":
            spec = catalog.by_env(name) if catalog is not None else None
            ff = _BY_ENV.get(name)
            flag = spec.canonical if spec is not None else (ff.flag if ff else None)
            removed = _removed_from_catalog(spec)
            if removed is not None:
                out.removed.append(RemovedFlag(tokens=(f"{name}={value}",), flag=name, replacement=removed))
                out.notes.append(f"{name} sets a removed flag: {removed}")
            elif flag is None:
                out.notes.append(f"{name} is not a variable this llama-server reads")
            else:
                out.notes.append(f"{name}={'…' if _is_secret_env(name) else value} sets {flag} (kept as a variable)")
    kept_binary = None
    if binary is not None:
        if binary.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", binary):
            kept_binary = binary
        elif not re.fullmatch(r"llama-server(\.exe)?", binary):
            out.notes.append(f"the program {binary} is a relative path: choose that binary in Settings "
                             "(the profile keeps no relative path)")
    values = dict(out.values)
    profile = LaunchProfile(binary=kept_binary, env=env_out, extra_args=tuple(out.extra), **values)
    return ImportResult(profile=profile, unknown=out.unknown, removed=out.removed, notes=out.notes,
                        binary=binary)


def validate(target: LaunchProfile | Sequence[str], catalog: FlagCatalog) -> ValidationResult:
    """Which flags of a profile (or argv) the binary whose catalog is given would refuse.

    Unknown flags are reported as their tokens (flag and the value that follows); removed flags with
    what replaces them. Environment variables of removed flags are reported too.
    """
    if isinstance(target, LaunchProfile):
        argv, env = profile_to_argv(target)
    else:
        argv, env = list(target), {}
    unknown: list[str] = []
    removed: list[RemovedFlag] = []
    i, n = 0, len(argv)
    while i < n:
        tok = argv[i]
        spec = catalog.lookup(tok)
        removed_help = _removed_from_catalog(spec)
        hard = REMOVED_FLAGS.get(_norm(tok))
        if spec is None and hard is not None:
            toks = tuple(argv[i:i + 1 + hard.arity])
            removed.append(RemovedFlag(tokens=toks, flag=tok, replacement=hard.replacement,
                                       fix=hard.fix + toks[1:] if hard.arity else hard.fix))
            i += len(toks)
            continue
        if spec is not None:
            arity = _value_arity(spec)
            if tok in ("-fa", "--flash-attn") and (i + 1 >= n or argv[i + 1] not in _FA_VALUES):
                removed.append(RemovedFlag(tokens=(tok,), flag=tok, replacement="--flash-attn on",
                                           fix=("--flash-attn", "on")))
                i += 1
                continue
            toks = tuple(argv[i:i + 1 + arity])
            if removed_help is not None:
                removed.append(RemovedFlag(tokens=toks, flag=tok, replacement=removed_help))
            i += len(toks)
            continue
        toks = [tok]
        hit = _BY_SPELLING.get(_norm(tok))
        takes_value = (hit is not None and hit[0].kind not in ("switch", "toggle")) or (
            hit is None and tok.startswith("-") and not _NEG_NUMBER.match(tok))
        if takes_value and i + 1 < n and (hit is not None or _looks_like_value(argv[i + 1])):
            toks.append(argv[i + 1])
        unknown += toks
        i += len(toks)
    for name in env:
        spec = catalog.by_env(name)
        rem = _removed_from_catalog(spec)
        if rem is not None:
            removed.append(RemovedFlag(tokens=(f"{name}={env[name]}",), flag=name, replacement=rem))
    return ValidationResult(unknown=unknown, removed=removed)


def apply_fix(profile: LaunchProfile, removed: RemovedFlag, catalog: FlagCatalog | None = None) -> LaunchProfile:
    """Replace a removed flag's tokens in `extra_args` by its fix (the editor's "Fix" button).

    The fix is parsed like any imported argument, so `--mlock` sets `load_mode`. Returns the profile
    unchanged when the flag has no mechanical fix or its tokens are not in `extra_args`.
    """
    extra = list(profile.extra_args)
    k = len(removed.tokens)
    for i in range(len(extra) - k + 1):
        if tuple(extra[i:i + k]) == removed.tokens:
            if not removed.fix:
                return profile
            del extra[i:i + k]
            fixed = import_command(list(removed.fix), catalog)
            update = {f: getattr(fixed.profile, f) for f in fixed.profile.model_fields_set
                      if f not in ("extra_args", "env", "binary")}
            return profile.model_copy(update={**update, "extra_args": tuple(extra + list(fixed.profile.extra_args))})
    return profile


def effective_profile(profile: LaunchProfile) -> LaunchProfile:
    """The profile as llama-server will see it: LLAMA_ARG_* variables fill fields the argv leaves unset.

    (llama-server applies environment variables first and lets CLI flags override them.) Used by advice
    and the memory plan; values that do not parse are ignored.
    """
    update: dict[str, object] = {}
    for name, raw in profile.env.items():
        ff = _BY_ENV.get(name)
        if ff is None:
            continue
        current = getattr(profile, ff.field)
        if current not in (None, (), False):
            continue
        try:
            if ff.kind in ("switch", "toggle"):
                if raw in _TRUE or raw in _FALSE:
                    update[ff.field] = raw in _TRUE
                continue
            update[ff.field] = parse_field_value(ff, raw, None)
        except ValueError:
            continue
    for name in profile.env:
        if name.startswith("LLAMA_ARG_NO_"):
            ff = _BY_ENV.get("LLAMA_ARG_" + name[len("LLAMA_ARG_NO_"):])
            if ff is not None and ff.kind == "toggle" and getattr(profile, ff.field) is None:
                update[ff.field] = False
    return profile.model_copy(update=update) if update else profile


def describe_env(env: Mapping[str, str], catalog: FlagCatalog | None = None) -> list[tuple[str, str, str | None]]:
    """(name, value, flag it sets or None) for each variable, so LLAMA_ARG_* show the flag they set."""
    out = []
    for name, value in env.items():
        flag = None
        spec = catalog.by_env(name) if catalog is not None else None
        if spec is not None:
            flag = spec.canonical
        elif name in _BY_ENV:
            flag = _BY_ENV[name].flag
        out.append((name, value, flag))
    return out


def iter_field_flags(section: str | None = None) -> Iterable[FieldFlag]:
    return (f for f in FIELD_FLAGS if section is None or f.section == section)
