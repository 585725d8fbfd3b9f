"""The speed model's I/O: the calibration probe (short llama-bench runs on the user's own hardware), the plan and
traffic of a command line, and predictions for the CLI and the views.

`SpeedBasis` (`load_basis`) is what every prediction on this machine rests on: the stored calibration of the
build and driver in use (or none: defaults, said so), the host's thread count and the GPUs' peak read rates; the
CLI (`estimate --speed`, `models plan`) and the views (Plan, Get models, Profile, Benchmarks) predict with it.
`refit_from_runs` is what a finished benchmark adds to it: a calibration fitted over the stored runs.

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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from llm_tuner.core import flags
from llm_tuner.core.bench_report import RunPrediction, busy_warning, throttle_warning
from llm_tuner.core.memory import PlanDevice, parse_server_args, plan_memory
from llm_tuner.core.speed import Prediction, SpeedCalibration, Traffic, gpus_of_plan, predict, traffic
from llm_tuner.core.speed.calibrate import Measurement, determined, fit, refine, rows, with_error
from llm_tuner.core.speed.predict import STORED_RUNS, resolve_cost, split_key
from llm_tuner.core.tune.report import published_gbps
from llm_tuner.services import binaries
from llm_tuner.services.library import read_model
from llm_tuner.services.telemetry import nvml
from llm_tuner.services.telemetry.host import host_info
from llm_tuner.services.telemetry.inventory import gpu_labels
from llm_tuner.store.runs import RunRepository
from llm_tuner.store.speed import SpeedCalibrationRepo

log = logging.getLogger(__name__)

PROBE_PROMPT = 256
PROBE_GEN = 32
PROBE_DEPTH = 1024
PROBE_REPS = 2
# K/V types of the probe, each set crossed by one llama-bench run: f16, q8_0 and their mixed pairs, then q4_0 on
# both sides (the common small cache, whose CPU attention is the slowest: as q8_0/q8_0 it came out twice as fast
# as measured). Each pair gives attention's cost; an unprobed pair takes the nearest probed one.
PROBE_KV_SETS: tuple[tuple[str, ...], ...] = (("f16", "q8_0"), ("q4_0",))


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


def probe_argv(model: str, threads: Sequence[int], *, kv: Sequence[str] = PROBE_KV_SETS[0],
               extra: Sequence[str] = ()) -> list[str]:
    """llama-bench's arguments for one probe run of `model` (JSON lines out; the K/V types `kv` crossed; the
    PROBE_* settings of this module)."""
    server = [*flags.argv_for("model", model), *flags.argv_for("threads", ",".join(str(t) for t in threads)),
              *flags.argv_for("flash_attn", "on"), *flags.argv_for("cache_type_k", ",".join(kv)),
              *flags.argv_for("cache_type_v", ",".join(kv))]
    bench, _ = flags.to_llama_bench(server)
    return [*bench, flags.BENCH_DEPTH, f"0,{PROBE_DEPTH}", flags.BENCH_PROMPT, str(PROBE_PROMPT), flags.BENCH_GEN,
            str(PROBE_GEN), flags.BENCH_REPS, str(PROBE_REPS), flags.BENCH_OUTPUT, "jsonl", *extra]


def probe_argvs(model: str, threads: Sequence[int], *, extra: Sequence[str] = ()) -> list[list[str]]:
    """Every llama-bench run of the probe for `model`: one per K/V set (PROBE_KV_SETS)."""
    return [probe_argv(model, threads, kv=kv, extra=extra) for kv in PROBE_KV_SETS]


def run_probe(models: Sequence[str], threads: Sequence[int], *, gpus: Sequence[PlanDevice] = (),
              cpu_flags: Sequence[str] = (), build: str = "", driver: str = "",
              progress: Callable[[str], None] | None = None, bench_binary: str | None = None,
              extra: Sequence[str] = ()) -> tuple[SpeedCalibration, list[Measurement]]:
    """The probe: llama-bench runs of each model (at most two; one run per K/V set), then the fit. ProbeError
    when it cannot run."""
    cells: list[BenchCell] = []
    for model, argv in ((m, a) for m in list(models)[:2] for a in probe_argvs(m, threads, extra=extra)):
        if progress:
            progress(f"probing {Path(model).name} at {', '.join(map(str, threads))} threads, K/V "
                     f"{flags.value_of(argv, 'cache_type_k')}")
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
                     default_threads: int = 1, quiet_only: bool = False) -> tuple[list[Measurement], list[str]]:
    """Stored benchmark runs -> measurements for the fit (one per run and prompt length: the medians of its
    repetitions), and why the others were left out. Kept: finished runs of one client, started by the app (not
    attached), without speculative decoding, whose model file is still there; with `quiet_only` (the refit after
    each benchmark) only runs on a quiet machine (no busy or throttle warning: core.bench_report)."""
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
        if quiet_only and (busy_warning(run) or throttle_warning(run)):
            skipped.append(f"{name}: other processes were busy or a GPU throttled while it measured")
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


# -- what predictions on this machine rest on -------------------------------------------------------------
def nvml_gbps(binary: str | None) -> dict[str, float]:
    """NVML's memory bandwidth per GPU under llama.cpp's device names (CUDA0, ...); {} without NVML."""
    try:
        by_index = nvml.memory_bandwidth_gbps()
        if not by_index:
            return {}
        labels = gpu_labels(binary)
        return {labels.get(f"nvidia:{i}", f"nvidia:{i}"): gbps for i, gbps in by_index.items()}
    except Exception as exc:  # noqa: BLE001 - published figures are the fallback
        log.info("no NVML bandwidth: %s", exc)
        return {}


def calibration_identity(server: Path | None = None) -> tuple[str, str, Path | None]:
    """(build key, GPU driver, llama-bench path) of the binaries in use: what a calibration is kept under.
    `server`: the llama-server a profile runs (default: the one the app found)."""
    if server is None:
        loc = binaries.locate(binaries.SERVER)
        server = loc.path if loc is not None else None
    build = ""
    if server is not None:
        try:
            build = binaries.build_identity(Path(server)).key
        except binaries.BinaryError:
            build = ""
    gpus, _ = nvml.nvidia_gpus()
    driver = (gpus[0].driver or "") if gpus else ""
    bench = binaries.locate(binaries.BENCH)
    return build, driver, (bench.path if bench else None)


def device_peaks(gpus: Sequence[Any], measured: dict[str, float]) -> dict[str, tuple[float, str]]:
    """Peak read rates of the GPUs: NVML's (memory clock x bus width, `measured`), else the vendor's figure."""
    out: dict[str, tuple[float, str]] = {}
    for g in gpus:
        if g.name in measured:
            out[g.name] = (measured[g.name], "NVML")
        elif (pub := published_gbps(g.description or "")) is not None:
            out[g.name] = (pub, "published")
    return out


@dataclass(frozen=True)
class SpeedBasis:
    """What a prediction on this machine rests on: the newest stored calibration of the build and driver in use
    (None: default costs, a wider error), the host's default thread count (llama.cpp's: the physical cores) and
    NVML's peak read rate per GPU. `predict` is pure and quick (a view may call it on every change)."""

    calibration: SpeedCalibration | None = None
    calibration_id: int | None = None
    build: str = ""
    driver: str = ""
    threads: int = 4
    nvml_gbps: dict[str, float] = field(default_factory=dict)
    problem: str = ""  # why the stored calibration could not be read: defaults stand in ('': none)

    @property
    def calibrated(self) -> bool:
        return self.calibration is not None and bool(self.calibration.costs)

    def peaks(self, gpus: Sequence[Any]) -> dict[str, tuple[float, str]]:
        return device_peaks(gpus, self.nvml_gbps)

    def predict(self, model: Any, plan: Any, *, depth: int = 0, prompt: int = 512, threads: int | None = None,
                gpus: Sequence[PlanDevice] | None = None) -> Prediction | None:
        """The predicted speed of `plan` (core.memory) for `model`; None when the model's traffic cannot be read.
        `gpus`: the devices planned for, with their descriptions (a GPU's published bandwidth is found by it)."""
        t = plan_traffic_of(model, plan)
        return None if t is None else self.predict_traffic(t, plan, depth=depth, prompt=prompt, threads=threads,
                                                           gpus=gpus)

    def predict_traffic(self, t: Traffic, plan: Any, *, depth: int = 0, prompt: int = 512,
                        threads: int | None = None, gpus: Sequence[PlanDevice] | None = None) -> Prediction:
        return predict(t, self.calibration, threads=threads or self.threads, depth=depth, prompt_tokens=prompt,
                       peaks=self.peaks(gpus_of_plan(plan) if gpus is None else gpus))


