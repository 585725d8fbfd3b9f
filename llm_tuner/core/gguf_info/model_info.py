"""ModelInfo: what the app shows and plans with, built from the headers of a model's files."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from gguf import Keys, LlamaFileType
from pydantic import BaseModel, ConfigDict, Field

from llm_tuner.core.gguf_info.reader import GGUFHeader, TensorInfo

#: Bump when ModelInfo's content changes, so cached infos written by an older reader are re-read.
READER_VERSION = 1
#: llama_ftype values newer than the installed `gguf` package (include/llama.h).
_EXTRA_FTYPES: dict[int, str] = {41: "Q2_0"}
_SPLIT_RE = re.compile(r"^(?P<prefix>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")


# --------------------------------------------------------------------------------------------
# Model info
# --------------------------------------------------------------------------------------------


class ModelInfo(BaseModel):
    """What the model picker and the memory plan need about one model (a file or a split set).

    Values follow llama.cpp's reading of the keys (src/llama-model.cpp load_hparams):
    `head_count_kv` defaults to `head_count`; `key_length`/`value_length` default to
    `embedding_length / head_count`; per-layer arrays stay lists (a uniform array becomes its
    number). Counts absent from the file are 0 (`nextn_layers`, `expert_*`); other absent values
    are None. A file that cannot be read has `error` set and the identification fields only.
    """

    model_config = ConfigDict(frozen=True)

    path: str
    files: list[str] = Field(default_factory=list)
    size_bytes: int = 0
    error: str | None = None
    is_projector: bool = False

    architecture: str | None = None
    name: str | None = None
    basename: str | None = None
    size_label: str | None = None
    file_type: str | None = None
    file_type_id: int | None = None
    file_type_guessed: bool = False
    n_params: int | None = None
    tensor_bytes: int | None = None
    block_count: int | None = None
    nextn_layers: int = 0
    context_length: int | None = None
    embedding_length: int | None = None
    feed_forward_length: int | list[int] | None = None
    head_count: int | list[int] | None = None
    head_count_kv: int | list[int] | None = None
    key_length: int | None = None
    value_length: int | None = None
    key_length_swa: int | None = None
    value_length_swa: int | None = None
    key_length_mla: int | None = None
    value_length_mla: int | None = None
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    expert_count: int = 0
    expert_used_count: int = 0
    expert_shared_count: int = 0
    expert_feed_forward_length: int | None = None
    leading_dense_block_count: int = 0
    sliding_window: int | None = None
    sliding_window_pattern: list[bool] | int | None = None
    shared_kv_layers: int | None = None
    rope_freq_base: float | None = None
    rope_dimension_count: int | None = None
    rope_scaling_type: str | None = None
    rope_scaling_factor: float | None = None
    ssm_conv_kernel: int | None = None
    ssm_inner_size: int | None = None
    ssm_state_size: int | None = None
    ssm_group_count: int | None = None
    ssm_time_step_rank: int | None = None
    full_attention_interval: int | None = None
    vocab_size: int | None = None
    tokenizer_model: str | None = None
    tokenizer_pre: str | None = None
    chat_template: bool = False
    split_count: int = 1
    n_tensors: int = 0
    tensors: tuple[TensorInfo, ...] = ()
    kv: dict[str, Any] = Field(default_factory=dict)
    skipped_arrays: dict[str, tuple[int, int]] = Field(default_factory=dict)

    @property
    def n_layer(self) -> int | None:
        """Trunk layers (block_count minus MTP layers), as llama.cpp's hparams.n_layer."""
        return None if self.block_count is None else self.block_count - self.nextn_layers

    def per_layer(self, field: str) -> list[Any] | None:
        """A per-layer view of a scalar-or-list field (e.g. 'head_count_kv'), block_count long.

        A scalar is repeated; a list is returned as stored (llama.cpp requires block_count entries).
        """
        value = getattr(self, field)
        if value is None or self.block_count is None:
            return None
        return list(value) if isinstance(value, list) else [value] * self.block_count

    def display_name(self) -> str:
        if self.name:
            return self.name
        base = self.path.replace("\\", "/").rsplit("/", 1)[-1]
        return base[:-5] if base.endswith(".gguf") else base


