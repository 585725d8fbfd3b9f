"""The built-in knobs' proposers and their rows of core.tune.knob_table.KNOBS (one row per knob).

Values are proposed only where they can differ: -ub never above the largest -b (llama.cpp clamps it to the
batch, so it would run the same), -ts and -sm/-mg only with several devices, placement (-ngl, FFN of every Nth
block to the CPU, --n-cpu-moe) only when the base does not fit, K/V types as matched pairs (mixed types fall
back to a slow kernel: field notes, case A), threads only when the CPU computes, speculative types the binary
lists (draft-mtp only with MTP layers, draft-model types only with -md), -np only for the objectives with
clients, batch sizes only where prompt processing counts (what an objective uses: core/tune/objectives.py).
Where weights sit in host memory beside a GPU, prompt batches copy them to the GPU once per ubatch: larger -ub
values are raced then.
"""

from __future__ import annotations

import re
from typing import Any

from llm_tuner.core import flags
from llm_tuner.core.memory.overrides import rule_ffn_every_nth
from llm_tuner.core.tune.knob_table import (
    G_MEMORY,
    G_OWN,
    G_PLACEMENT,
    G_SPEC,
    G_THREADS,
    OUTPUT,
    PERPLEXITY,
    KnobRow,
    ProposeContext,
    register,
)
from llm_tuner.core.tune.model import Knob
from llm_tuner.core.tune.objectives import CLIENTS, CONTEXT

KV_PAIR = "cache_type_k+cache_type_v"
KV_TYPES = ("f16", "q8_0", "q4_0")
DRAFT_MODEL_TYPES = ("draft-simple", "draft-eagle3", "draft-dflash", "draft-dspark")
NGRAM_TYPES = ("ngram-map-k4v", "ngram-simple", "ngram-mod")
PLACEMENT_KNOB = "placement"  # a knob whose values are core.tune.frontier's "<kv>:<style>" placements
# Placements raced (the plan's fastest first). In 9 tunes on the H200
# (benchmarks/sessions/2026-12-02-h200-placement) the 4th never won beyond one start's noise; each start of a
# model bigger than the GPU is a full load.
MAX_PLACEMENTS = 3
# Styles only raced where prompt processing counts: experts of the *last* blocks on the CPU read the same
# bytes per generated token as the first (the plan cannot tell them apart), and ik_llama.cpp measured them
# faster for prefill.
PREFILL_STYLES = ("experts_last",)


def known(catalog: Any, key: str) -> bool:
    if catalog is None:
        return True
    return any(catalog.lookup(n) is not None for n in flags.names(key))


def allowed_values(catalog: Any, key: str) -> list[str]:
    """Values a flag's --help lists ("allowed values: a, b" or a comma list as its placeholder)."""
    if catalog is None:
        return []
    spec = next((s for n in flags.names(key) if (s := catalog.lookup(n)) is not None), None)
    if spec is None:
        return []
    m = re.search(r"allowed values:\s*([^\n(]+)", spec.help or "")
    text = m.group(1) if m else (spec.value if spec.value and "," in spec.value else "")
    return [v.strip() for v in re.split(r"[,|\[\]]", text) if v.strip()]


def _n_layer(c: ProposeContext) -> int:
    return getattr(c.model, "block_count", None) or 0


def _placement(c: ProposeContext) -> Knob | None:
    if not (c.fitting and c.gpus):
        return None
    usable = [p for p in c.fitting if c.prompts or p.value.split(":")[-1] not in PREFILL_STYLES]
    top = usable[:MAX_PLACEMENTS]
    return Knob(key=PLACEMENT_KNOB, flag=PLACEMENT_KNOB, values=(None, *(p.value for p in top)), ranked=True,
                reason="the model does not fit the GPUs: placement and K/V type together, "
                       + (f"the {len(top)} of {len(usable)}" if len(top) < len(usable) else "those")
                       + " that fit reading the fewest bytes from host memory per token (perplexity "
                         "checked for K/V types)")


def _offload(c: ProposeContext) -> bool:
    return not c.fitting and c.needs_offload and bool(c.gpus) and bool(_n_layer(c))


def _ngl(c: ProposeContext) -> Knob | None:
    if not _offload(c):
        return None
    n_layer = _n_layer(c)
    steps = sorted({max(0, n_layer - d) for d in (0, 2, 4, 8, 16)} | {n_layer + 1}, reverse=True)
    return Knob(key="ngl", flag="gpu_layers", values=tuple(str(s) for s in steps),
                reason="the base does not fit: fewer layers on the GPUs")


def _moe_offload(c: ProposeContext) -> bool:
    return bool(getattr(c.model, "expert_count", 0)) and known(c.catalog, "n_cpu_moe")