def plan_traffic_of(model: Any, plan: Any) -> Traffic | None:
    """core.speed.traffic of a plan, None for a model it cannot read (an architecture without its fields)."""
    try:
        return traffic(model, plan)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        log.info("no traffic for %s: %s", model.path, exc)
        return None


def load_basis(engine: Any, *, server: Path | None = None) -> SpeedBasis:
    """The basis of predictions here (the store, NVML and the binary's identity: call it off the GUI thread)."""
    build, driver, _ = calibration_identity(server)
    stored = SpeedCalibrationRepo(engine).latest(build, driver) if build else None
    return SpeedBasis(stored.calibration if stored else None, stored.id if stored else None, build, driver,
                      host_info().cores_physical or 4, nvml_gbps(str(server) if server else None))


def predict_plan(model: Any, plan: Any, engine: Any, *, depth: int = 0, prompt: int = 512) -> dict[str, Any] | None:
    """The predicted speed of a plan with llama.cpp's default thread count and the history's calibration of the
    build in use (defaults, said so, without one), as JSON with its `text`; None when it cannot be predicted."""
    pr = load_basis(engine).predict(model, plan, depth=depth, prompt=prompt)
    return None if pr is None else {**pr.to_json(), "text": pr.text()}


def predict_run(run: Any, basis: SpeedBasis, gpus: Sequence[PlanDevice] = (), *,
                cpu_flags: Sequence[str] = ()) -> list[RunPrediction]:
    """The speed model's prediction for each prompt length of a stored run, at the depths of its measurement
    (`run_measurements`' rule); [] for a run it cannot predict (no model file, speculative decoding, ...)."""
    ms, _skipped = run_measurements([run], gpus, cpu_flags=cpu_flags, default_threads=basis.threads)
    out: dict[int, dict[str, Prediction]] = {}
    for m in ms:
        prompt = int(m.label.split(" prompt ")[1].split()[0])
        kind = "gen" if m.gen_tps else "prefill"
        out.setdefault(prompt, {})[kind] = predict(m.traffic, basis.calibration, threads=m.threads, depth=m.depth,
                                                   prompt_tokens=m.prompt_tokens, peaks=basis.peaks(gpus))
    return [RunPrediction(n, p["gen"], p["prefill"]) for n, p in sorted(out.items()) if len(p) == 2]


