"""The speed model's I/O: the calibration probe (short llama-bench runs on the user's own hardware), the plan and
traffic of a command line, and predictions for the CLI and the views.

The probe runs llama-bench on one or two models at the host thread counts asked for, at depth 0 and `depth`,
and fits the device rates (core.speed.calibrate). llama-bench's tests are the server's work without HTTP: a
prompt of `-p` tokens after `-d` cells, then `-n` generated tokens, each at its own depth.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_tuner.core import flags
from llm_tuner.core.memory import PlanDevice, parse_server_args, plan_memory
from llm_tuner.core.speed import SpeedCalibration, Traffic, traffic
from llm_tuner.core.speed.calibrate import Measurement, fit
from llm_tuner.services import binaries
from llm_tuner.services.library import read_model

log = logging.getLogger(__name__)

PROBE_PROMPT = 256
PROBE_GEN = 32
PROBE_DEPTH = 1024
PROBE_REPS = 2
PROBE_KV = ("f16", "q8_0")  # crossed by llama-bench: the f16, q8_0 and mixed pairs each give attention's cost


class ProbeError(Exception):
    """The probe could not run or its output could not be read (the message says why)."""


@dataclass(frozen=True)
class BenchCell:
    """One llama-bench result: a model at threads, K/V types, GPU layers and depth; prompt or generation t/s."""

    model: str
    threads: int
    type_k: str
    type_v: str
    n_gpu_layers: int
    n_prompt: int
    n_gen: int
    n_depth: int
    n_ubatch: int
    flash_attn: bool
    tps: float
    samples: tuple[float, ...] = ()

    @property
    def kind(self) -> str:
        return "prefill" if self.n_prompt and not self.n_gen else "gen"


def parse_bench_jsonl(text: str) -> list[BenchCell]:
    """llama-bench's `-o jsonl` lines -> cells (lines that are not results are skipped)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "avg_ts" not in r:
            continue
        fa = r.get("flash_attn")
        out.append(BenchCell(str(r.get("model_filename", "")), int(r.get("n_threads", 0)), str(r.get("type_k", "f16")),
                             str(r.get("type_v", "f16")), int(r.get("n_gpu_layers", 0)), int(r.get("n_prompt", 0)),
                             int(r.get("n_gen", 0)), int(r.get("n_depth", 0)), int(r.get("n_ubatch", 512)),
                             bool(fa) if not isinstance(fa, str) else fa.lower() in ("1", "on", "true"),
                             float(r["avg_ts"]), tuple(float(x) for x in r.get("samples_ts") or ())))
    return out


def cell_argv(cell: BenchCell) -> list[str]:
    """The llama-server arguments that do the work of a llama-bench cell (its context holds depth + prompt + gen)."""
    a = flags.argv_for
    return [*a("model", cell.model), *a("ctx_size", str(max(256, cell.n_depth + cell.n_prompt + cell.n_gen))),
            *a("threads", str(cell.threads)), *a("cache_type_k", cell.type_k), *a("cache_type_v", cell.type_v),
            *a("gpu_layers", str(cell.n_gpu_layers)), *a("ubatch_size", str(cell.n_ubatch)),
            *a("flash_attn", "on" if cell.flash_attn else "off"), *a("fit", "off"), *a("parallel", "1")]


def plan_traffic(argv: Sequence[str], gpus: Sequence[PlanDevice] = (), host: PlanDevice | None = None, *,
                 cpu_flags: Sequence[str] = (), model: Any = None) -> Traffic:
    """The traffic of a llama-server command line on these devices (the model read from -m unless given)."""
    pargs = parse_server_args(list(argv))
    if model is None:
        model = _model(pargs.model)
    host = host or PlanDevice("Host", "CPU", None, None)
    plan = plan_memory(model, pargs, list(gpus), host, cpu_flags=tuple(cpu_flags))
    return traffic(model, plan, list(gpus), tuple(cpu_flags))


_MODELS: dict[str, Any] = {}


def _model(path: str | None) -> Any:
    if not path:
        raise ProbeError("no model (-m)")
    key = os.path.abspath(path)
    if key not in _MODELS:
        info = read_model(path)
        if info.error:
            raise ProbeError(f"{path}: {info.error}")
        _MODELS[key] = info
    return _MODELS[key]


