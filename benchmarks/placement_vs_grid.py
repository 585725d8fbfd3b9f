"""A model bigger than the GPU: the tune against a placement grid and llama.cpp's defaults (issue 21's goal).

On a GPU host, for each free-memory size: a holder process takes all but N GiB of the GPU (PyTorch), so llama.cpp
(`--list-devices` "MiB free", `--fit`) and the tune see a small card. Then
- grid: every cell of K/V type {f16, q8_0, q4_0} × llama.cpp's fit margin -fitt {1024 (its default), 512, 256,
  128} × threads {default, half the physical cores}: what a user would try by hand (a cell that fails at start or
  at the first request is a failed cell), one server start per cell, `--grid-reps` repetitions;
- tune: `llm-tuner tune --objective gen_tps --only placement,t` (its own proposals: the placement frontier of the
  memory plan raced jointly with K/V types, then threads), final comparison included;
- judge: llama.cpp's defaults (the base), the grid's best cell and the tune's pick (what the search chose) in
  `--judge-rounds` interleaved rounds (A B C A B C …), a fresh server each, `--judge-reps` repetitions each.
Server time = wall time of every llama-server the grid or the tune started, loads included. Goal: the tune's pick
at least 90 % of the grid's best, better than the defaults wherever the grid is, in at most 40 % of the grid's
server time.

    python3 benchmarks/placement_vs_grid.py --server build/bin/llama-server --model m.gguf --free-gib 1.0,0.75

The tune prunes by the speed model (core.tune.prune) only with a calibration of this build and driver that covers
host memory: `--calibrate` runs the app's probe (llama-bench through services.speed.run_probe) with an `-ngl` series
on the whole GPU before any holder starts, and keeps it for the tune (a plain `llm-tuner estimate --calibrate` runs
every layer on the GPU, so the host's costs stay defaults and nothing is pruned); with `--history` the runs go to the
app's own history (LLM_TUNER_DATA_DIR), where a calibration kept earlier is found. `--no-speed-prune` races every
candidate (the same tune without pruning). `--calibrate-server 'm.gguf -ngl 12;m.gguf -ngl 12 -t 8'` then refines
the newest probe (this run's `--calibrate`, or one kept in the history: a second model of the same session) on those
llama-server runs (no holder yet) as the app's refit does: llama-bench alone predicted the
server's split placements ~30 % fast on the lent H100 (benchmarks/sessions/2026-12-07-gpu-speed).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from tune_vs_grid import ServerClock  # noqa: E402  (importing it times the runner's server starts)

from llm_tuner.core import flags  # noqa: E402
from llm_tuner.core.stats import BETTER, NOISE, compare, median  # noqa: E402
from llm_tuner.core.tune import Objective, TuneSpec, rep_scores  # noqa: E402
from llm_tuner.services import binaries  # noqa: E402
from llm_tuner.services.bench import BenchRunner, ServerTarget  # noqa: E402
from llm_tuner.services.settings_store import database_path  # noqa: E402
from llm_tuner.services.tune import SpeedOracle, TuneRunner, default_knobs  # noqa: E402
from llm_tuner.services.tune.placement import PlacementResolver, physical_cores  # noqa: E402
from llm_tuner.store.db import open_engine  # noqa: E402
from llm_tuner.store.runs import RunRepository  # noqa: E402
from llm_tuner.store.tunes import TuneRepository  # noqa: E402

HOLD = ("import torch, time, sys; f, t = torch.cuda.mem_get_info(); "
        "x = torch.empty(f - int(float(sys.argv[1]) * 2**30), dtype=torch.uint8, device='cuda'); "
        "print('held', (f - x.numel()) // 2**20, 'MiB free', flush=True); time.sleep(10**6)")


def hold_gpu(free_gib: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(free_gib)], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("held"):
        raise SystemExit(f"the GPU holder did not start: {line!r}")
    print(f"# holder: {line}", flush=True)
    return proc


def gpu_free() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=memory.used,memory.free", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip()
    except OSError as exc:
        return str(exc)


def score(run, objective) -> float | None:
    return median(rep_scores(run, objective))


FIT_LOG = ("common_params_fit_impl", "common_fit_params", "common_get_device_memory_data")  # fit's -lv 4 lines


def memory_record(lines) -> dict:
    """What a server's `-lv 4` log says about placement: every `... buffer size =` line summed per kind and
    buffer (core.memory_log), the offloaded layer count, and the lines of llama.cpp's fit step (LOG_TRC: printed
    from verbosity 4, GGML's INFO level maps to it too)."""
    from llm_tuner.core.memory_log import parse_memory_log

    log = parse_memory_log("\n".join(lines))
    buffers = {k: {b: round(v, 2) for b, v in log.by_buffer(k).items()}
               for k in ("model", "kv", "rs", "output", "compute")}
    return {"buffers": {k: v for k, v in buffers.items() if v},
            "offloaded_layers": list(log.offloaded_layers) if log.offloaded_layers else None,
            "fit_log": [ln.strip()[-240:] for ln in lines if any(f in ln for f in FIT_LOG)][:80]}