# -- a benchmark run refines the calibration ----------------------------------------------------------------
def stored_run_measurements(engine: Any, server: Path | None, gpus: Sequence[PlanDevice], cpu_flags: Sequence[str],
                            threads: int, *, limit: int = 500, quiet_only: bool = False,
                            ) -> tuple[list[Measurement], list[str]]:
    """The history's runs made with `server` (by path: runs do not record a build hash) as measurements, and why
    the others were left out."""
    runs = RunRepository(engine).list_runs(limit=limit)
    mine = [r for r in runs if server is not None and r.binary_path and Path(r.binary_path) == Path(server)]
    ms, skipped = run_measurements(mine, gpus, cpu_flags=cpu_flags, default_threads=threads, quiet_only=quiet_only)
    skipped += [f"run {r.id}: made with another llama-server ({r.binary_path})" for r in runs if r not in mine]
    return ms, skipped


def run_count(ms: Sequence[Measurement]) -> int:
    return len({m.label.split(" prompt")[0] for m in ms})


def runs_said(ms: Sequence[Measurement]) -> str:
    """'1 stored run', '3 stored runs': the runs the measurements come from, as a calibration's source says."""
    n = run_count(ms)
    return f"{n} stored run{'s' if n != 1 else ''}"


def refine_from_runs(prior: SpeedCalibration, ms: Sequence[Measurement], *, build: str, driver: str,
                     peaks: dict[str, tuple[float, str]] | None = None) -> tuple[SpeedCalibration | None, list[str]]:
    """`prior` moved as little as stored runs that cannot determine every cost require
    (core.speed.calibrate.refine), kept under this build and driver, its source the prior's (without its stored
    runs) + these runs. Its expected error is the larger of the runs' and the prior's: a refined calibration
    reproduces the runs it was refined on. (None, []) when no cost could be refined."""
    head = STORED_RUNS.sub("", prior.source) if prior.costs else ""  # what runs did not give
    cal, refined = refine(prior, ms, source=" + ".join(x for x in (head, runs_said(ms)) if x), peaks=peaks)
    if not refined:
        return None, []
    on_runs = with_error(replace(cal, build=build, driver=driver, error=None, server_runs=run_count(ms)), ms)
    return replace(on_runs, error=max(on_runs.error or 0.0, prior.error or 0.0)), refined


