"""Quality checks of a tune, pure part: which candidates change results, llama-perplexity's output, the verdicts.

Which flags take which check is each knob's row of core.tune.knob_table.KNOBS (`quality`): a K/V cache type
(PERPLEXITY) changes the numbers the model computes: its perplexity on a short text is compared with the
baseline's and a rise beyond the user's limit drops the candidate. Speculative decoding (OUTPUT) must not change
the output at all at --temp 0: the text is compared with the baseline's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from llm_tuner.core import flags
from llm_tuner.core.memory import llama_default
from llm_tuner.core.tune.knob_table import OUTPUT, PERPLEXITY, checked_keys


def _flag_keys(check: str) -> tuple[str, ...]:
    """The core.flags keys of the rows with this check (a symbolic knob, like placement, sets flags of its own)."""
    out = []
    for k in checked_keys(check):
        try:
            flags.flag(k)
        except KeyError:
            continue
        out.append(k)
    return tuple(out)


def perplexity_keys() -> tuple[str, ...]:
    """Flags whose change is judged by llama-perplexity (KNOBS rows with the PERPLEXITY check)."""
    return _flag_keys(PERPLEXITY)


def output_keys() -> tuple[str, ...]:
    """Flags whose change must keep the output at --temp 0 (KNOBS rows with the OUTPUT check)."""
    return _flag_keys(OUTPUT)


def check_of(flag: str) -> str | None:
    """The quality check a knob's flag gets (PERPLEXITY, OUTPUT or None)."""
    keys = flag.split("+")
    if any(k in perplexity_keys() for k in keys) or flag in checked_keys(PERPLEXITY):
        return PERPLEXITY
    if any(k in output_keys() for k in keys):
        return OUTPUT
    return None
# Flags llama-perplexity shares with llama-server that change what or where it computes (placement included: without
# a candidate's --n-cpu-moe or fit settings the check loaded more onto the GPU than the candidate does, and failed).
PERPLEXITY_KEYS = ("model", "cache_type_k", "cache_type_v", "flash_attn", "gpu_layers", "device", "tensor_split",
                   "n_cpu_moe", "cpu_moe", "fit", "fit_target_mib",
                   "split_mode", "main_gpu", "override_tensor", "threads")
_PPL = re.compile(r"Final estimate:\s*PPL\s*=\s*([0-9.]+)")
_PPL_NOT_FINITE = re.compile(r"Final estimate:\s*PPL\s*=\s*[-+]?(inf|nan)", re.IGNORECASE)
_PPL_CHUNK = re.compile(r"\[\d+\]([0-9.]+)")


def _differs(a: Sequence[str], b: Sequence[str], keys: Sequence[str]) -> bool:
    """Whether any key's value differs (a value written at llama.cpp's default is the default: `-ctk f16` is none)."""
    def value(argv: Sequence[str], key: str) -> str | None:
        v = flags.value_of(list(argv), key)
        if v is None and flags.has(list(argv), key) and not flags.flag(key).takes_value:
            return ""  # a switch that is present
        return v or llama_default(key)
    return any(value(a, k) != value(b, k) for k in keys)


def changes_kv(candidate: Sequence[str], baseline: Sequence[str]) -> bool:
    """Whether a flag judged by perplexity differs (the K/V types, and any row with the PERPLEXITY check)."""
    return _differs(candidate, baseline, perplexity_keys())


def changes_speculation(candidate: Sequence[str], baseline: Sequence[str]) -> bool:
    """Whether a flag whose change must keep the output differs (speculative decoding's, and any OUTPUT row)."""
    return _differs(candidate, baseline, output_keys())


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
