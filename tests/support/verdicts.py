"""The Compare tab's verdict counts for a list of comparisons, as its verdict line words them."""

from __future__ import annotations

from llm_tuner.core.stats import BETTER, NOISE, WORSE


def verdict_counts(comparisons) -> str:
    """'1 better, 0 worse, 5 within noise': what the verdict line must say for these comparisons."""
    n = {v: sum(1 for c in comparisons if c.verdict == v) for v in (BETTER, WORSE, NOISE)}
    return f"{n[BETTER]} better, {n[WORSE]} worse, {n[NOISE]} within noise"
