"""A model's tensor table as the plan needs it (cached per model object), and row sizes."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from llm_tuner.core.memory.constants import (
    _FLAG_ALIASES,
    _INTERVAL_HYBRIDS,
    _RECURRENT_ARCHS,
    _REPACK_RULES,
    _SWA_ALWAYS,
    SWA_PATTERNS,
)

# ------------------------------------------------------------------------------------------------
# model view (cached per model object)
# ------------------------------------------------------------------------------------------------


@dataclass
class _Tensor:
    name: str
    shape: tuple[int, ...]
    type_name: str
    n_bytes: int
    offset: int
    file_index: int
    layer: int | None  # block number (None for non-block tensors)
    kind: str  # input | output | layer
    matmul: bool  # used by MUL_MAT / MUL_MAT_ID (repackable, row-splittable)
    nextn: bool  # belongs to an MTP layer


@dataclass
class _ModelView:
    arch: str
    n_layer_all: int
    n_layer: int
    n_nextn: int
    n_embd: int
    n_vocab: int
    n_ctx_train: int
    n_head: list[int]
    n_head_kv: list[int]
    k_len: list[int]
    v_len: list[int]
    is_swa: list[bool]
    n_swa: int
    n_ff: int
    n_expert: int
    n_expert_used: int
    n_ff_exp: int
    is_mla: bool
    tensors: list[_Tensor]
    tied_output: bool
    recurrent: list[bool]
    n_embd_r: int = 0
    n_embd_s: int = 0


def _per_layer(value: Any, n: int, default: int) -> list[int]:
    if value is None:
        return [default] * n
    if isinstance(value, list | tuple):
        out = [int(x) for x in value][:n]
        return out + [out[-1] if out else default] * (n - len(out))
    return [int(value)] * n


_BLK_RE = re.compile(r"^blk\.(\d+)\.")
_INPUT_NAMES = ("token_embd.", "pos_embd.", "token_types.", "per_layer_token_embd.", "tok_embeddings.")


def _is_matmul(name: str, shape: tuple[int, ...]) -> bool:
    base = name.rsplit(".", 1)[0] if name.endswith((".weight",)) else None
    if base is None or "norm" in base:
        return False
    if base.endswith(("token_embd", "pos_embd", "token_types", "per_layer_token_embd", "rope_freqs",
                      "ssm_a", "ssm_d", "ssm_conv1d", "ssm_dt", "exp_probs_b")):
        return False
    if len(shape) == 3:
        return "exps" in base
    return len(shape) == 2


_VIEWS: dict[int, tuple[Any, _ModelView]] = {}


def _view(model: Any) -> _ModelView:
    """The derived model view, cached per model object (the model is kept so its id stays unique)."""
    hit = _VIEWS.get(id(model))
    if hit is not None and hit[0] is model:
        return hit[1]
    view = _build_view(model)
    if len(_VIEWS) >= 8:
        _VIEWS.pop(next(iter(_VIEWS)))
    _VIEWS[id(model)] = (model, view)
    return view


def _build_view(model: Any) -> _ModelView:
    arch = model.architecture or "?"
    n_layer_all = int(model.block_count or 0)
    n_nextn = int(getattr(model, "nextn_layers", 0) or 0)
    n_layer = n_layer_all - n_nextn if n_layer_all > n_nextn else n_layer_all
    n_embd = int(model.embedding_length or 0)
    n_head = _per_layer(model.head_count, n_layer_all, 1)
    n_head_kv = _per_layer(model.head_count_kv if model.head_count_kv is not None else model.head_count,
                           n_layer_all, n_head[0] if n_head else 1)
    hmax = max(n_head) if n_head else 1
    k_len = int(model.key_length or (n_embd // max(1, hmax)))
    v_len = int(model.value_length or (n_embd // max(1, hmax)))
    k_swa = int(getattr(model, "key_length_swa", None) or k_len)
    v_swa = int(getattr(model, "value_length_swa", None) or v_len)
    n_swa = int(model.sliding_window or 0)
    pattern = model.sliding_window_pattern
    is_swa = [False] * n_layer_all
    if n_swa > 0 and (arch in SWA_PATTERNS or isinstance(pattern, list) or arch in _SWA_ALWAYS):
        if isinstance(pattern, list):
            is_swa = [bool(x) for x in pattern][:n_layer_all] + [False] * max(0, n_layer_all - len(pattern))
        else:
            n_pat, dense_first = SWA_PATTERNS.get(arch, (1, False))
            if isinstance(pattern, int) and not isinstance(pattern, bool):
                n_pat = pattern
            for il in range(n_layer):
                if dense_first:
                    is_swa[il] = n_pat == 0 or il % n_pat != 0
                else:
                    is_swa[il] = n_pat == 0 or il % n_pat < n_pat - 1
    k_lens = [k_swa if is_swa[i] else k_len for i in range(n_layer_all)]
    v_lens = [v_swa if is_swa[i] else v_len for i in range(n_layer_all)]
    # MLA (DeepSeek-style, key_length_mla and value_length_mla set): converted files already give
    # head_count_kv 1 and key_length = kv_lora_rank + rope dims; the cache holds K only (no V tensor)
    is_mla = bool(getattr(model, "key_length_mla", None)) and bool(getattr(model, "value_length_mla", None))
    tensors: list[_Tensor] = []
    names = set()
    n_ff = 0
    n_ff_exp = 0
    n_vocab = int(model.vocab_size or 0)
    for t in model.tensors:
        names.add(t.name)
        m = _BLK_RE.match(t.name)
        layer = int(m.group(1)) if m else None
        if layer is not None:
            kind = "layer" if layer < n_layer_all else "output"
        elif t.name.startswith(_INPUT_NAMES):
            kind = "input"
        else:
            kind = "output"
        shape = tuple(int(x) for x in t.shape)
        if t.name.endswith("ffn_up.weight") and len(shape) == 2:
            n_ff = max(n_ff, shape[1])
        if "ffn_up_exps" in t.name and len(shape) == 3:
            n_ff_exp = max(n_ff_exp, shape[1])
        if t.name == "token_embd.weight" and len(shape) == 2 and not n_vocab:
            n_vocab = shape[1]
        tensors.append(_Tensor(t.name, shape, t.type_name, int(t.n_bytes), int(t.offset),
                               int(getattr(t, "file_index", 0) or 0), layer, kind, _is_matmul(t.name, shape),
                               layer is not None and n_nextn > 0 and layer >= n_layer))
    if not n_ff:
        ff = getattr(model, "feed_forward_length", None)
        n_ff = max(ff) if isinstance(ff, list) and ff else int(ff or 4 * n_embd)
    hkv_raw = model.head_count_kv
    recurrent = [False] * n_layer_all
    if isinstance(hkv_raw, list):
        # hybrids (jamba, granite-hybrid, ...): a head_count_kv of 0 marks a recurrent layer
        recurrent = [int(x) == 0 for x in _per_layer(hkv_raw, n_layer_all, 1)]
    kv = getattr(model, "kv", None) or {}
    n_embd_r = n_embd_s = 0
    if arch in _INTERVAL_HYBRIDS:
        # qwen3next / qwen35: gated delta net layers, full attention every Nth (src/models/qwen35.cpp)
        flags = kv.get(f"{arch}.attention.recurrent_layers")
        if isinstance(flags, list) and flags:
            recurrent = [bool(x) for x in flags][:n_layer_all] + [False] * max(0, n_layer_all - len(flags))
        else:
            interval = int(getattr(model, "full_attention_interval", None) or
                           kv.get(f"{arch}.full_attention_interval") or 4)
            recurrent = [i < n_layer and (i + 1) % interval != 0 for i in range(n_layer_all)]
    if getattr(model, "ssm_inner_size", None):
        d_inner = int(model.ssm_inner_size)
        d_state = int(model.ssm_state_size or 0)
        d_conv = int(model.ssm_conv_kernel or 0)
        n_group = int(model.ssm_group_count or 0)
        n_embd_r = max(0, d_conv - 1) * (d_inner + 2 * n_group * d_state)
        n_embd_s = d_state * d_inner
        if arch in _RECURRENT_ARCHS:
            recurrent = [True] * n_layer_all
    return _ModelView(
        arch=arch, n_layer_all=n_layer_all, n_layer=n_layer, n_nextn=n_nextn, n_embd=n_embd, n_vocab=n_vocab,
        n_ctx_train=int(model.context_length or 4096), n_head=n_head, n_head_kv=n_head_kv, k_len=k_lens,
        v_len=v_lens, is_swa=is_swa, n_swa=n_swa, n_ff=n_ff, n_expert=int(model.expert_count or 0),
        n_expert_used=int(model.expert_used_count or 0), n_ff_exp=n_ff_exp or int(
            getattr(model, "expert_feed_forward_length", None) or 0),
        is_mla=is_mla, tensors=tensors, tied_output="output.weight" not in names, recurrent=recurrent,
        n_embd_r=n_embd_r, n_embd_s=n_embd_s)


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------


def row_size(type_name: str, n: int) -> int:
    """ggml_row_size: bytes of n elements of a ggml type (`type_size * n / blck_size`)."""
    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[type_name.upper()]]
    return size * n // block


def _pad(x: int, n: int) -> int:
    return (x + n - 1) // n * n


def normalize_cpu_flags(flags: Iterable[str]) -> frozenset[str]:
    out = set()
    for f in flags:
        f = f.lower()
        out.add(_FLAG_ALIASES.get(f, f))
        if f == "sve":
            out.add("sve")
    return frozenset(out)


def repackable(type_name: str, shape: tuple[int, ...], cpu_flags: frozenset[str]) -> bool:
    """True when the CPU backend would repack this weight (ggml-cpu/repack.cpp rules)."""
    rules = _REPACK_RULES.get(type_name.upper())
    if not rules or len(shape) < 2:
        return False
    ne1 = shape[1]
    for need, multiple in rules:
        if all(f in cpu_flags for f in need):
            return ne1 % multiple == 0
    return False
