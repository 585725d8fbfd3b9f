"""LaunchProfile: every llama-server setting users tune, as one immutable, JSON-serialisable value.

A profile is what the editor shows, what the store versions, what a run records and what
`core.cmdline.profile_to_argv` turns into the exact command line. `None` (or an empty tuple, or
False for plain switches) means "flag absent": llama-server's own default applies, so a profile
never invents settings the user did not choose.

Flags the profile does not model (other upstream flags, a fork's own flags such as `-tbq 4`) live in
`extra_args`, verbatim and in order; environment variables (including `LLAMA_ARG_*`) live in `env`.
The API key is a secret: masked in repr, and masked in JSON only when the caller asks
(`model_dump_json(context={"mask_secrets": True})`) so the store keeps it intact.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, SecretStr, SerializationInfo, field_serializer

from llm_tuner.core.build import BuildStamp

GpuLayers = int | Literal["auto", "all"]

# Values the tested build accepts (common/arg.cpp); forks may accept more, so fields are plain str.
CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
FLASH_ATTN_VALUES = ("on", "off", "auto")
SPLIT_MODES = ("none", "layer", "row", "tensor")
LOAD_MODES = ("auto", "none", "mmap", "mlock", "mmap+mlock", "dio")
SPEC_TYPES = ("none", "draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark",
              "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache")
REASONING_FORMATS = ("none", "auto", "deepseek", "deepseek-legacy")
ON_OFF_AUTO = ("on", "off", "auto")


class OverrideRule(BaseModel):
    """One `--override-tensor` rule: tensors whose name matches `pattern` (std::regex_search) go to
    `buffer`."""

    model_config = ConfigDict(frozen=True)

    pattern: str
    buffer: str

    def __str__(self) -> str:
        return f"{self.pattern}={self.buffer}"


class LaunchProfile(BaseModel):
    """All launch settings of one llama-server configuration (see module docstring for conventions)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    # -- which binary ---------------------------------------------------------------------------
    binary: str | None = None  # absolute path of the llama-server (or fork) this profile is meant for

    # -- model ----------------------------------------------------------------------------------
    model: str | None = None
    hf_repo: str | None = None
    mmproj: str | None = None
    alias: str | None = None

    # -- server ---------------------------------------------------------------------------------
    host: str | None = None
    port: int | None = None
    api_key: SecretStr | None = None
    api_key_file: str | None = None
    parallel: int | None = None
    kv_unified: bool | None = None
    metrics: bool = False
    slots: bool | None = None
    props: bool = False

    # -- context and KV -------------------------------------------------------------------------
    ctx_size: int | None = None
    cache_type_k: str | None = None
    cache_type_v: str | None = None
    flash_attn: str | None = None  # on | off | auto
    swa_full: bool = False
    kv_offload: bool | None = None  # False = --no-kv-offload
    cache_ram_mib: int | None = None
    context_shift: bool | None = None

    # -- offload and split ----------------------------------------------------------------------
    gpu_layers: GpuLayers | None = None
    split_mode: str | None = None
    rpc: tuple[str, ...] = ()  # RPC workers host:port (their devices are RPC0, RPC1, ...)
    devices: tuple[str, ...] = ()
    tensor_split: tuple[float, ...] = ()
    main_gpu: int | None = None
    override_tensor: tuple[OverrideRule, ...] = ()
    cpu_moe: bool = False
    n_cpu_moe: int | None = None
    fit: bool | None = None
    fit_target_mib: tuple[int, ...] = ()
    fit_ctx: int | None = None

    # -- speculative decoding -------------------------------------------------------------------
    spec_type: tuple[str, ...] = ()
    draft_n_max: int | None = None
    draft_n_min: int | None = None
    draft_model: str | None = None
    draft_device: tuple[str, ...] = ()
    draft_gpu_layers: GpuLayers | None = None
    draft_cache_type_k: str | None = None
    draft_cache_type_v: str | None = None
    draft_override_tensor: tuple[OverrideRule, ...] = ()
    draft_p_min: float | None = None
    ngram_mod_n_min: int | None = None
    ngram_mod_n_max: int | None = None
    ngram_mod_n_match: int | None = None
    ngram_simple_size_n: int | None = None
    ngram_simple_size_m: int | None = None
    ngram_simple_min_hits: int | None = None
    ngram_map_k_size_n: int | None = None
    ngram_map_k_size_m: int | None = None
    ngram_map_k_min_hits: int | None = None
    ngram_map_k4v_size_n: int | None = None
    ngram_map_k4v_size_m: int | None = None
    ngram_map_k4v_min_hits: int | None = None

    # -- batching and threads -------------------------------------------------------------------
    batch_size: int | None = None
    ubatch_size: int | None = None
    threads: int | None = None
    threads_batch: int | None = None
    load_mode: str | None = None
    cont_batching: bool | None = None

    # -- chat -----------------------------------------------------------------------------------
    jinja: bool | None = None
    chat_template: str | None = None
    chat_template_file: str | None = None
    chat_template_kwargs: str | None = None  # the JSON object text, kept as written
    reasoning_format: str | None = None
    reasoning: str | None = None  # on | off | auto
    reasoning_effort: str | None = None
    reasoning_budget: int | None = None
    reasoning_preserve: bool | None = None

    # -- sampling (server defaults for requests) ------------------------------------------------
    temp: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repeat_penalty: float | None = None
    seed: int | None = None

    # -- environment and the rest ---------------------------------------------------------------
    env: dict[str, str] = Field(default_factory=dict)
    extra_args: tuple[str, ...] = ()
    # field -> the flag spelling the user wrote when it is not the long one (an older build's or a fork's,
    # e.g. `--cache-type-k-draft`): written back as is wherever the chosen binary's --help lists it
    spellings: dict[str, str] = Field(default_factory=dict)

    @field_serializer("api_key", when_used="unless-none")
    def _dump_api_key(self, value: SecretStr | None, info: SerializationInfo) -> str | None:
        if value is None:
            return None
        ctx = info.context or {}
        return "**********" if ctx.get("mask_secrets") else value.get_secret_value()

    def api_key_value(self) -> str | None:
        """The API key in clear (for the launcher and the HTTP client), or None."""
        return self.api_key.get_secret_value() if self.api_key is not None else None

    def to_dict(self, *, mask_secrets: bool = False) -> dict[str, Any]:
        """A JSON-compatible dict with only the settings that differ from "flag absent"."""
        data = self.model_dump(mode="json", context={"mask_secrets": mask_secrets}, exclude_defaults=True)
        if data.get("api_key") is None:
            data.pop("api_key", None)
        return data

    def to_json(self, *, mask_secrets: bool = False) -> str:
        """Compact JSON text of the profile (see `to_dict`); the API key in clear unless `mask_secrets`."""
        return json.dumps(self.to_dict(mask_secrets=mask_secrets), ensure_ascii=False, separators=(",", ":"))