def _ncmoe(c: ProposeContext) -> Knob | None:
    if not _offload(c) or not _moe_offload(c):
        return None
    values = tuple(str(n) for n in (0, 4, 8, 16, 32) if n <= _n_layer(c))
    return Knob(key="ncmoe", flag="n_cpu_moe", values=values,
                reason="MoE: expert weights of the first N blocks on the CPU")


def _ot(c: ProposeContext) -> Knob | None:
    if not _offload(c) or _moe_offload(c):
        return None
    rules = tuple(rule_ffn_every_nth(n, 0, _n_layer(c)) for n in (4, 3, 2))
    return Knob(key="ot", flag="override_tensor", values=(None, *rules),
                reason="the base does not fit: FFN of every Nth block on the CPU keeps attention "
                       "on the GPU (field notes, case B)")


def _ts(c: ProposeContext) -> Knob | None:
    if len(c.gpus) != 2:
        return None
    return Knob(key="ts", flag="tensor_split", values=tuple(f"{a},{100 - a}" for a in (40, 45, 50, 55, 60)),
                reason="two devices: the split in steps of 5 points")


def _sm(c: ProposeContext) -> Knob | None:
    return Knob(key="sm", flag="split_mode", values=("layer", "row"),
                reason="several devices: layer or row split") if len(c.gpus) >= 2 else None


def _mg(c: ProposeContext) -> Knob | None:
    return Knob(key="mg", flag="main_gpu", values=tuple(str(i) for i in range(len(c.gpus))),
                reason="several devices: which one holds the main work") if len(c.gpus) >= 2 else None


def _kv(c: ProposeContext) -> Knob | None:
    if c.fitting or not (known(c.catalog, "cache_type_k") and known(c.catalog, "cache_type_v")):
        return None
    allowed = allowed_values(c.catalog, "cache_type_k") or list(KV_TYPES)
    return Knob(key="kv", flag=KV_PAIR, values=tuple(t for t in KV_TYPES if t in allowed),
                reason="matched K/V types (mixed ones fall back to a slow kernel); quantized needs "
                       "flash attention; perplexity is checked")


def _fa(c: ProposeContext) -> Knob | None:
    """Flash attention on and off, on GPUs and on the CPU alike: on a CPU either can be the faster, by machine
    and depth (benchmarks/results/cpu_flash_attn/; llama.cpp issue 27086: on Arm Neoverse off doubles prefill,
    on an Intel laptop on wins). A quantized V cache needs it on: that candidate fails at its start and says
    so."""
    if not known(c.catalog, "flash_attn"):
        return None
    where = "" if c.gpus else ": on the CPU either can be the faster, by machine and depth"
    return Knob(key="fa", flag="flash_attn", values=("on", "off"), reason=f"flash attention{where}")


