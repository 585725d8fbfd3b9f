"""Builders and previews of `-ot` override-tensor rules."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llm_tuner.core.memory.args import FFN_EXPS_REGEX, PlacementArgs, PlanDevice
from llm_tuner.core.memory.constants import MIB
from llm_tuner.core.memory.model_view import _view
from llm_tuner.core.memory.placement import _rx, place_tensors, regex_search
from llm_tuner.core.memory.solve import plan_memory

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
    moved_mib: float  # weights that change device under the rule (MiB), all devices together
    error: str | None = None
    # MiB of weights the rule moves off each device (llama.cpp device names, 'Host'), in device order
    moved_off_mib: dict[str, float] = field(default_factory=dict)
    moved_to: tuple[str, ...] = ()  # where they go
    # the rule turns llama.cpp's pipeline parallelism off (the first tensor override on several devices does):
    # the compute buffers' change per device (MiB, negative: freed), in plan order; empty when it does not
    pipeline_off_mib: dict[str, float] = field(default_factory=dict)

    def text(self) -> str:
        """'moves 120 MiB off CUDA0, 40 MiB off Vulkan1 (to Host)' or why it moves nothing, then the pipeline
        parallelism it turns off and what that changes in the compute buffers."""
        if self.error:
            return self.error
        if not self.matched:
            return "matches no tensor of this model"
        if not self.moved_off_mib:
            return "moves nothing: every tensor it matches is already there"
        off = ", ".join(f"{mib:.0f} MiB off {dev}" for dev, mib in self.moved_off_mib.items())
        text = f"moves {off}" + (f" (to {', '.join(self.moved_to)})" if self.moved_to else "")
        if self.pipeline_off_mib:
            change = ", ".join(f"{v:+.0f} MiB on {d}" for d, v in self.pipeline_off_mib.items() if abs(v) >= 0.5)
            text += ("; and it turns pipeline parallelism off (any tensor override does): compute buffers "
                     f"{change or 'unchanged'}, and prompt batches no longer overlap over the devices")
        return text


def preview_rule(model: Any, args: PlacementArgs, rule: str, gpus: list[PlanDevice] | tuple[PlanDevice, ...] = (),
                 cpu_flags: tuple[str, ...] = ()) -> RulePreview:
    """Which tensors a `pattern=BUFFER` rule matches and how many MiB it moves off each device, given the
    other rules and the devices (call it again when either changes)."""
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
    order = [*(d.name for d in gpus), "Host"]
    off: dict[str, float] = {}
    to: list[str] = []
    for n, p in after.items():
        b = before.get(n)
        if b is not None and b.device != p.device:
            off[b.device] = off.get(b.device, 0.0) + p.n_bytes / MIB
            if p.device not in to:
                to.append(p.device)
    off = {d: off[d] for d in sorted(off, key=lambda d: order.index(d) if d in order else len(order))}
    return RulePreview(matched, sum(off.values()), moved_off_mib=off, moved_to=tuple(to),
                       pipeline_off_mib=_pipeline_off(model, args, args.with_(overrides=((pat, buf), *args.overrides)),
                                                      list(gpus), cpu_flags) if off else {})


def _pipeline_off(model: Any, before: PlacementArgs, after: PlacementArgs, gpus: list[PlanDevice],
                  cpu_flags: tuple[str, ...]) -> dict[str, float]:
    """The compute buffers' change per device when `after` turns pipeline parallelism off ({} otherwise): the
    plans as the Plan makes them (fit applied), before and after the rule."""
    if len(gpus) < 2:
        return {}
    a = plan_memory(model, before, gpus, cpu_flags=cpu_flags)
    if not a.pipeline_parallel:
        return {}
    b = plan_memory(model, after, gpus, cpu_flags=cpu_flags)
    if b.pipeline_parallel is not False:
        return {}
    return {d.name: d.compute_mib - (x.compute_mib if (x := a.device(d.name)) is not None else 0.0)
            for d in b.devices}