def nul_fields(profile: LaunchProfile) -> list[str]:
    """The fields of a profile holding a NUL byte (`env.NAME` for a variable, `extra_args[i]` for an
    argument).

    No program can take a NUL in an argument or a variable (the launch would fail with a traceback) and a
    terminal shows it as nothing, so the file loader and the editor refuse such a profile, naming the field.
    Stored versions still load: this is a check for input, not a rule of the model.
    """
    found: list[str] = []

    def walk(where: str, value: object) -> None:
        if isinstance(value, str):
            if "\0" in value:
                found.append(where)
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(f"{where}.{k}", k)
                walk(f"{where}.{k}", v)
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(f"{where}[{i}]", v)

    for name in type(profile).model_fields:
        value = getattr(profile, name)
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        elif isinstance(value, BaseModel):
            value = str(value)
        elif isinstance(value, tuple) and value and isinstance(value[0], BaseModel):
            value = [str(v) for v in value]
        walk(name, value)
    return list(dict.fromkeys(found))


# A name a POSIX shell takes in `NAME=value` (and every program's environment): letters, digits, "_", not a
# digit first
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def bad_env_names(profile: LaunchProfile) -> list[str]:
    """The profile's environment variable names that are not names (`A=1 $(touch X) B`, `-x`, ``).

    Such a name cannot be set as written (`os.environ` refuses "=" and NUL), and shown in a copied shell line
    it would run as a command: the file loader refuses the profile, naming the variable.
    """
    return [n for n in profile.env if not ENV_NAME.fullmatch(n)]


@runtime_checkable
class ModelFacts(Protocol):
    """Duck type for what advice needs from a model (core.gguf_info.ModelInfo satisfies it).

    Attributes: `nextn_layers` (MTP layers, 0 when none), `context_length` (n_ctx_train or None).
    """

    @property
    def nextn_layers(self) -> int | None: ...  # read-only: a frozen ModelInfo's `int` fits

    @property
    def context_length(self) -> int | None: ...


class SavedProfile(BaseModel):
    """One stored version of a named profile (what the store returns; runs point at `version_id`)."""

    model_config = ConfigDict(frozen=True)

    id: int  # the named profile
    name: str
    version: int  # 1, 2, ... within the name
    version_id: int  # unique across all profiles
    created_at: datetime
    profile: LaunchProfile
    note: str = ""
    # the llama-server build (and GPU driver) it was saved with; None: not recorded
    build: BuildStamp | None = None


def unique_name(base: str, taken: set[str] | list[str] | tuple[str, ...]) -> str:
    """`base`, or `base 2`, `base 3`... whichever is not in `taken`."""
    names = set(taken)
    if base not in names:
        return base
    i = 2
    while f"{base} {i}" in names:
        i += 1
    return f"{base} {i}"
