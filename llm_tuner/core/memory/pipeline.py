"""Pipeline parallelism: whether llama.cpp turns it on for a plan, why not, and what it changes in memory.

llama.cpp (src/llama-context.cpp:432-437 in the tested build) turns it on only with more than one device, more
offloaded layers than the model has (`-ngl` above n_layer: the output layer on a GPU too; -ngl equal to the
layer count leaves the output on the CPU and turns it off; 999 or all keep it), `-sm layer`, the K/V offloaded
and no tensor override at all (any `-ot`, `--cpu-moe`/`--n-cpu-moe`, or fit's own expert overflow). With it on
the scheduler keeps the graph inputs in GGML_SCHED_MAX_COPIES (4) copies (more compute memory on every device)
and overlaps the devices' work on a batch (prompt throughput over several GPUs); if that allocation fails
llama.cpp retries without it (:679-681). The figures here are the plan's compute buffers computed both ways.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llm_tuner.core import flags
from llm_tuner.core.memory.args import PlacementArgs, PlanDevice, overrides_as_profile
from llm_tuner.core.memory.model_view import _view, normalize_cpu_flags
from llm_tuner.core.memory.plan import Calibration, MemoryPlan, _raw_plan
from llm_tuner.core.memory.solve import draft_of

PIPELINE_SOURCE = "src/llama-context.cpp:432-437 (pipeline_parallel), :679-681 (retry without it)"


@dataclass(frozen=True)
class Pipeline:
    """Pipeline parallelism of a multi-device plan: on or off, why, and the compute buffers it adds per device
    (MiB with it on minus with it off, in plan order, host included; positive: what it costs)."""

    on: bool
    why: str
    cost_mib: dict[str, float] = field(default_factory=dict)

    def memory_text(self) -> str:
        """'+812 MiB on CUDA0, +790 MiB on CUDA1, +24 MiB on Host' (what it takes, or would take)."""
        parts = [f"{v:+.0f} MiB on {d}" for d, v in self.cost_mib.items() if abs(v) >= 0.5]
        return ", ".join(parts) if parts else "no measurable compute memory"

    def text(self) -> str:
        """The Plan's line: on/off, why, and what it changes in memory."""
        if self.on:
            return (f"Pipeline parallelism: on ({self.why}). Its compute buffers take {self.memory_text()} "
                    "(the graph inputs kept in 4 copies); batches overlap over the devices.")
        return (f"Pipeline parallelism: off ({self.why}). With it on, compute buffers would take "
                f"{self.memory_text()}, and prompt batches would overlap over the devices.")


def why_off(args: PlacementArgs, plan: MemoryPlan, user_args: PlacementArgs | None = None) -> list[str]:
    """Why llama.cpp leaves pipeline parallelism off for `plan` (its args are after fit), each reason in
    words; [] when it is on or the plan has one device. `user_args`: the arguments as given (before fit), to
    tell the user's overrides from fit's own expert overflow."""
    if plan.pipeline_parallel is not False:
        return []
    given = user_args if user_args is not None else args
    out = []
    n_layer = plan.n_layers_total - 1
    if plan.n_gpu_layers <= n_layer:
        ngl = args.ngl
        if ngl is not None and ngl == n_layer:
            out.append(f"-ngl {ngl} equals the model's {n_layer} layers, so the output layer stays on the "
                       f"CPU; -ngl {n_layer + 1} (or all) puts it on a GPU")
        else:
            out.append(f"{plan.n_gpu_layers} of the {plan.n_layers_total} layers (the output included) are "
                       "offloaded; it needs all of them")
    if args.split_mode != "layer":
        out.append(f"-sm {args.split_mode} (it needs -sm layer)")
    if args.no_kv_offload:
        out.append(f"{flags.short('kv_offload', negative=True)}: the K/V stays in host memory")
    if args.overrides:
        cpu_moe, n_cpu_moe, rest = overrides_as_profile(tuple(given.overrides))
        named = ([f"{flags.short('override_tensor')} {p}={b}" for p, b in rest[:2]]
                 + (["..."] if len(rest) > 2 else []) + ([flags.short("cpu_moe")] if cpu_moe else [])
                 + ([f"{flags.short('n_cpu_moe')} {n_cpu_moe}"] if n_cpu_moe is not None else []))
        if given.overrides:
            out.append(f"a tensor override is set ({', '.join(named)}): any override turns it off")
        else:
            out.append("fit moved expert weights to the CPU with its own tensor override (any override turns it off)")
    return out


def pipeline(model: Any, plan: MemoryPlan, gpus: list[PlanDevice] | tuple[PlanDevice, ...],
             host: PlanDevice | None = None, *, user_args: PlacementArgs | None = None,
             cpu_flags: tuple[str, ...] | frozenset[str] = (), calibration: Calibration | None = None,
             draft_model: Any = None) -> Pipeline | None:
    """Pipeline parallelism for a plan made by plan_memory with these devices, calibration and draft model
    (None with one device): the plan is made again with it the other way (same arguments, fit's result kept)
    to say what it changes."""
    if plan.pipeline_parallel is None:
        return None
    args = plan.args
    other, _ = _raw_plan(_view(model), args, list(gpus), host or PlanDevice("Host", "CPU", None),
                         normalize_cpu_flags(cpu_flags), calibration, draft_of(args, draft_model),
                         pp=not plan.pipeline_parallel)
    with_pp, without = (plan, other) if plan.pipeline_parallel else (other, plan)
    cost = {d.name: d.compute_mib - (o.compute_mib if (o := without.device(d.name)) is not None else 0.0)
            for d in with_pp.devices}
    if plan.pipeline_parallel:
        why = f"{len(plan.devices) - 1} devices, every layer offloaded, -sm layer, no tensor override"
    else:
        why = "; ".join(why_off(args, plan, user_args)) or "llama.cpp's conditions are not met"
    return Pipeline(bool(plan.pipeline_parallel), why, cost)
