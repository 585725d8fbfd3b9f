"""Quality checks of a tune, pure part: which candidates change results, llama-perplexity's output, the verdicts.

A K/V cache type changes the numbers the model computes: its perplexity on a short text is compared with the
baseline's and a rise beyond the user's limit drops the candidate. Speculative decoding must not change the
output at all at --temp 0: the text is compared with the baseline's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from llm_tuner.core import flags
from llm_tuner.core.memory import llama_default

KV_KEYS = ("cache_type_k", "cache_type_v")
SPEC_KEYS = ("spec_type", "draft_n_max", "draft_n_min", "draft_model")
# Flags llama-perplexity shares with llama-server that change what or where it computes (placement included: without
# a candidate's --n-cpu-moe or fit settings the check loaded more onto the GPU than the candidate does, and failed).
PERPLEXITY_KEYS = ("model", "cache_type_k", "cache_type_v", "flash_attn", "gpu_layers", "device", "tensor_split",
                   "n_cpu_moe", "cpu_moe", "fit", "fit_target_mib",
                   "split_mode", "main_gpu", "override_tensor", "threads")
_PPL = re.compile(r"Final estimate:\s*PPL\s*=\s*([0-9.]+)")
_PPL_NOT_FINITE = re.compile(r"Final estimate:\s*PPL\s*=\s*[-+]?(inf|nan)", re.IGNORECASE)
_PPL_CHUNK = re.compile(r"\[\d+\]([0-9.]+)")


def _differs(a: Sequence[str], b: Sequence[str], keys: Sequence[str]) -> bool:
    return any(flags.value_of(a, k) != flags.value_of(b, k) for k in keys)


def changes_kv(candidate: Sequence[str], baseline: Sequence[str]) -> bool:
    """Whether the K/V types differ (a type written at llama.cpp's default is the default: `-ctk f16` is none)."""
    return any((flags.value_of(candidate, k) or llama_default(k)) != (flags.value_of(baseline, k) or llama_default(k))
               for k in KV_KEYS)


def changes_speculation(candidate: Sequence[str], baseline: Sequence[str]) -> bool:
    return _differs(candidate, baseline, SPEC_KEYS)


def perplexity_argv(server_argv: Sequence[str], text_file: str, ctx: int = 128, chunks: int = 8) -> list[str]:
    """llama-perplexity arguments for the same model, cache types and placement as a server's argv."""
    out: list[str] = []
    for key in PERPLEXITY_KEYS:
        v = flags.value_of(server_argv, key)
        if v is not None:
            out += flags.argv_for(key, v)
        elif flags.has(server_argv, key) and not flags.flag(key).takes_value:  # a switch (--cpu-moe)
            out += flags.argv_for(key)
    return [*out, flags.PPL_FILE, text_file, *flags.argv_for("ctx_size", str(ctx)),
            *flags.argv_for("batch_size", str(ctx)), flags.PPL_CHUNKS, str(chunks)]


def parse_perplexity(text: str) -> float | None:
    """The final PPL from llama-perplexity's output ("Final estimate: PPL = 12.34 +/- 0.5"), else the last
    chunk's running figure; None when there is neither; inf when the estimate is not finite ("PPL = inf" or nan:
    the model gives the text's tokens no probability, so it cannot judge a K/V type)."""
    if _PPL_NOT_FINITE.search(text or ""):
        return math.inf
    m = _PPL.search(text or "")
    if m:
        return float(m.group(1))
    chunks = _PPL_CHUNK.findall(text or "")
    return float(chunks[-1]) if chunks else None


def ppl_increase_pct(baseline: float, candidate: float) -> float:
    return 100.0 * (candidate - baseline) / baseline if baseline else 0.0