def refit_from_runs(engine: Any, basis: SpeedBasis, *, server: Path | None = None, gpus: Sequence[PlanDevice] = (),
                    cpu_flags: Sequence[str] = (), run_id: int | None = None) -> tuple[SpeedBasis, str]:
    """Refine this build's probe calibration (the newest no server run has refined) on every stored run of
    `server` (the app's llama-server by default) and keep the result as this build's newest calibration
    (calibrate_on_runs; each refit starts again from the probe, so refits do not compound). Returns the new
    basis and what was done, in words (the basis unchanged when no stored run can be used). `run_id`: the run
    just made, whose exclusion (a busy machine, ...) is said."""
    if server is None:
        loc = binaries.locate(binaries.SERVER)
        server = loc.path if loc is not None else None
    if not basis.build:
        return basis, "The calibration was not refined: the llama-server's build is not known"
    ms, skipped = stored_run_measurements(engine, server, gpus, cpu_flags, basis.threads, quiet_only=True)
    left_out = next((why.partition(": ")[2] for why in skipped if why.startswith(f"run {run_id}:")), None)
    if left_out:
        return basis, f"This run does not refine the calibration: {left_out}"
    if not ms:
        return basis, "The calibration was not refined: no stored single-client run of this llama-server"
    probe = SpeedCalibrationRepo(engine).latest(basis.build, basis.driver, probe_only=True)
    prev = probe.calibration if probe is not None else None
    cal, short = calibrate_on_runs(prev, ms, build=basis.build, driver=basis.driver,
                                   peaks=device_peaks(gpus, basis.nvml_gbps))
    n = run_count(ms)
    if cal is None and not short:  # every cost they involve is held (set by hand, or measured as 0)
        return basis, "The calibration was not refined: the stored runs involve no cost it can move"
    if cal is None:
        tell = f"{runs_said(ms)} tell" if n > 1 else "1 stored run tells"
        return basis, (f"The calibration was not refined yet: {tell} apart only {short} (runs of other "
                       "models, prompt lengths, depths or thread counts add more); "
                       "`llm-tuner estimate --speed --calibrate` measures them all at once")
    cal_id = SpeedCalibrationRepo(engine).save(cal)
    new = SpeedBasis(cal, cal_id, basis.build, basis.driver, basis.threads, basis.nvml_gbps)
    if short or (prev is not None and prev.costs):
        moved = sum(1 for k, v in cal.costs.items() if prev is None or prev.costs.get(k) != v)
        apart = f"they tell apart only {short}; " if short else ""
        return new, (f"This run refined the calibration: {moved} of its costs moved as little as "
                     f"{runs_said(ms)} require{'s' if n == 1 else ''} ({apart}±{cal.error or 0:.0%} on them)")
    return new, f"This run refined the calibration: now fitted over {n} stored run{'s' if n > 1 else ''} " \
                f"(±{cal.error or 0:.0%} on them)"


def calibrate_on_runs(prev: SpeedCalibration | None, ms: Sequence[Measurement], *, build: str, driver: str,
                      peaks: dict[str, tuple[float, str]] | None = None) -> tuple[SpeedCalibration | None, str]:
    """The calibration that stored runs give on top of `prev` (a probe's, or None), as `refit_from_runs` keeps
    it: `prev` moved as little as the runs require (core.speed.calibrate.refine), whether or not they
    determine every cost; without a `prev` (or where it and the defaults lack a cost the runs involve: an RPC
    device, a GPU of unknown bandwidth) the costs the runs determine are fitted over them. Returns
    (calibration, the systems the runs do not determine, in words: "" when they determine all); (None, ...)
    when nothing could be refined. Pure: the offline replays (benchmarks/replay_gpu_speed.py,
    benchmarks/refit_subsets.py) call it as the app does."""
    ok, short = determined(ms)
    lacking = prev is None or not prev.costs or any(
        resolve_cost(key, prev, threads, peaks)[0] is None
        for m in ms for eq in rows(m) for key, threads in map(split_key, eq))
    if not ok or not lacking:
        # move the previous calibration as little as the runs require: where they do not determine every cost a
        # free fit would put the whole time on whichever costs it liked, and where they do but barely (a tune's
        # dozen runs: every K/V on the GPU, two thread counts) its costs need not hold for other placements - on
        # the lent H100 (2026-12-07) a free fit over a tune's 12 runs predicted the grid's other cells with a
        # generation error of 17-18 % median and 118-137 % max; this refinement, 2.4-9.4 % and 28-38 %
        refined_cal, _ = refine_from_runs(prev or SpeedCalibration(), ms, build=build, driver=driver, peaks=peaks)
        return refined_cal, short
    head = STORED_RUNS.sub("", prev.source) if prev is not None and prev.costs else ""  # what runs did not give
    runs = fit(ms, build=build, driver=driver)
    keep = prev if prev is not None and head else SpeedCalibration()
    costs = {**keep.costs, **runs.costs}
    threads = tuple(sorted({*keep.threads, *runs.threads}))
    by_hand = tuple(k for k in keep.by_hand if k not in runs.costs)
    source = " + ".join(x for x in (head, runs_said(ms)) if x)
    return with_error(SpeedCalibration(costs, {**keep.peaks_gbps, **runs.peaks_gbps}, build, driver, source, None,
                                       threads, by_hand, run_count(ms)), ms), ""