def measurements(cells: Sequence[BenchCell], gpus: Sequence[PlanDevice] = (), *,
                 cpu_flags: Sequence[str] = ()) -> list[Measurement]:
    """Cells -> measurements for the fit (a prefill and a generation cell of one configuration stay apart)."""
    out = []
    for c in cells:
        t = plan_traffic(cell_argv(c), gpus, cpu_flags=cpu_flags)
        label = f"{Path(c.model).stem} t{c.threads} {c.type_k} ngl{c.n_gpu_layers} d{c.n_depth} {c.kind}"
        if c.kind == "prefill":
            out.append(Measurement(t, c.threads, c.n_depth, c.n_prompt, None, c.tps, label))
        else:
            out.append(Measurement(t, c.threads, c.n_depth + c.n_gen // 2, c.n_prompt or 1, c.tps, None, label))
    return out


def probe_argv(model: str, threads: Sequence[int], *, extra: Sequence[str] = ()) -> list[str]:
    """llama-bench's arguments for one probe run of `model` (JSON lines out; K/V types crossed; the PROBE_*
    settings of this module)."""
    server = [*flags.argv_for("model", model), *flags.argv_for("threads", ",".join(str(t) for t in threads)),
              *flags.argv_for("flash_attn", "on"), *flags.argv_for("cache_type_k", ",".join(PROBE_KV)),
              *flags.argv_for("cache_type_v", ",".join(PROBE_KV))]
    bench, _ = flags.to_llama_bench(server)
    return [*bench, flags.BENCH_DEPTH, f"0,{PROBE_DEPTH}", flags.BENCH_PROMPT, str(PROBE_PROMPT), flags.BENCH_GEN,
            str(PROBE_GEN), flags.BENCH_REPS, str(PROBE_REPS), flags.BENCH_OUTPUT, "jsonl", *extra]


def run_probe(models: Sequence[str], threads: Sequence[int], *, gpus: Sequence[PlanDevice] = (),
              cpu_flags: Sequence[str] = (), build: str = "", driver: str = "",
              progress: Callable[[str], None] | None = None, bench_binary: str | None = None,
              extra: Sequence[str] = ()) -> tuple[SpeedCalibration, list[Measurement]]:
    """The probe: one llama-bench run per model (at most two), then the fit. ProbeError when it cannot run."""
    cells: list[BenchCell] = []
    for model in list(models)[:2]:
        if progress:
            progress(f"probing {Path(model).name} at {', '.join(map(str, threads))} threads")
        argv = probe_argv(model, threads, extra=extra)
        try:
            if bench_binary:
                run = binaries.run_short([bench_binary, *argv], timeout=900.0)
            else:
                run = binaries.run_llama_bench(argv, timeout=900.0)
        except binaries.BinaryError as exc:
            raise ProbeError(str(exc)) from None
        got = parse_bench_jsonl(run.stdout)
        if not got:
            tail = (run.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise ProbeError(f"llama-bench gave no results for {Path(model).name}: {tail[:300]}")
        cells += got
    ms = measurements(cells, gpus, cpu_flags=cpu_flags)
    names = " + ".join(Path(m).name for m in list(models)[:2])
    cal = fit(ms, build=build, driver=driver, source=f"probe of {names}")
    return cal, ms


def threads_of(argv: Sequence[str], default: int) -> int:
    """The host thread count of a command line: its -t when a positive whole number, else `default` (llama.cpp's
    own, the physical cores, as the caller knows it)."""
    value = flags.value_of(list(argv), "threads")
    return int(value) if value is not None and value.isdigit() and int(value) > 0 else default


def run_measurements(runs: Sequence[Any], gpus: Sequence[PlanDevice] = (), *, cpu_flags: Sequence[str] = (),
                     default_threads: int = 1) -> tuple[list[Measurement], list[str]]:
    """Stored benchmark runs -> measurements for the fit (one per run and prompt length: the medians of its
    repetitions), and why the others were left out. Kept: finished runs of one client, started by the app (not
    attached), without speculative decoding, whose model file is still there."""
    out: list[Measurement] = []
    skipped: list[str] = []
    for run in runs:
        name = f"run {run.id}"
        argv = flags.effective_argv(list(run.server_argv), dict(run.server_env))
        if run.status != "complete" or run.attached_url or run.spec.clients != 1:
            skipped.append(f"{name}: not a finished single-client run of the app's own server")
            continue
        if flags.value_of(argv, "spec_type") not in (None, "none") or flags.has(argv, "draft_model"):
            skipped.append(f"{name}: speculative decoding (not predicted)")
            continue
        try:
            t = plan_traffic(argv, gpus, cpu_flags=cpu_flags)
        except (ProbeError, ValueError) as exc:
            skipped.append(f"{name}: {exc}")
            continue
        threads = threads_of(argv, default_threads)
        by_len: dict[tuple[int, int], list[Any]] = {}
        for rep in run.reps:
            if rep.error is None and rep.predicted_per_second and rep.prompt_per_second:
                by_len.setdefault((rep.prompt_tokens, rep.depth), []).append(rep)
        for (prompt, depth), reps in sorted(by_len.items()):
            gen = statistics.median(r.predicted_per_second for r in reps)
            pre = statistics.median(r.prompt_per_second for r in reps)
            n_pred = statistics.median(r.predicted_n or 0 for r in reps)
            prompt_n = int(statistics.median(r.prompt_n or prompt for r in reps))
            out.append(Measurement(t, threads, depth, max(1, prompt_n), None, pre, f"{name} prompt {prompt} prefill"))
            out.append(Measurement(t, threads, int(depth + prompt + n_pred / 2), max(1, prompt_n), gen, None,
                                   f"{name} prompt {prompt} gen"))
    return out, skipped
