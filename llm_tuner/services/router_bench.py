"""Every model of a router measured with the same benchmark spec, one after another, kept side by side.

A router (llama-server without -m) serves several models behind one address; a benchmark names one of them
(`BenchSpec.model`). This runs services.bench's BenchRunner once per model (the same spec; a server the app
starts is started again for each, an attached one is measured as it runs) and keeps the runs as one group, as
a sweep over the model's name: the History, `runs compare` and the Benchmarks view's sweep table show them
side by side.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from llm_tuner.core.bench_spec import BenchRun, BenchSpec, RunGroup
from llm_tuner.services.bench import BenchError, BenchRunner, GroupStep, ServerTarget, run_group
from llm_tuner.services.client import LlamaClient
from llm_tuner.services.router_presets import router_model_argvs

MODEL_PARAM = "model"  # the group's parameter: its values are the router's model names


def router_model_names(target: ServerTarget) -> list[str]:
    """The models a router target serves: an attached router's `GET /models`, else the models its arguments'
    --models-dir/--models-preset give. BenchError when there are none (not a router, or an empty folder)."""
    if target.attached_url:
        with LlamaClient(target.attached_url, api_key=target.api_key, timeout=10.0) as client:
            names = [m.id for m in client.models()]
    else:
        try:
            names = list(router_model_argvs(target.argv))
        except (OSError, ValueError) as exc:
            raise BenchError(f"the router's models could not be read: {exc}") from None
    if not names:
        raise BenchError(
            "no router models to measure: the server has a model of its own (-m), or its "
            "--models-dir/--models-preset lists none"
        )
    return names


def bench_router_models(
    runner: BenchRunner,
    target: ServerTarget,
    spec: BenchSpec,
    models: Sequence[str] | None = None,
    *,
    progress: Callable[[float | None, str], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> tuple[int, list[BenchRun]]:
    """Measure each of the router's models (all of them unless `models` names some) with `spec`; returns the
    group's id and the runs in model order."""
    names = list(models) if models else router_model_names(target)
    group = RunGroup(param=MODEL_PARAM, values=tuple(names), label=target.label)
    steps = [
        GroupStep(
            name,
            name,
            replace(target, label=f"{target.label} · {name}".strip(" ·")),
            spec.model_copy(update={"model": name}),
        )
        for name in names
    ]
    return run_group(runner, group, steps, whole="all models", progress=progress, cancelled=cancelled)