def fit_params_record(argv: list[str], binary: Path | None) -> dict | None:
    """llama-fit-params' answer for a run that leaves placement to llama.cpp's --fit (no -ngl/-ot/--n-cpu-moe, fit
    on): the `-c -ngl -ts -ot` it chooses on the devices as they are now (the holder still holding). None for a
    run placed explicitly."""
    from llm_tuner.core.memory import parse_server_args, placement_argv
    from llm_tuner.core.memory_log import parse_fitted_args
    from llm_tuner.services.binaries import BinaryError, run_fit_params

    pargs = parse_server_args(list(argv))
    if not pargs.fit or pargs.user_placed:
        return None
    if binary is None or not binary.exists():
        return {"error": "no llama-fit-params beside the server"}
    try:
        run = run_fit_params(binary, placement_argv(pargs, for_fit_params=True), timeout=300)
    except BinaryError as exc:
        return {"error": str(exc)}
    fitted = parse_fitted_args(run.stdout)
    if fitted is None:
        return {"error": (run.stderr.strip().splitlines() or ["(no output)"])[-1][:300]}
    return {"args": fitted.argv(), "ctx": fitted.ctx, "ngl": fitted.ngl, "overrides": list(fitted.overrides)}


class Recorder:
    """Every run the grid, the tune and the judge start: its server's log (`--logs DIR`) and one JSON line with the
    speed model's prediction beside the measured prefill and generation t/s of each repetition (issue 42's record,
    for offline replay). `oracle` is the size's SpeedOracle (None: nothing predicted). Each server runs at
    `verbosity` (4: its log keeps the buffer sizes and what --fit chose; None: as given), and for each run placed by
    --fit, `fit_params` (llama-fit-params) is asked what it chooses on the devices as they are (run by run, under
    the holder)."""

    def __init__(self, bench: BenchRunner, logs: Path | None, *, verbosity: int | None = 4,
                 fit_params: Path | None = None) -> None:
        self.bench, self.logs, self.oracle, self.size = bench, logs, None, ""
        self.verbosity, self.fit_params = verbosity, fit_params
        self.rows: list[dict] = []
        self._run = bench.run
        bench.run = self.run  # the tune's runner calls it too

    def run(self, target, spec, **kw):
        argv = list(target.argv)
        if self.verbosity is not None and not flags.has(argv, "verbosity"):
            target = dataclasses.replace(target, argv=[*argv, *flags.argv_for("verbosity", str(self.verbosity))])
        out = self._run(target, spec, **kw)
        n = len(self.rows) + 1
        guess = self.oracle.guess(argv, dict(target.env or {})) if self.oracle else None
        reps = [r for r in out.run.reps if r.error is None]
        row = {"n": n, "size": self.size, "label": target.label, "argv": argv, "status": out.run.status,
               "error": (out.run.error or "")[-300:] or None,
               "gen": [r.predicted_per_second for r in reps], "prefill": [r.prompt_per_second for r in reps],
               "prompt_n": [r.prompt_n for r in reps], "predicted": guess.to_json() if guess else None,
               "memory": memory_record(out.lines), "fit_params": fit_params_record(argv, self.fit_params)}
        self.rows.append(row)
        if self.logs is not None:
            self.logs.mkdir(parents=True, exist_ok=True)
            (self.logs / f"{n:03d}-{self.size}-{target.label.replace(' ', '_')}.log").write_text("\n".join(out.lines))
            with open(self.logs / "runs.jsonl", "a") as f:
                f.write(json.dumps(row) + "\n")
        return out

    def table(self, size: str) -> None:
        """Predicted against measured for this size's runs: per run, then the medians and maxima of |error|."""
        errs: dict[str, list[float]] = {"gen": [], "prefill": []}
        print(f"\n### predicted vs measured, free {size} GiB (prompt and generation t/s; median of the run's "
              "repetitions; spread = (max - min) / median of them)")
        print("| # | run | predicted gen | measured gen | error | spread | predicted prefill | measured prefill | error |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in (r for r in self.rows if r["size"] == size):
            p = r["predicted"] or {}
            cells = []
            for key, pk in (("gen", "gen_tps"), ("prefill", "prefill_tps")):
                m, pv = median(r[key]), p.get(pk)
                e = (pv - m) / m if m and pv else None
                if e is not None:
                    errs[key].append(abs(e))
                spread = (max(r[key]) - min(r[key])) / m if m and len(r[key]) > 1 else None
                cells.append((pv, m, e, spread))
            (pg, mg, eg, sg), (pp, mp, ep, _) = cells
            f = lambda x, d=1: "-" if x is None else f"{x:.{d}f}"  # noqa: E731
            pc = lambda x: "-" if x is None else f"{100 * x:+.1f} %"  # noqa: E731
            what = shlex.join(r["argv"][r["argv"].index("-c") + 2:] if "-c" in r["argv"] else r["argv"])
            print(f"| {r['n']} | {r['label']}: {what or '(base)'} | {f(pg)} | {f(mg)} | {pc(eg)} | "
                  f"{'-' if sg is None else f'{100 * sg:.0f} %'} | {f(pp, 0)} | {f(mp, 0)} | {pc(ep)} |")
        placed = [r for r in self.rows if r["size"] == size and (r.get("memory") or r.get("fit_params"))]
        if placed:
            print("\nwhat each run placed (llama-fit-params' choice for runs left to --fit; the server's -lv 4 "
                  "buffers, MiB; offloaded layers):")
            for r in placed:
                fp, mem = r.get("fit_params") or {}, r.get("memory") or {}
                chose = " ".join(fp["args"]) if fp.get("args") else fp.get("error", "")
                bufs = "; ".join(f"{k} " + ", ".join(f"{b} {v:.0f}" for b, v in d.items())
                                 for k, d in (mem.get("buffers") or {}).items())
                print(f"  {r['n']}: {('fit: ' + chose + ' · ') if chose else ''}{bufs or 'no buffer lines'}"
                      f" · offloaded {mem.get('offloaded_layers') or '-'}")
        for key, (med_t, max_t) in (("gen", (0.10, 0.25)), ("prefill", (0.15, 0.35))):
            e = errs[key]
            if e:
                print(f"{key}: |error| median {100 * median(e):.1f} %, max {100 * max(e):.1f} % over {len(e)} runs "
                      f"(issue 42: median ≤ {100 * med_t:.0f} %, max ≤ {100 * max_t:.0f} %) -> "
                      f"{'met' if median(e) <= med_t and max(e) <= max_t else 'NOT met'}")


def one_size(args, free_gib: float, base: list[str], bench: BenchRunner, engine, objective, rec: Recorder) -> dict:
    holder = hold_gpu(free_gib) if not args.no_hold else None
    try:
        print(f"\n## free {free_gib} GiB · nvidia-smi used/free: {gpu_free()}", flush=True)
        listed = subprocess.run([args.server, "--list-devices"], capture_output=True, text=True, timeout=120)
        print("# --list-devices under the holder: " + " | ".join(
            ln.strip() for ln in (listed.stdout + listed.stderr).splitlines() if ":" in ln and "MiB" in ln), flush=True)
        spec_for = TuneSpec(base_argv=tuple(base), objective=objective)
        # the devices as the holder left them: a --list-devices answer kept from before it (the calibration's,
        # binaries.LIST_DEVICES_MAX_AGE_S) planned the 2026-12-07-gpu-server-cal tunes on the whole GPU
        resolver = PlacementResolver(base, {}, margin_mib=args.headroom, fresh_devices=True)
        speed = SpeedOracle.for_tune(base, {}, objective, engine=engine, gpus=resolver.gpus)
        rec.oracle, rec.size = speed, str(free_gib)
        print(f"speed model: {speed.calibration.source if speed.calibration else 'no calibration (nothing pruned)'}",
              flush=True)
        half = max(1, (physical_cores() or 2) // 2)
        # -- grid ------------------------------------------------------------------------------------
        ServerClock.total_s, ServerClock.starts = 0.0, 0
        grid = []
        for kv, fitt, t in itertools.product(args.kv.split(","), args.fitt.split(","), (None, str(half))):
            argv = [*base, *flags.argv_for("cache_type_k", kv), *flags.argv_for("cache_type_v", kv),
                    *flags.argv_for("fit_target_mib", fitt), *(flags.argv_for("threads", t) if t else [])]
            run = bench.run(ServerTarget(argv=argv, label="grid"), spec_for.bench_spec(args.grid_reps)).run
            s = score(run, objective)
            grid.append((s, f"-ctk {kv} -ctv {kv} -fitt {fitt}" + (f" -t {t}" if t else ""), argv, run))
            print(f"grid {grid[-1][1]}: {'failed: ' + (run.error or '')[-160:].replace(chr(10), ' ') if s is None else round(s, 2)}",
                  flush=True)
        grid_s, grid_starts = ServerClock.total_s, ServerClock.starts
        ok = [g for g in grid if g[0] is not None]
        best_s, best_label, best_argv, _ = max(ok, key=lambda g: g[0])
        print(f"grid: {len(grid)} cells ({len(ok)} ran) × {args.grid_reps} reps · {grid_starts} starts · server "
              f"time {grid_s:.1f} s · best {best_label} = {best_s:.2f} t/s", flush=True)
        # -- tune --------------------------------------------------------------------------------------
        ServerClock.total_s, ServerClock.starts = 0.0, 0
        t0 = time.monotonic()
        knobs = [k for k in default_knobs(base, {}, objective=objective, resolver=resolver, speed=speed)
                 if k.key in ("placement", "t")]
        for k in knobs:
            print(f"tune knob {k.key}: {k.values} · {k.reason}", flush=True)
        for v in next((k.values for k in knobs if k.key == "placement"), ()):
            if v:
                print(f"  {resolver.placement(v).text()}", flush=True)
        spec = TuneSpec(base_argv=tuple(base), objective=objective, knobs=tuple(knobs), budget_s=args.budget,
                        headroom_mib=args.headroom, final_reps=args.final_reps, final_rounds=2, label="tune",
                        prune_by_speed=not args.no_speed_prune)
        result = TuneRunner(TuneRepository(engine), bench_runner=bench, resolver=resolver, speed=speed).run(
            spec, progress=lambda f, t: None)
        tune_s, tune_starts, tune_wall = ServerClock.total_s, ServerClock.starts, time.monotonic() - t0
        trials = TuneRepository(engine).list_trials(result.tune_id)
        for t in trials:
            print(f"trial {t.seq} {t.knob or 'baseline'} {({k: v for k, v in t.values.items() if v}) or ''}: "
                  f"{t.status}" + (f" {t.score:.2f} (n={len(t.samples)}, {len(t.run_ids)} start(s))"
                                   if t.score is not None else "")
                  + (f" · predicted {t.predicted.get('score')}" if t.predicted else "")
                  + (f" · {t.reason.splitlines()[0][:200]}" if t.reason else ""), flush=True)
        pick = list(result.searched_winner_argv)
        print(f"tune: {len(trials)} trials · {tune_starts} starts · server time {tune_s:.1f} s = "
              f"{100 * tune_s / grid_s:.0f}% of the grid's (wall {tune_wall:.0f} s, perplexity checks included) · "
              f"verdict {result.verdict} · {result.note}", flush=True)
        print(f"tune pick: {shlex.join(pick[len(base):]) or '(the base)'} · quality: {result.quality}", flush=True)
        # -- judge ---------------------------------------------------------------------------------------
        configs = {**({"defaults": base} if args.judge_defaults else {}), "grid best": best_argv, "tune pick": pick}
        runs: dict[str, list[float]] = {k: [] for k in configs}
        for r in range(args.judge_rounds):
            for name, argv in configs.items():
                run = bench.run(ServerTarget(argv=list(argv), label=f"judge {name}"), spec_for.bench_spec(args.judge_reps)).run
                runs[name] += rep_scores(run, objective)
                print(f"judge round {r + 1} {name}: {score(run, objective)}", flush=True)
        med = {k: median(v) for k, v in runs.items()}
        print("judge medians (gen t/s): " + ", ".join(f"{k} {v:.2f}" if v else f"{k} -" for k, v in med.items()))
        vs_best = compare("gen", runs["grid best"], runs["tune pick"], higher_is_better=True)
        ratio = (med["tune pick"] or 0) / (med["grid best"] or 1)
        print(f"tune pick vs grid best: {100 * ratio:.1f}% (Δ {vs_best.delta_pct:+.1f}% "
              f"[{vs_best.ci_low_pct or 0:+.1f}, {vs_best.ci_high_pct or 0:+.1f}], {vs_best.verdict})")
        if args.judge_defaults:
            vs_def = compare("gen", runs["defaults"], runs["tune pick"], higher_is_better=True)
            print(f"tune pick vs defaults: Δ {vs_def.delta_pct:+.1f}% ({vs_def.verdict})")
        speed_ok = ratio >= args.goal_ratio or vs_best.verdict in (NOISE, BETTER)
        met = speed_ok and tune_s <= args.goal_time * grid_s
        print(f"goal (≥ {100 * args.goal_ratio:.0f}% of the grid's best or within noise of it, ≤ "
              f"{100 * args.goal_time:.0f}% of its server time): {'met' if met else 'NOT met'}", flush=True)
        rec.table(str(free_gib))
        return {"free_gib": free_gib, "ratio": ratio, "server_pct": 100 * tune_s / grid_s, "met": met}
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()


def calibrate(args, engine) -> None:
    """The speed model's calibration of this build and driver on the whole GPU (run before any holder): the app's
    probe (K/V types crossed, depth 0 and 1024) at the default and half the threads, over an -ngl series so that
    host memory's costs are measured too; with its error on its own cells; kept in `engine`'s history."""
    from llm_tuner.core.speed.calibrate import with_error
    from llm_tuner.services.rpc import planned_gpus
    from llm_tuner.services.speed import calibration_identity, run_probe
    from llm_tuner.services.telemetry.host import host_info
    from llm_tuner.store.speed import SpeedCalibrationRepo

    server = Path(args.server)
    bench = server.with_name("llama-bench")
    build, driver, _ = calibration_identity(server)  # the key a tune looks the calibration up by
    cores = physical_cores() or 2
    t0 = time.monotonic()
    models = [m for m in args.calibrate_models.split(",") if m] or [args.model]
    cal, ms = run_probe(models, sorted({cores, max(1, cores // 2)}), bench_binary=str(bench),
                        gpus=planned_gpus(server, [*flags.argv_for("model", args.model)], {}),
                        cpu_flags=tuple(host_info().cpu_flags), build=build, driver=driver,
                        extra=["-ngl", args.calibrate_ngl], progress=lambda m: print(f"# {m}", flush=True))
    cal = with_error(cal, ms)
    SpeedCalibrationRepo(engine).save(cal)
    print(f"# calibration: {cal.source}, -ngl {args.calibrate_ngl}, {len(ms)} cells in {time.monotonic() - t0:.0f} s; "
          f"error on its own cells ±{100 * (cal.error or 0):.1f} %; build {build[:12]}, driver {driver or '-'}; costs: "
          + ", ".join(f"{k} {v:.4g}" for k, v in sorted(cal.costs.items())), flush=True)


def refine_on_server(args, engine, runner: BenchRunner, objective: Objective) -> None:
    """`--calibrate-server`: the newest probe of this build and driver (this run's `--calibrate` or one kept in
    the history) refined on those llama-server runs (one start each, the objective's prompt and generation, no
    holder yet) as the app's refit after a benchmark does (services.speed.calibrate_on_runs): llama-bench alone
    predicted the server's split placements ~30 % fast on the lent H100. The refined calibration is kept in
    `engine`'s history, where the grid's predictions and the tune find it."""
    from llm_tuner.services.rpc import planned_gpus
    from llm_tuner.services.speed import calibrate_on_runs, calibration_identity, run_measurements
    from llm_tuner.services.telemetry.host import host_info
    from llm_tuner.store.speed import SpeedCalibrationRepo

    server = Path(args.server)
    build, driver, _ = calibration_identity(server)
    stored = SpeedCalibrationRepo(engine).latest(build, driver, probe_only=True)
    if stored is None:
        raise SystemExit("--calibrate-server: no probe of this build and driver in the history (add --calibrate)")
    cal = stored.calibration
    gpus = planned_gpus(server, [*flags.argv_for("model", args.model)], {})
    served, clock0 = [], ServerClock.total_s
    for extra in (r for r in args.calibrate_server.split(";") if r.strip()):
        model, *rest = shlex.split(extra)
        argv = [*flags.argv_for("model", model), *shlex.split(args.base), *rest]
        spec = TuneSpec(base_argv=tuple(argv), objective=objective).bench_spec(args.grid_reps)
        served.append(runner.run(ServerTarget(argv=argv, label="calibrate"), spec).run)
        print(f"# calibration server run: {shlex.join(argv)}: {score(served[-1], objective)}", flush=True)
    sms, skipped = run_measurements(served, gpus, cpu_flags=tuple(host_info().cpu_flags),
                                    default_threads=physical_cores() or 2)
    for why in skipped:
        print(f"# calibration server run left out: {why}", flush=True)
    refined, short = calibrate_on_runs(cal, sms, build=build, driver=driver) if sms else (None, "")
    if refined is None:
        print("# refined calibration: none (no server run measured); the probe stays", flush=True)
        return
    SpeedCalibrationRepo(engine).save(refined)
    print(f"# refined calibration: {refined.source} ({len(served)} server runs, server time "
          f"{ServerClock.total_s - clock0:.1f} s, on {cal.source}"
          + (f"; they tell apart only {short}" if short else "") + "); costs: "
          + ", ".join(f"{k} {v:.4g}" for k, v in sorted(refined.costs.items())), flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", required=True, help="llama-server (a GPU build)")
    p.add_argument("--model", required=True)
    p.add_argument("--free-gib", default="1.0", help="free GPU memory sizes to test, comma separated")
    p.add_argument("--base", default="-c 8192", help="other llama-server arguments of every run")
    p.add_argument("--kv", default="f16,q8_0,q4_0")
    p.add_argument("--fitt", default="1024,512,256,128")
    p.add_argument("--prompt-tokens", type=int, default=256)
    p.add_argument("--gen-tokens", type=int, default=48)
    p.add_argument("--grid-reps", type=int, default=2)
    p.add_argument("--judge-rounds", type=int, default=3)
    p.add_argument("--judge-reps", type=int, default=2)
    p.add_argument("--final-reps", type=int, default=4)
    p.add_argument("--headroom", type=int, default=128)
    p.add_argument("--budget", type=float, default=240.0)
    p.add_argument("--no-hold", action="store_true", help="hold no GPU memory (a smoke run of the script on CPU)")
    p.add_argument("--history", action="store_true", help="store the runs in the app's history (LLM_TUNER_DATA_DIR): "
                   "the tune finds the speed calibration `llm-tuner estimate --calibrate` kept there and prunes by it")
    p.add_argument("--no-speed-prune", action="store_true", help="the tune races every candidate (no speed pruning)")
    p.add_argument("--calibrate", action="store_true", help="first (no holder): the speed probe with an -ngl series "
                   "(--calibrate-ngl) on --model, kept for the tune's pruning")
    p.add_argument("--calibrate-ngl", default="0,8,16,99", help="the probe's -ngl values (99: every layer)")
    p.add_argument("--calibrate-models", default="", help="the probe's models (comma separated, at most two; "
                   "default --model)")
    p.add_argument("--calibrate-server", default="", help="llama-server runs to refine the probe (this run's "
                   "--calibrate, or the newest kept in the history) on, ';'-separated, each 'MODEL [ARGS...]' (after --base), e.g. 'm.gguf -ngl 20;m.gguf -ngl 20 -t 8'; "
                   "printed as '# refined calibration:' after the probe's '# calibration:' line")
    p.add_argument("--judge-defaults", action="store_true", help="the judge also runs llama.cpp's defaults")
    p.add_argument("--goal-ratio", type=float, default=0.95, help="the pick's share of the grid's best (issue 42)")
    p.add_argument("--goal-time", type=float, default=0.25, help="the tune's share of the grid's server time")
    p.add_argument("--logs", default="", help="a folder for every server's log and runs.jsonl (predicted vs "
                   "measured per run)")
    p.add_argument("--server-verbosity", type=int, default=4, help="each server's -lv (4: buffer sizes and what "
                   "--fit chose are in its log and runs.jsonl; 0: as given)")
    args = p.parse_args()
    os.environ[binaries.ENV_VARS[binaries.SERVER]] = args.server
    base = [*flags.argv_for("model", args.model), *shlex.split(args.base)]
    objective = Objective(kind="gen_tps", prompt_tokens=args.prompt_tokens, gen_tokens=args.gen_tokens)
    engine = open_engine(database_path() if args.history else
                         Path(tempfile.mkdtemp(prefix="placement-grid-")) / "h.sqlite")
    bench = BenchRunner(RunRepository(engine), predict_memory=False)
    print(f"# placement tune vs grid · {time.strftime('%Y-%m-%d %H:%M')} · {os.cpu_count()} CPUs · "
          f"model {Path(args.model).name} ({Path(args.model).stat().st_size / 2**30:.2f} GiB) · base {args.base} · "
          f"{objective.describe()}", flush=True)
    if args.calibrate:
        calibrate(args, engine)
    rec = Recorder(bench, Path(args.logs) if args.logs else None, verbosity=args.server_verbosity or None,
                   fit_params=Path(args.server).with_name("llama-fit-params"))
    if args.calibrate_server:
        refine_on_server(args, engine, bench, objective)
    out = [one_size(args, float(f), base, bench, engine, objective, rec) for f in args.free_gib.split(",")]
    for o in out:
        print(f"summary free {o['free_gib']} GiB: tune pick {100 * o['ratio']:.0f}% of the grid's best at "
              f"{o['server_pct']:.0f}% of its server time · {'met' if o['met'] else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
