"""plan_memory (the plan with llama.cpp's fit step applied) and the solver of the largest fitting setting."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from llm_tuner.core.memory.args import FFN_EXPS_REGEX, PlacementArgs, PlanDevice
from llm_tuner.core.memory.constants import CTX_PAD, FIT_TARGET_MIB
from llm_tuner.core.memory.model_view import _ModelView, _pad, _view, normalize_cpu_flags
from llm_tuner.core.memory.placement import _model_devices
from llm_tuner.core.memory.plan import (
    Calibration,
    MemoryPlan,
    _fit_use_mib,
    _fits_with_margin,
    _raw_plan,
    _targets,
    _warnings,
)


def plan_memory(model: Any, args: PlacementArgs, gpus: list[PlanDevice] | tuple[PlanDevice, ...] = (),
                host: PlanDevice | None = None, *, cpu_flags: tuple[str, ...] | frozenset[str] = (),
                calibration: Calibration | None = None, draft_model: Any = None,
                apply_fit: bool = True) -> MemoryPlan:
    """The memory plan for `model` (core.gguf_info.ModelInfo) run with `args` on `gpus` + `host`.

    `gpus` are the devices llama.cpp would see (detected or planned); `host` is RAM (name 'Host').
    `cpu_flags` decide which weights the CPU backend repacks. `draft_model` (ModelInfo) counts a
    `-md` draft. With `apply_fit` (and `args.fit`), what llama.cpp's fit step would change is applied
    and said in the warnings.
    """
    view = _view(model)
    gpus = list(gpus)
    host = host or PlanDevice("Host", "CPU", None)
    flags = normalize_cpu_flags(cpu_flags)
    draft = draft_of(args, draft_model)
    plan, devs = _raw_plan(view, args, gpus, host, flags, calibration, draft)
    warnings = list(plan.warnings)
    changes: list[str] = []
    if apply_fit and args.fit and devs and args.split_mode != "tensor":
        targets = _targets(args, devs)
        if not _fits_with_margin(plan, targets, fit_accounting=True):
            fitted_args, changes = _emulate_fit(view, args, gpus, host, flags, calibration, draft, targets)
            if changes:
                plan, devs = _raw_plan(view, fitted_args, gpus, host, flags, calibration, draft)
                warnings = list(plan.warnings)
                warnings.extend(f"fit: {c}" for c in changes)
    elif apply_fit and args.fit and host.capacity_mib and (args.ctx is None):
        # no GPU: fit compares host use with total RAM minus the first -fitt margin and only shrinks context
        margin = (args.fit_target_mib or (FIT_TARGET_MIB,))[0]
        room = host.capacity_mib - margin

        def host_ok(p: MemoryPlan) -> bool:
            h = p.device("Host")
            return h is None or _fit_use_mib(h) <= room

        if not host_ok(plan):
            step = CTX_PAD * (1 if args.unified else args.n_seq_max)
            lo = max(CTX_PAD, min(args.fit_ctx_min * (1 if args.unified else args.n_seq_max), view.n_ctx_train))
            best = _bisect_ctx(lambda c: host_ok(_raw_plan(view, args.with_(ctx=c), gpus, host, flags, calibration,
                                                           draft)[0]), lo, view.n_ctx_train, step)
            plan, devs = _raw_plan(view, args.with_(ctx=best), gpus, host, flags, calibration, draft)
            changes = [f"context reduced to {best} tokens to fit host memory minus the -fitt margin "
                       "(set -c to choose it yourself)"]
            warnings = list(plan.warnings) + [f"fit: {c}" for c in changes]
    warnings.extend(_warnings(view, plan, devs))
    return replace(plan, warnings=tuple(warnings), fit_changes=tuple(changes))


def draft_of(args: PlacementArgs, draft_model: Any) -> tuple[Any, PlacementArgs] | None:
    """A -md draft model with the arguments its context gets (its own -ngld, devices and K/V types)."""
    if draft_model is None:
        return None
    return (draft_model, args.with_(ngl=args.draft_ngl, devices=args.draft_devices if args.draft_devices is not None
                                    else args.devices, cache_type_k=args.draft_cache_type_k,
                                    cache_type_v=args.draft_cache_type_v, overrides=(), tensor_split=()))


def _emulate_fit(view: _ModelView, args: PlacementArgs, gpus: list[PlanDevice], host: PlanDevice,
                 flags: frozenset[str], calibration: Calibration | None, draft: Any,
                 targets: dict[str, int]) -> tuple[PlacementArgs, list[str]]:
    """What common/fit.cpp would do: shrink an unset context, then place layers if the user did not."""
    changes: list[str] = []

    def ok(a: PlacementArgs) -> bool:
        return _fits_with_margin(_raw_plan(view, a, gpus, host, flags, calibration, draft)[0], targets,
                                 fit_accounting=True)

    cur = args
    if args.ctx is None:
        lo = max(CTX_PAD, min(args.fit_ctx_min * (1 if args.unified else args.n_seq_max), view.n_ctx_train))
        hi = view.n_ctx_train
        if ok(cur.with_(ctx=lo)):
            best = _bisect_ctx(lambda c: ok(cur.with_(ctx=c)), lo, hi, CTX_PAD * (1 if args.unified else args.n_seq_max))
            cur = cur.with_(ctx=best)
            changes.append(f"context reduced to {best} tokens so each device keeps its -fitt margin "
                           f"(set -c to choose it yourself)")
            return cur, changes
        cur = cur.with_(ctx=lo)
        changes.append(f"context reduced to the -fitc minimum {lo}")
    if args.user_placed or args.split_mode == "row":
        changes.append("layers not placed by fit: -ngl/-ts/-ot/--cpu-moe set by you (fit aborts that step)")
        return cur, changes
    n_all = view.n_layer_all + 1
    # MoE: keep all layers on the GPUs and move the experts of the first N blocks to the CPU
    if view.n_expert:
        for n in range(0, view.n_layer + 1):
            trial = cur.with_(overrides=tuple((rf"blk\.{j}{FFN_EXPS_REGEX}", "CPU") for j in range(n)))
            if ok(trial):
                if n:
                    changes.append(f"experts of the first {n} blocks moved to the CPU (as --n-cpu-moe {n})")
                return trial, changes
        # even every expert on the CPU does not fit: common/fit.cpp's step 3 fills "dense-only" layers (all MoE
        # tensors in system memory) back to front and leaves the layers before them wholly on the CPU
        all_exps = tuple((rf"blk\.{j}{FFN_EXPS_REGEX}", "CPU") for j in range(view.n_layer))
        for ngl in range(n_all, 0, -1):
            trial = cur.with_(ngl=ngl, overrides=all_exps)
            if ok(trial):
                changes.append(f"{ngl} of {n_all} layers placed on GPUs without their experts (as -ngl {ngl} "
                               "--cpu-moe)")
                return trial, changes
    for ngl in range(n_all, -1, -1):
        trial = cur.with_(ngl=ngl)
        if ok(trial):
            changes.append(f"{ngl} of {n_all} layers placed on GPUs (as -ngl {ngl})")
            return trial, changes
    changes.append("nothing fits even with every layer on the CPU")
    return cur.with_(ngl=0), changes


def _bisect_ctx(ok: Callable[[int], bool], lo: int, hi: int, step: int) -> int:
    lo_k, hi_k = lo // step, max(lo // step, hi // step)
    while lo_k < hi_k:
        mid = (lo_k + hi_k + 1) // 2
        if ok(mid * step):
            lo_k = mid
        else:
            hi_k = mid - 1
    return max(lo, lo_k * step)


# ------------------------------------------------------------------------------------------------
# solver
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FitAnswer:
    """A solver result: the arguments that fit (or None) and why, in words."""

    args: PlacementArgs | None
    value: Any
    reason: str
    plan: MemoryPlan | None = None


def solve(model: Any, args: PlacementArgs, gpus: list[PlanDevice] | tuple[PlanDevice, ...] = (),
          host: PlanDevice | None = None, *, goal: str = "context", targets_mib: dict[str, int] | None = None,
          cpu_flags: tuple[str, ...] = (), calibration: Calibration | None = None) -> FitAnswer:
    """Find what fits with each device keeping its margin (`targets_mib`, default `-fitt`).

    goal 'context': the largest context (multiple of 256, not above the trained one) with the
    placement as given. goal 'layers': the most GPU layers (then for MoE the fewest expert blocks on
    CPU) at the given context. goal 'split': a -ts over the GPUs that balances free memory.
    """
    view = _view(model)
    host = host or PlanDevice("Host", "CPU", None)
    flags = normalize_cpu_flags(cpu_flags)
    gl = list(gpus)
    devs = _model_devices(args, gl)
    targets = targets_mib or _targets(args, devs)
    base = args.with_(fit=False)

    def plan_of(a: PlacementArgs) -> MemoryPlan:
        return _raw_plan(view, a, gl, host, flags, calibration, None)[0]

    def ok(a: PlacementArgs) -> bool:
        return _fits_with_margin(plan_of(a), targets, host_too=True)

    def bottleneck(a: PlacementArgs) -> str:
        p = plan_of(a)
        known = [(d, d.budget_mib) for d in p.devices if d.budget_mib is not None]
        if not known:
            return "no device has a known capacity"
        worst, budget = min(known, key=lambda db: db[1] - targets.get(db[0].name, 0) - db[0].resident_mib)
        short = worst.resident_mib - (budget - targets.get(worst.name, 0))
        return (f"{worst.name} is the limit: {worst.resident_mib:.0f} MiB needed "
                f"(weights {worst.model_mib - worst.mapped_mib:.0f}"
                + (f" besides {worst.mapped_mib:.0f} mapped from the file" if worst.mapped_mib else "")
                + f", KV {worst.kv_mib:.0f}, compute {worst.compute_mib:.0f}), "
                f"{worst.budget_mib} MiB available minus {targets.get(worst.name, 0)} MiB margin"
                + (f" ({short:.0f} MiB short)" if short > 0 else ""))

    if goal == "context":
        step = CTX_PAD * (1 if base.unified else base.n_seq_max)
        lo, hi = step, _pad(view.n_ctx_train, step)
        if not ok(base.with_(ctx=lo)):
            return FitAnswer(None, None, "even the smallest context does not fit: " + bottleneck(base.with_(ctx=lo)))
        best = _bisect_ctx(lambda c: ok(base.with_(ctx=c)), lo, hi, step)
        a = base.with_(ctx=best)
        why = ("the trained context fits" if best >= view.n_ctx_train
               else "one more step does not fit: " + bottleneck(base.with_(ctx=best + step)))
        return FitAnswer(a, best, f"largest context {best} tokens; {why}", plan_of(a))
    if goal == "layers":
        n_all = view.n_layer_all + 1
        if ok(base.with_(ngl=n_all)):
            if view.n_expert:
                return FitAnswer(base.with_(ngl=n_all), n_all, "every layer and expert fits on the GPUs",
                                 plan_of(base.with_(ngl=n_all)))
            return FitAnswer(base.with_(ngl=n_all), n_all, "every layer fits on the GPUs", plan_of(base.with_(ngl=n_all)))
        if view.n_expert:
            keep = tuple(o for o in base.overrides if "exps" not in o[0])
            for n in range(1, view.n_layer + 1):
                a = base.with_(ngl=n_all, overrides=keep + tuple(
                    (rf"blk\.{j}{FFN_EXPS_REGEX}", "CPU") for j in range(n)))
                if ok(a):
                    return FitAnswer(a, n, f"all layers on GPU with the experts of the first {n} blocks on "
                                     f"CPU (--n-cpu-moe {n}); {n - 1} is too few: " + bottleneck(
                                         base.with_(ngl=n_all, overrides=keep + tuple(
                                             (rf"blk\.{j}{FFN_EXPS_REGEX}", "CPU") for j in range(n - 1)))),
                                     plan_of(a))
        for ngl in range(n_all - 1, -1, -1):
            a = base.with_(ngl=ngl)
            if ok(a):
                return FitAnswer(a, ngl, f"-ngl {ngl} of {n_all}; one more layer does not fit: "
                                 + bottleneck(base.with_(ngl=ngl + 1)), plan_of(a))
        cpu = base.with_(ngl=0, devices=(), tensor_split=(), overrides=tuple(o for o in base.overrides
                                                                             if "exps" not in o[0]))
        if gl and ok(cpu):  # the GPUs cannot hold even their runtime and compute buffers: the CPU alone can
            return FitAnswer(cpu, 0, "the GPUs cannot hold even llama.cpp's runtime and compute buffers ("
                             + bottleneck(base.with_(ngl=0)) + "); the model fits on the CPU alone (-dev none)",
                             plan_of(cpu))
        return FitAnswer(None, None, "nothing fits, even on the CPU: " + bottleneck(cpu if gl else base.with_(ngl=0)))
    if goal == "split":
        if len(devs) < 2:
            return FitAnswer(None, None, "a split needs two or more GPUs")
        free = [max(1, (d.free_mib or d.capacity_mib or 0) - targets.get(d.name, 0)) for d in devs]
        # remove what does not move with layers (compute, overhead) before proportioning
        p = plan_of(base.with_(tensor_split=tuple(float(f) for f in free)))
        fixed = {d.name: d.compute_mib + d.overhead_mib for d in p.devices}
        share = [max(1.0, f - fixed.get(d.name, 0.0)) for f, d in zip(free, devs, strict=False)]
        tot = sum(share)
        ts = tuple(round(100 * s / tot) for s in share)
        a = base.with_(tensor_split=tuple(float(x) for x in ts))
        return FitAnswer(a, ts, f"-ts {','.join(str(x) for x in ts)} puts layers in proportion to the memory "
                         "each device has left after compute buffers and runtime" +
                         ("" if ok(a) else "; it still does not fit: " + bottleneck(a)), plan_of(a))
    raise ValueError(goal)
