"""Which knobs a tune proposes (from the model, the binary's --help and the devices) and the CLI's knob syntax.

Values are proposed only where they can differ: -ub never above the largest -b (llama.cpp clamps it to the batch,
so it would run the same), -ts and -sm/-mg only with several devices, placement (-ngl, FFN of every Nth block
to the CPU, --n-cpu-moe) only when the base does not fit, K/V types as matched pairs (mixed types fall back to a
slow kernel: field notes, case A), threads only when the CPU computes, speculative types the binary lists
(draft-mtp only with MTP layers, draft-model types only with -md), -np only for the objectives with clients, batch sizes only where prompt processing counts (what an objective
uses: core/tune/objectives.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from llm_tuner.core import flags
from llm_tuner.core.memory.overrides import rule_ffn_every_nth
from llm_tuner.core.tune.frontier import Placement
from llm_tuner.core.tune.model import Knob
from llm_tuner.core.tune.objectives import CLIENTS, CONTEXT, PROMPT, Objective

KV_PAIR = "cache_type_k+cache_type_v"
KV_TYPES = ("f16", "q8_0", "q4_0")
DRAFT_MODEL_TYPES = ("draft-simple", "draft-eagle3", "draft-dflash", "draft-dspark")
NGRAM_TYPES = ("ngram-map-k4v", "ngram-simple", "ngram-mod")
ABSENT = ("default", "none()", "-")  # CLI words for "flag absent"
PLACEMENT_KNOB = "placement"  # a knob whose values are core.tune.frontier's "<kv>:<style>" placements
# Placements raced (the plan's fastest first). In 9 tunes on the H200 (benchmarks/sessions/2026-12-02-h200-placement) the
# 4th never won beyond one start's noise; each start of a model bigger than the GPU is a full load.
MAX_PLACEMENTS = 3


def _known(catalog, key: str) -> bool:
    if catalog is None:
        return True
    return any(catalog.lookup(n) is not None for n in flags.names(key))


def allowed_values(catalog, key: str) -> list[str]:
    """Values a flag's --help lists ("allowed values: a, b" or a comma list as its placeholder)."""
    if catalog is None:
        return []
    spec = next((s for n in flags.names(key) if (s := catalog.lookup(n)) is not None), None)
    if spec is None:
        return []
    m = re.search(r"allowed values:\s*([^\n(]+)", spec.help or "")
    text = m.group(1) if m else (spec.value if spec.value and "," in spec.value else "")
    return [v.strip() for v in re.split(r"[,|\[\]]", text) if v.strip()]


def _int(v: str | None, default: int) -> int:
    try:
        return int(v) if v is not None else default
    except ValueError:
        return default