def _batch_values(c: ProposeContext) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(-b values, -ub values): larger ubatches where host weights are copied to a GPU per ubatch."""
    if c.gpus and c.weights_on_host:
        return (2048, 4096), (512, 1024, 2048, 4096)
    if c.gpus:
        return (512, 2048, 4096), (256, 512, 1024, 2048)
    return (256, 2048), (64, 128, 256, 512)


def _batches_count(c: ProposeContext) -> bool:
    return not c.fitting or c.prompts


def _b(c: ProposeContext) -> Knob | None:
    if not _batches_count(c):
        return None
    b_values, _ = _batch_values(c)
    return Knob(key="b", flag="batch_size", values=tuple(str(b) for b in b_values), reason="logical batch")


def _ub(c: ProposeContext) -> Knob | None:
    if not _batches_count(c):
        return None
    b_values, ub_values = _batch_values(c)
    why = "physical batch (never above the batch: llama.cpp clamps it)"
    if c.gpus and c.weights_on_host:
        why += "; weights in host memory are copied to the GPU once per ubatch of a prompt"
    return Knob(key="ub", flag="ubatch_size", values=tuple(str(u) for u in ub_values if u <= max(b_values)),
                reason=why)


def _ctx(c: ProposeContext) -> Knob | None:
    n_ctx_train = getattr(c.model, "context_length", None)
    if c.objective is None or not c.objective.uses(CONTEXT) or not n_ctx_train:
        return None
    return Knob(key="c", flag="ctx_size", values=tuple(str(n_ctx_train // d) for d in (8, 4, 2, 1)),
                reason="the largest context that fits while generation stays fast enough")


def _np(c: ProposeContext) -> Knob | None:
    if c.objective is None or not c.objective.uses(CLIENTS) or not known(c.catalog, "parallel"):
        return None
    n = max(1, c.objective.clients)
    return Knob(key="np", flag="parallel", values=tuple(str(x) for x in sorted({1, max(1, n // 2), n})),
                reason="parallel slots for the clients")


def _spec_types(c: ProposeContext) -> list[str | None]:
    spec_types = allowed_values(c.catalog, "spec_type") if known(c.catalog, "spec_type") else []
    if not spec_types:
        return []
    types: list[str | None] = [None]
    if getattr(c.model, "nextn_layers", 0) and "draft-mtp" in spec_types:
        types.append("draft-mtp")
    if flags.value_of(list(c.argv), "draft_model") is not None:
        types += [t for t in DRAFT_MODEL_TYPES[:1] if t in spec_types]
    types += [t for t in NGRAM_TYPES[:1] if t in spec_types]
    return types if len(types) > 1 else []


def _spec(c: ProposeContext) -> Knob | None:
    types = _spec_types(c)
    if not types:
        return None
    return Knob(key="spec", flag="spec_type", values=tuple(types),
                reason="speculative decoding (output at --temp 0 must match the baseline's)")


def _draft(c: ProposeContext) -> Knob | None:
    if not _spec_types(c) or not known(c.catalog, "draft_n_max"):
        return None
    return Knob(key="draft", flag="draft_n_max", values=("2", "3", "4"), reason="draft depth")


def _thread_values(c: ProposeContext) -> tuple[str, ...]:
    if not (c.cpu_computes and c.cpu_threads):
        return ()
    near = {c.cpu_threads - 1} if c.cpu_threads > 2 and not c.fitting else set()  # placement: starts are dear
    return tuple(str(t) for t in sorted({max(1, c.cpu_threads // 2), c.cpu_threads} | near))


def _t(c: ProposeContext) -> Knob | None:
    ts = _thread_values(c)
    return Knob(key="t", flag="threads", values=ts,
                reason=f"the CPU computes: around its {c.cpu_threads} physical cores") if ts else None


def _tb(c: ProposeContext) -> Knob | None:
    ts = _thread_values(c)
    if not ts or not known(c.catalog, "threads_batch") or not c.prompts:
        return None
    return Knob(key="tb", flag="threads_batch", values=ts, reason="threads for prompt batches")


# The built-in rows, in the order they are proposed (shown); `order` is the race order (core.tune.search).
register(
    KnobRow(PLACEMENT_KNOB, PLACEMENT_KNOB, G_PLACEMENT, 0, _placement, PERPLEXITY, memory=True),
    KnobRow("ngl", "gpu_layers", G_PLACEMENT, 1, _ngl, memory=True),
    KnobRow("ncmoe", "n_cpu_moe", G_PLACEMENT, 3, _ncmoe, memory=True),
    KnobRow("ot", "override_tensor", G_PLACEMENT, 2, _ot, memory=True),
    KnobRow("ts", "tensor_split", G_PLACEMENT, 5, _ts, memory=True),
    KnobRow("sm", "split_mode", G_PLACEMENT, 4, _sm, memory=True),
    KnobRow("mg", "main_gpu", G_PLACEMENT, 6, _mg, memory=True),
    KnobRow("kv", KV_PAIR, G_MEMORY, 7, _kv, PERPLEXITY, memory=True),
    KnobRow("ctk", "cache_type_k", G_MEMORY, 8, None, PERPLEXITY, memory=True),
    KnobRow("ctv", "cache_type_v", G_MEMORY, 9, None, PERPLEXITY, memory=True),
    KnobRow("fa", "flash_attn", G_MEMORY, 10, _fa, memory=True),
    KnobRow("b", "batch_size", G_MEMORY, 13, _b, memory=True),
    KnobRow("ub", "ubatch_size", G_MEMORY, 12, _ub, memory=True),
    KnobRow("c", "ctx_size", G_MEMORY, 11, _ctx, memory=True),
    KnobRow("np", "parallel", G_MEMORY, 14, _np, memory=True),
    KnobRow("spec", "spec_type", G_SPEC, 15, _spec, OUTPUT),
    KnobRow("draft", "draft_n_max", G_SPEC, 16, _draft, OUTPUT),
    KnobRow("draft_min", "draft_n_min", G_SPEC, 17, None, OUTPUT),
    KnobRow("md", "draft_model", G_SPEC, 18, None, OUTPUT, memory=True),
    KnobRow("t", "threads", G_THREADS, 19, _t),
    KnobRow("tb", "threads_batch", G_THREADS, 20, _tb),
)

__all__ = ["G_OWN", "KV_PAIR", "KV_TYPES", "MAX_PLACEMENTS", "PLACEMENT_KNOB", "allowed_values", "known"]