def split_parts(file_name: str) -> tuple[str, int, int] | None:
    """(prefix, 1-based index, count) for `<prefix>-00001-of-00003.gguf`, else None."""
    m = _SPLIT_RE.match(file_name)
    if not m:
        return None
    return m.group("prefix"), int(m.group("no")), int(m.group("count"))


def file_type_short_name(ftype: int | None) -> str | None:
    """'Q4_K_M' for LlamaFileType.MOSTLY_Q4_K_M (15), 'F32' for ALL_F32; None if unknown."""
    if ftype is None:
        return None
    try:
        name = LlamaFileType(ftype & ~LlamaFileType.GUESSED).name
    except ValueError:
        return _EXTRA_FTYPES.get(ftype & ~LlamaFileType.GUESSED, f"ftype {ftype}")
    return name.removeprefix("MOSTLY_").removeprefix("ALL_")


def _uniform(value: Any) -> Any:
    """A per-layer list whose entries are all equal becomes that number."""
    if isinstance(value, list) and value and all(v == value[0] for v in value):
        return value[0]
    return value


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None if value is None else int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, list):
        ints = [v for v in value if isinstance(v, int)]
        return max(ints) if ints else None
    return None


def model_info_from_headers(path: str, files: Sequence[str], headers: Sequence[GGUFHeader],
                            file_sizes: Sequence[int]) -> ModelInfo:
    """Combine the headers of one model's files (one, or every part of a split set) into ModelInfo.

    The first header holds the metadata; tensors come from every part, in part order.
    """
    first = headers[0]
    kv = first.kv
    arch = kv.get("general.architecture") if isinstance(kv.get("general.architecture"), str) else None

    def get(template: str, default: Any = None) -> Any:
        if arch is None:
            return default
        return kv.get(template.format(arch=arch), default)

    tensors: list[TensorInfo] = []
    for idx, header in enumerate(headers):
        for t in header.tensors:
            tensors.append(t if idx == 0 else t.model_copy(update={"file_index": idx}))
    n_params = sum(t.n_elements for t in tensors)

    ftype_id = kv.get("general.file_type")
    guessed = False
    if not isinstance(ftype_id, int) or isinstance(ftype_id, bool):
        ftype_id = None
        counts = Counter(t.ggml_type for t in tensors)
        if counts:
            guessed = True
            top = counts.most_common(1)[0][0]
            short = next(t.type_name for t in tensors if t.ggml_type == top)
            file_type = {"Q3_K": "Q3_K_M", "Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M"}.get(short, short)
        else:
            file_type = None
    else:
        file_type = file_type_short_name(ftype_id)

    embd = _as_int(get(Keys.LLM.EMBEDDING_LENGTH))
    head_count = _uniform(get(Keys.Attention.HEAD_COUNT))
    head_count_kv = _uniform(get(Keys.Attention.HEAD_COUNT_KV))
    if head_count_kv is None:
        head_count_kv = head_count
    n_head_max = _as_int(head_count)
    default_head_dim = embd // n_head_max if embd and n_head_max else None
    key_length = _as_int(get(Keys.Attention.KEY_LENGTH)) or default_head_dim
    value_length = _as_int(get(Keys.Attention.VALUE_LENGTH)) or default_head_dim
    swa_pattern = get(Keys.Attention.SLIDING_WINDOW_PATTERN)
    if isinstance(swa_pattern, list):
        swa_pattern = [bool(x) for x in swa_pattern]
    elif not isinstance(swa_pattern, int):
        swa_pattern = None

    vocab_size = _as_int(get(Keys.LLM.VOCAB_SIZE))
    tokens = "tokenizer.ggml.tokens"
    if vocab_size is None:
        if tokens in first.skipped_arrays:
            vocab_size = first.skipped_arrays[tokens][1]
        elif isinstance(kv.get(tokens), list):
            vocab_size = len(kv[tokens])

    rope_scaling = get(Keys.Rope.SCALING_TYPE)
    split_count = kv.get("split.count") if isinstance(kv.get("split.count"), int) else 1
    file_base = path.replace("\\", "/").rsplit("/", 1)[-1].lower()

    def num(template: str) -> int | None:
        return _as_int(get(template))

    def flt(template: str) -> float | None:
        v = get(template)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    def text(key: str) -> str | None:
        v = kv.get(key)
        return v if isinstance(v, str) else None

    small_kv = {k: v for k, v in kv.items() if k != "tokenizer.chat_template" and not (
        isinstance(v, list) and len(v) > 512)}
    return ModelInfo(
        path=path, files=list(files), size_bytes=sum(file_sizes),
        is_projector=arch == "clip" or file_base.startswith("mmproj"),
        architecture=arch, name=text("general.name"), basename=text("general.basename"),
        size_label=text("general.size_label"), file_type=file_type, file_type_id=ftype_id,
        file_type_guessed=guessed, n_params=n_params, tensor_bytes=sum(t.n_bytes for t in tensors),
        block_count=num(Keys.LLM.BLOCK_COUNT), nextn_layers=num(Keys.LLM.NEXTN_PREDICT_LAYERS) or 0,
        context_length=num(Keys.LLM.CONTEXT_LENGTH), embedding_length=embd,
        feed_forward_length=_uniform(get(Keys.LLM.FEED_FORWARD_LENGTH)),
        head_count=head_count, head_count_kv=head_count_kv,
        key_length=key_length, value_length=value_length,
        key_length_swa=num(Keys.Attention.KEY_LENGTH_SWA), value_length_swa=num(Keys.Attention.VALUE_LENGTH_SWA),
        key_length_mla=num(Keys.Attention.KEY_LENGTH_MLA), value_length_mla=num(Keys.Attention.VALUE_LENGTH_MLA),
        kv_lora_rank=num(Keys.Attention.KV_LORA_RANK), q_lora_rank=num(Keys.Attention.Q_LORA_RANK),
        expert_count=num(Keys.LLM.EXPERT_COUNT) or 0, expert_used_count=num(Keys.LLM.EXPERT_USED_COUNT) or 0,
        expert_shared_count=num(Keys.LLM.EXPERT_SHARED_COUNT) or 0,
        expert_feed_forward_length=num(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH),
        leading_dense_block_count=num(Keys.LLM.LEADING_DENSE_BLOCK_COUNT) or 0,
        sliding_window=num(Keys.Attention.SLIDING_WINDOW), sliding_window_pattern=swa_pattern,
        shared_kv_layers=num(Keys.Attention.SHARED_KV_LAYERS),
        rope_freq_base=flt(Keys.Rope.FREQ_BASE), rope_dimension_count=num(Keys.Rope.DIMENSION_COUNT),
        rope_scaling_type=rope_scaling if isinstance(rope_scaling, str) else None,
        rope_scaling_factor=flt(Keys.Rope.SCALING_FACTOR),
        ssm_conv_kernel=num(Keys.SSM.CONV_KERNEL), ssm_inner_size=num(Keys.SSM.INNER_SIZE),
        ssm_state_size=num(Keys.SSM.STATE_SIZE), ssm_group_count=num(Keys.SSM.GROUP_COUNT),
        ssm_time_step_rank=num(Keys.SSM.TIME_STEP_RANK),
        full_attention_interval=num(Keys.LLM.FULL_ATTENTION_INTERVAL),
        vocab_size=vocab_size, tokenizer_model=text("tokenizer.ggml.model"),
        tokenizer_pre=text("tokenizer.ggml.pre"), chat_template=isinstance(kv.get("tokenizer.chat_template"), str),
        split_count=split_count, n_tensors=len(tensors), tensors=tuple(tensors), kv=small_kv,
        skipped_arrays=dict(first.skipped_arrays),
    )


def error_info(path: str, files: Sequence[str], size_bytes: int, reason: str) -> ModelInfo:
    """The ModelInfo of a file that could not be read: identification plus a one-line reason."""
    return ModelInfo(path=path, files=list(files), size_bytes=size_bytes, error=reason.splitlines()[0][:300])