def propose_knobs(model_info, catalog, devices: Sequence, base_argv: Sequence[str], *,
                  objective: Objective | None = None, needs_offload: bool = False,
                  cpu_threads: int | None = None, placement: Sequence[Placement] = ()) -> list[Knob]:
    """Knobs worth racing for this model, binary and devices (GPU devices: objects with `.name`).

    `placement`: the placement frontier (core.tune.frontier), given when the base computes weights on the CPU
    beside GPUs: one knob races the placements that fit jointly with their K/V types (PLACEMENT_KNOB, the
    fastest predicted first, at most MAX_PLACEMENTS), instead of separate K/V, -ngl and -ot knobs; threads
    follow (the CPU computes). `needs_offload`: the base does not fit at all (the plan says so) - the older
    per-flag placement knobs. `cpu_threads`: the CPU's physical cores (None: unknown, no thread knobs)."""
    argv = list(base_argv)
    gpus = list(devices)
    out: list[Knob] = []
    ngl = flags.value_of(argv, "gpu_layers")
    fitting = [p for p in placement if p.fits]
    cpu_computes = not gpus or (ngl is not None and _int(ngl, 999) == 0) or needs_offload or bool(placement)
    n_layer = getattr(model_info, "block_count", None) or 0
    if fitting and gpus:
        top = fitting[:MAX_PLACEMENTS]
        out.append(Knob(key=PLACEMENT_KNOB, flag=PLACEMENT_KNOB, values=(None, *(p.value for p in top)), ranked=True,
                        reason="the model does not fit the GPUs: placement and K/V type together, "
                               + (f"the {len(top)} of {len(fitting)}" if len(top) < len(fitting) else "those")
                               + " that fit reading the fewest bytes from host memory per token (perplexity "
                                 "checked for K/V types)"))
    # placement first: only when the base does not fit
    elif needs_offload and gpus and n_layer:
        steps = sorted({max(0, n_layer - d) for d in (0, 2, 4, 8, 16)} | {n_layer + 1}, reverse=True)
        out.append(Knob(key="ngl", flag="gpu_layers", values=tuple(str(s) for s in steps),
                        reason="the base does not fit: fewer layers on the GPUs"))
        if getattr(model_info, "expert_count", 0) and _known(catalog, "n_cpu_moe"):
            out.append(Knob(key="ncmoe", flag="n_cpu_moe", values=tuple(str(n) for n in (0, 4, 8, 16, 32) if
                                                                        n <= n_layer),
                            reason="MoE: expert weights of the first N blocks on the CPU"))
        else:
            rules = tuple(rule_ffn_every_nth(n, 0, n_layer) for n in (4, 3, 2))
            out.append(Knob(key="ot", flag="override_tensor", values=(None, *rules),
                            reason="the base does not fit: FFN of every Nth block on the CPU keeps attention "
                                   "on the GPU (field notes, case B)"))
    if len(gpus) >= 2:
        if len(gpus) == 2:
            splits = tuple(f"{a},{100 - a}" for a in (40, 45, 50, 55, 60))
            out.append(Knob(key="ts", flag="tensor_split", values=splits,
                            reason="two devices: the split in steps of 5 points"))
        out.append(Knob(key="sm", flag="split_mode", values=("layer", "row"),
                        reason="several devices: layer or row split"))
        out.append(Knob(key="mg", flag="main_gpu", values=tuple(str(i) for i in range(len(gpus))),
                        reason="several devices: which one holds the main work"))
    if not fitting and _known(catalog, "cache_type_k") and _known(catalog, "cache_type_v"):
        allowed = allowed_values(catalog, "cache_type_k") or list(KV_TYPES)
        out.append(Knob(key="kv", flag=KV_PAIR, values=tuple(t for t in KV_TYPES if t in allowed),
                        reason="matched K/V types (mixed ones fall back to a slow kernel); quantized needs "
                               "flash attention; perplexity is checked"))
    if gpus and _known(catalog, "flash_attn"):
        out.append(Knob(key="fa", flag="flash_attn", values=("on", "off"), reason="flash attention"))
    b_values = (512, 2048, 4096) if gpus else (256, 2048)
    ub_values = (256, 512, 1024, 2048) if gpus else (64, 128, 256, 512)
    prompts = objective is None or objective.uses(PROMPT)
    if not fitting or prompts:  # batches shape prompts
        out.append(Knob(key="b", flag="batch_size", values=tuple(str(b) for b in b_values),
                        reason="logical batch"))
        out.append(Knob(key="ub", flag="ubatch_size", values=tuple(str(u) for u in ub_values if u <= max(b_values)),
                        reason="physical batch (never above the batch: llama.cpp clamps it)"))
    n_ctx_train = getattr(model_info, "context_length", None)
    if objective is not None and objective.uses(CONTEXT) and n_ctx_train:
        out.append(Knob(key="c", flag="ctx_size", values=tuple(str(n_ctx_train // d) for d in (8, 4, 2, 1)),
                        reason="the largest context that fits while generation stays fast enough"))
    if objective is not None and objective.uses(CLIENTS) and _known(catalog, "parallel"):
        c = max(1, objective.clients)
        out.append(Knob(key="np", flag="parallel", values=tuple(str(n) for n in sorted({1, max(1, c // 2), c})),
                        reason="parallel slots for the clients"))
    spec_types = allowed_values(catalog, "spec_type") if _known(catalog, "spec_type") else []
    if spec_types:
        has_draft = flags.value_of(argv, "draft_model") is not None
        types: list[str | None] = [None]
        if getattr(model_info, "nextn_layers", 0) and "draft-mtp" in spec_types:
            types.append("draft-mtp")
        if has_draft:
            types += [t for t in DRAFT_MODEL_TYPES[:1] if t in spec_types]
        types += [t for t in NGRAM_TYPES[:1] if t in spec_types]
        if len(types) > 1:
            out.append(Knob(key="spec", flag="spec_type", values=tuple(types),
                            reason="speculative decoding (output at --temp 0 must match the baseline's)"))
            if _known(catalog, "draft_n_max"):
                out.append(Knob(key="draft", flag="draft_n_max", values=("2", "3", "4"),
                                reason="draft depth"))
    if cpu_computes and cpu_threads:
        near = {cpu_threads - 1} if cpu_threads > 2 and not fitting else set()  # placement: starts are dear
        ts = sorted({max(1, cpu_threads // 2), cpu_threads} | near)
        out.append(Knob(key="t", flag="threads", values=tuple(str(t) for t in ts),
                        reason=f"the CPU computes: around its {cpu_threads} physical cores"))
        if _known(catalog, "threads_batch") and prompts:
            out.append(Knob(key="tb", flag="threads_batch", values=tuple(str(t) for t in ts),
                            reason="threads for prompt batches"))
    return out


def parse_knob(text: str) -> Knob:
    """The CLI's `--knob`: `ub=64,128,256` (a flag's short or long name, or a flags key), `kv=f16,q8_0` (matched
    K/V pair), `custom:--alias=a,b` (any flag, as typed). `default` as a value means the flag absent; ';'
    separates values that contain ','."""
    name, sep, vals = text.partition("=")
    if name.startswith("custom:"):
        flag = name[len("custom:"):]
        if not flag.startswith("-"):
            raise ValueError(f"--knob {text!r}: a custom knob names a flag with its dashes (custom:--alias=a,b)")
        key_name, flag_name = f"custom:{flag}", flag
    else:
        key_name = name.strip().lstrip("-")
        if key_name in ("kv", KV_PAIR):
            flag_name = KV_PAIR
        else:
            hit = flags.lookup(name if name.startswith("-") else ("-" if len(key_name) <= 4 else "--") + key_name)
            if hit is None:
                hit = flags.lookup(("--" if len(key_name) <= 4 else "-") + key_name)
            if hit is None:
                try:
                    flag_name = flags.flag(key_name).key
                except KeyError:
                    raise ValueError(f"--knob {text!r}: {name!r} is not a llama-server flag; use custom:--flag=a,b "
                                     "for a flag this tool does not know") from None
            else:
                flag_name = hit[0].key
    if not sep or not vals.strip():
        raise ValueError(f"--knob {text!r}: give values after '=' (e.g. ub=64,128,256)")
    parts = vals.split(";") if ";" in vals else vals.split(",")
    values = tuple(None if p.strip() in ABSENT else p.strip() for p in parts if p.strip())
    return Knob(key=key_name, flag=flag_name, values=values, reason="given by the user")
