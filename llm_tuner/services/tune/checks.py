"""What a tune asks before and beside measuring: does a candidate fit (the memory plan), what does it cost in
quality (llama-perplexity for K/V types, output at --temp 0 for speculation), how close is it to the
memory-bandwidth limit. Each answer comes from the one module that owns the fact (core.memory, core.tune)."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from llm_tuner.core import flags
from llm_tuner.core.memory import MemoryPlan, PlanDevice, parse_server_args
from llm_tuner.core.settings import Settings
from llm_tuner.core.speed import traffic
from llm_tuner.core.tune.quality import parse_perplexity, perplexity_argv
from llm_tuner.core.tune.report import bandwidth_figure
from llm_tuner.services import binaries
from llm_tuner.services.bench import BenchRunner, ServerTarget, memory_plan
from llm_tuner.services.client import LlamaClient
from llm_tuner.services.library import read_model
from llm_tuner.services.speed import nvml_gbps

log = logging.getLogger(__name__)

PlanFn = Callable[[list[str], dict[str, str]], tuple[bool, str]]
# The text perplexity is measured on: public domain, shipped for benchmark prompts (data/prompts/SOURCES.md).
PPL_TEXT = "data/prompts/shakespeare_coriolanus.txt"
SPEC_CHECK_TOKENS = 32


def plan_fit(plan: MemoryPlan, headroom_mib: float) -> tuple[bool, str]:
    """Whether every device keeps `headroom_mib` free under the plan, and the figures: the first device that does
    not ("CUDA0 needs 17.2 of 16.0 GiB" - what must be resident plus the headroom, of the budget), else what each
    device with a known budget holds ("CUDA0 2.31 of 2.50 GiB")."""
    held: list[str] = []
    for d in plan.devices:
        budget = d.budget_mib
        if budget is None:
            continue
        need = d.resident_mib + headroom_mib
        if need > budget:
            return False, (f"{d.name} needs {need / 1024:.2f} of {budget / 1024:.2f} GiB "
                           f"({headroom_mib:.0f} MiB headroom included)")
        held.append(f"{d.name} {d.resident_mib / 1024:.2f} of {budget / 1024:.2f} GiB")
    return True, ", ".join(held)


def make_plan_fn(headroom_mib: float, *, binary: str | Path | None = None, gpus: list[PlanDevice] | None = None,
                 host: PlanDevice | None = None) -> PlanFn:
    """The default pruning: the real memory plan on the detected devices (or planned ones: `gpus`/`host`
    PlanDevices), with the headroom. A plan that cannot be made prunes nothing (the launch will tell)."""
    def plan_fn(argv: list[str], env: dict[str, str]) -> tuple[bool, str]:
        try:
            plan = memory_plan(list(argv), Path(binary) if binary else binaries_server(), env, gpus=gpus, host=host)
        except Exception as exc:  # noqa: BLE001 - no plan: the candidate is launched and judged by llama.cpp
            log.info("no memory plan for a tune candidate: %s", exc)
            return True, ""
        return (True, "") if plan is None else plan_fit(plan, headroom_mib)
    return plan_fn


def perplexity(argv: list[str], *, server_binary: str | None = None, cancelled: Callable[[], bool] | None = None,
               settings: Settings | None = None) -> tuple[float | None, str]:
    """llama-perplexity on the shipped text with the argv's model, K/V types and placement: (PPL, error)."""
    text = resources.files("llm_tuner").joinpath(PPL_TEXT)
    try:
        with resources.as_file(text) as path:
            run = binaries.run_perplexity(perplexity_argv(argv, str(path)), server_binary=server_binary,
                                          cancel_check=cancelled, settings=settings)
    except binaries.BinaryError as exc:
        return None, str(exc)
    ppl = parse_perplexity(run.stdout + "\n" + run.stderr)
    if ppl is not None and not math.isfinite(ppl):
        return None, ("llama-perplexity's estimate is not finite (PPL = inf): this model gives the text no "
                      "probability, so perplexity cannot judge a K/V type on it")
    if ppl is None:
        tail = (run.stderr.strip().splitlines() or ["(no output)"])[-1]
        return None, f"llama-perplexity exited with {run.returncode}: {tail[:300]}"
    return ppl, ""


def greedy_text(client: LlamaClient, n_tokens: int = SPEC_CHECK_TOKENS) -> tuple[str | None, str]:
    """The text a ready server generates at --temp 0 for a fixed prompt (n tokens): (text, error). Run as the
    probe of a trial's own measuring run (BenchRunner.run), so the check costs no server start of its own."""
    try:
        prompt = resources.files("llm_tuner").joinpath(PPL_TEXT).read_text(encoding="utf-8")[:600]
        out = client.completion(prompt, n_predict=n_tokens, temperature=0.0, ignore_eos=True, seed=1,
                                cache_prompt=False)
        return str(out.get("content", "")), ""
    except Exception as exc:  # noqa: BLE001 - the candidate fails the check with the reason
        return None, f"{type(exc).__name__}: {exc}"


def greedy_output(bench: BenchRunner, target: ServerTarget, n_tokens: int = SPEC_CHECK_TOKENS) -> tuple[str | None, str]:
    """greedy_text on a server started for it (the baseline's text when its run is not measured again: resume)."""
    proc = None
    try:
        proc, url = bench.serve(target)
        with LlamaClient(url) as client:
            health = client.wait_ready(timeout=bench.ready_timeout_s, poll_s=0.2, alive=proc.alive)
            if not health.ready:
                return None, f"llama-server did not become ready ({health.message})"
            return greedy_text(client, n_tokens)
    except Exception as exc:  # noqa: BLE001 - the candidate fails the check with the reason
        return None, f"{type(exc).__name__}: {exc}"
    finally:
        if proc is not None:
            proc.stop()


def bandwidth(argv: list[str], env: dict[str, str], binary: str | None, gen_tps: float | None, depth: int,
              prompt_tokens: int) -> dict[str, Any] | None:
    """The winner's generation speed against its devices' memory-bandwidth limit: bytes read per token per device
    from core.speed (the weights a token uses, the output head, the K/V cache at the measured depth)."""
    try:
        plan = memory_plan(list(argv), Path(binary) if binary else binaries_server(), env)
        model_path = parse_server_args(flags.effective_argv(argv, env)).model
        if plan is None or not model_path:  # no model: memory_plan gives no plan
            return None
        model = read_model(model_path)
        descriptions = _descriptions(binary)
        read = traffic(model, plan).read_bytes(depth + prompt_tokens)
        devices = [{"name": name, "description": descriptions.get(name, ""), "bytes": b}
                   for name, b in read.items() if b > 0]
        return bandwidth_figure(devices, gen_tps, nvml_gbps(binary))
    except Exception as exc:  # noqa: BLE001 - a bonus figure
        log.info("no bandwidth figure: %s", exc)
        return None


def binaries_server() -> Path | None:
    loc = binaries.locate(binaries.SERVER)
    return loc.path if loc else None


def _descriptions(binary: str | None) -> dict[str, str]:
    path = Path(binary) if binary else binaries_server()
    if path is None:
        return {}
    try:
        return {d.name: d.description for d in binaries.list_devices(path)}
    except binaries.BinaryError:
        return {}
