"""Builders and previews of `-ot` override-tensor rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llm_tuner.core.memory.args import FFN_EXPS_REGEX, PlacementArgs, PlanDevice
from llm_tuner.core.memory.constants import MIB
from llm_tuner.core.memory.model_view import _view
from llm_tuner.core.memory.placement import _rx, place_tensors, regex_search

# ------------------------------------------------------------------------------------------------
# override-tensor builder
# ------------------------------------------------------------------------------------------------


def rule_ffn_every_nth(n: int, start: int = 0, n_layer: int | None = None, buffer: str = "CPU") -> str:
    """`-ot` rule for the FFN weights of every n-th block (start, start+n, ...)."""
    blocks = list(range(start, n_layer if n_layer is not None else 0, max(1, n)))
    return rf"blk\.({'|'.join(str(b) for b in blocks)})\.ffn_.*={buffer}"


def rule_experts_blocks(a: int, b: int, buffer: str = "CPU") -> str:
    """`-ot` rule for the expert weights of blocks a..b (inclusive)."""
    blocks = "|".join(str(i) for i in range(a, b + 1))
    return rf"blk\.({blocks}){FFN_EXPS_REGEX}={buffer}"


@dataclass(frozen=True)
class RulePreview:
    matched: tuple[str, ...]
    moved_mib: float  # weights that change device under the rule (MiB)
    error: str | None = None


def preview_rule(model: Any, args: PlacementArgs, rule: str, gpus: list[PlanDevice] | tuple[PlanDevice, ...] = (),
                 cpu_flags: tuple[str, ...] = ()) -> RulePreview:
    """Which tensors a `pattern=BUFFER` rule matches and how many MiB it moves, given the other rules."""
    if "=" not in rule:
        return RulePreview((), 0.0, "a rule is <regex>=<buffer>, e.g. blk\\.1\\.ffn_.*=CPU")
    pat, buf = rule.rsplit("=", 1)
    if _rx(pat) is None:
        return RulePreview((), 0.0, f"not a valid regular expression: {pat}")
    before = {p.name: p for p in place_tensors(model, args, gpus, cpu_flags)}
    after = {p.name: p for p in place_tensors(model, args.with_(overrides=((pat, buf), *args.overrides)), gpus,
                                              cpu_flags)}
    view = _view(model)
    matched = tuple(t.name for t in view.tensors if regex_search(pat, t.name))
    moved = sum(p.n_bytes for n, p in after.items() if n in before and before[n].device != p.device)
    return RulePreview(matched, moved / MIB)
