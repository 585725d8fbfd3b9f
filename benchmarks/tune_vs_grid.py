"""Tune against a full grid over the same space (issue 13's performance goal).

Grid: every cell of the space (e.g. -ub {64,128,256,512} × -t {1,2} × -b {256,2048}), `--reps` repetitions each,
one server start per cell, through the benchmark runner. Tune: `llm-tuner tune`'s engine (TuneRunner) over the
same knobs, final comparison included. Server time = the wall time of every llama-server process either one
started, loads included (measured around each process's start and stop). Gap = the grid's best cell re-run
head to head (interleaved A B A B …, `--gap-rounds` per side) against the tuner's winner, compared with
core.stats.compare. Goal: the gap within noise (or under 3%) at ≤ 40% of the grid's server time.

The machine's busy figure is the median share of the CPU other processes used while requests ran (the runner's
OtherCpuMeter) and the load average.

Run (CPU, demo model, a few minutes):
    .venv/bin/python benchmarks/tune_vs_grid.py > benchmarks/results/tune_vs_grid/tune_vs_grid_cpu.txt
On a GPU host:
    .venv/bin/python benchmarks/tune_vs_grid.py --server PATH/llama-server --model M.gguf \
        --space "ub=256,512,1024,2048 b=512,2048,4096 kv=f16,q8_0" --base "-ngl 999 -c 8192" --objective prefill_tps

The speed model's pruning (issue 37):
- `--cpu-space`: threads × K/V type (CPU_SPACE) at each of `--depths`, generation t/s, on a random dense and a random
  MoE model (CPU_MODELS, written once into `--models-dir`): the app's calibration probe first (llama-bench, its time
  apart), then per model and depth the grid, the tune without pruning and the same tune with it, and the pruned
  tune's pick against the grid's best (interleaved). Checks: the pick within noise of the grid's best (core.stats),
  its server time ≤ 60 % of the unpruned tune's, no pruned candidate within noise of the grid's best.
  `--tune-repeats N` runs each tune N times (alternating which goes first) and judges the ratio of the totals: one
  tune's server time depends on whether the noise makes it top near-ties up to more repetitions.
      .venv/bin/python benchmarks/tune_vs_grid.py --cpu-space > benchmarks/results/tune_vs_grid/cpu_space_pruning.txt
- `--replay-gpu OUT.md`: the recorded H200 placement tunes replayed offline (no server): which starts the pruning
  would have saved, and that none of them was a race's winner or the judged best.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import os
import re
import shlex
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llm_tuner.core import flags  # noqa: E402
from llm_tuner.core.bench_report import pooled  # noqa: E402
from llm_tuner.core.stats import compare, median, summarize  # noqa: E402
from llm_tuner.core.tune import Objective, TuneSpec, apply_values, parse_knob, rep_scores  # noqa: E402
from llm_tuner.services import binaries  # noqa: E402
from llm_tuner.services.bench import BenchRunner, ServerTarget  # noqa: E402
from llm_tuner.services.bench import runner as runner_module  # noqa: E402
from llm_tuner.services.tune import TuneRunner  # noqa: E402
from llm_tuner.services.tune import checks as tune_checks  # noqa: E402
from llm_tuner.store.db import open_engine  # noqa: E402
from llm_tuner.store.runs import RunRepository  # noqa: E402
from llm_tuner.store.tunes import TuneRepository  # noqa: E402


class ServerClock:
    """Wall time of every llama-server process the runner starts (start() to the end of stop())."""

    total_s = 0.0
    starts = 0


class TimedServer(runner_module.ServerProcess):
    def start(self) -> None:
        self._t0 = time.monotonic()
        ServerClock.starts += 1
        super().start()

    def stop(self, *a, **kw):
        try:
            return super().stop(*a, **kw)
        finally:
            ServerClock.total_s += time.monotonic() - self._t0


runner_module.ServerProcess = TimedServer  # the runner's one start path, timed


class PplClock:
    """Wall time of the tune's llama-perplexity checks (counted apart from server time)."""

    total_s = 0.0
    runs = 0


def _timed_perplexity(fn):
    def wrapped(*a, **kw):
        t0 = time.monotonic()
        try:
            return fn(*a, **kw)
        finally:
            PplClock.total_s += time.monotonic() - t0
            PplClock.runs += 1
    return wrapped


tune_checks.perplexity = _timed_perplexity(tune_checks.perplexity)


# -- the recorded GPU tunes, replayed offline: which starts the speed model's pruning would have saved -------------
SPEED_SESSION = ROOT / "benchmarks" / "sessions" / "2026-12-05-speed-model"
_TRIAL = re.compile(r"^trial (\d+) (\w+) (\{.*?\})?\s*: (\w+)(?: ([\d.]+) \(n=\d+, (\d+) start\(s\)\))?(.*)$", re.M)


def replay_gpu(out: str | None, models_dir: str) -> int:
    """Each recorded placement tune (benchmarks/sessions/2026-12-02-h200-placement/) replayed through the tune's own
    pruning (core.tune.prune.speed_prune over services.tune.SpeedOracle's predictions): the calibration is the H200
    machine's -ngl series (benchmarks/results/speed_model/gpu-recorded.md), nothing of the run itself; each race's
    candidates (the placement race from the base, the threads race from the pick) as the run listed them. A pruned
    candidate would not have started: the starts it took in the run are saved (an estimate: the race after it may
    have run otherwise)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import speed_model as sm

    from llm_tuner.core.memory import PlanDevice
    from llm_tuner.core.tune.frontier import Planner, resolve_placement
    from llm_tuner.core.tune.prune import MIN_PRUNE, speed_prune
    from llm_tuner.services.library import read_model
    from llm_tuner.services.tune.speed import SpeedOracle

    d = Path(models_dir)
    sm.restore_headers(SPEED_SESSION / "s2" / "headers", d,
                       names=("demo", "dense-s", "dense-m", "moe-m", "h200-dense", "h200-moe"))
    cal = sm._gpu_calibration(SPEED_SESSION / "s1" / "raw", d)
    host = PlanDevice("Host", "CPU", 128 * 1024, 120 * 1024)
    objective = Objective(kind="gen_tps", prompt_tokens=256, gen_tokens=48)
    lines = ["# The recorded H200 placement tunes replayed with the speed model's pruning", "",
             f"Calibration: {cal.source} (no figure of the replayed runs); expected error: the recorded set's median "
             "9.1 % (benchmarks/results/speed_model/gpu-recorded.md), so a candidate is pruned when predicted more than "
             f"{100 * MIN_PRUNE:.0f} % behind the best prediction of its race (core.tune.prune.MIN_PRUNE). Objective: generation t/s "
             "(prompt 256, 48 generated). Predictions resting on a default cost (a K/V type of the host's attention "
             "that the -ngl series did not measure) prune nothing.", "",
             "| run | trial | race | candidate | measured | starts | predicted | calibrated | pruned | race winner | "
             "judged best |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    saved_all = starts_all = whole_all = 0
    bad: list[str] = []
    summary: list[str] = []
    for run in sm.RECORDED_RUNS:
        text = (sm.RECORDED_DIR / run).read_text()
        kind = "h200-dense" if run.startswith("dense") else "h200-moe"
        model_file = str(sm.model_path(d, kind))
        model = read_model(model_file)
        budget = int(re.search(r"CUDA0 \d+ of (\d+) MiB", text).group(1))
        gpus = [PlanDevice("CUDA0", "CUDA", sm.H200_MIB, budget)]
        planner = Planner(model, gpus, host, cpu_flags=sm.CPU_FLAGS, fill=(256 + 24) / 8192)
        oracle = SpeedOracle(objective, cal, gpus, host, sm.CPU_FLAGS, 16)
        base = ["-m", model_file, "-c", "8192"]
        trials = []
        for m in _TRIAL.finditer(text):
            values = ast.literal_eval(m.group(3)) if m.group(3) else {}
            trials.append({"n": int(m.group(1)), "knob": m.group(2), "values": values, "status": m.group(4),
                           "score": float(m.group(5)) if m.group(5) else None,
                           "starts": int(m.group(6)) if m.group(6) else (0 if m.group(4) == "failed" else 1)})
        total = sum(t["starts"] for t in trials)
        pick = next((t for t in trials if t["status"] == "final"), None)
        pick_place = (pick or {}).get("values", {}).get("placement")

        def argv_of(values, planner=planner, base=base):
            out = list(base)
            if values.get("placement"):
                out += list(resolve_placement(planner, base, values["placement"], 128).argv)
            if values.get("t"):
                out += ["-t", values["t"]]
            return tuple(out)

        races = {"placement": [t for t in trials if t["knob"] in ("baseline", "placement")],
                 "t": [t for t in trials if t["knob"] == "t"]}
        if races["t"]:  # the threads race: its candidates against the pick at the default threads
            inc = {"n": pick["n"] if pick else 0, "knob": "t", "values": {"placement": pick_place},
                   "status": "incumbent", "score": pick["score"] if pick else None, "starts": 0}
            races["t"] = [inc, *races["t"]]
        saved = 0
        for race, cands in races.items():
            if len(cands) < 2:
                continue
            guesses = {i: oracle.guess(argv_of(c["values"])) for i, c in enumerate(cands)}
            pruned = speed_prune(guesses, keep=0, what="generation t/s")
            for i, c in enumerate(cands):
                g = guesses[i]
                won = (race == "placement" and c["values"].get("placement") == pick_place and c["knob"] != "baseline"
                       ) or (race == "t" and c["status"] == "incumbent")
                judged = race == "placement" and won  # the judge measured the tune's pick against the grid's best
                if i in pruned:
                    saved += c["starts"]
                    if won or judged:
                        bad.append(f"{run} trial {c['n']}")
                label = "baseline" if c["knob"] == "baseline" else (
                    "pick at default threads" if c["status"] == "incumbent" else
                    ", ".join(f"{k}={v}" for k, v in c["values"].items() if k == race or race == "placement"))
                lines.append(f"| {run} | {c['n'] if c['status'] != 'incumbent' else '–'} | {race} | {label} | "
                             f"{'–' if c['score'] is None else format(c['score'], '.1f')} "
                             f"{'' if c['status'] in ('measured', 'final', 'incumbent') else '(' + c['status'] + ')'} | "
                             f"{c['starts']} | {'–' if g is None or g.score is None else format(g.score, '.1f')} | "
                             f"{'yes' if g is not None and g.calibrated else 'no'} | "
                             f"{'**yes**' if i in pruned else 'no'} | {'yes' if won else ''} | "
                             f"{'yes' if judged else ''} |")
        saved_all += saved
        starts_all += total
        whole = int(m.group(1)) if (m := re.search(r"^tune: \d+ trials · (\d+) starts", text, re.M)) else total
        whole_all += whole
        summary.append(f"| {run} | {whole} | {total} | {saved} | {whole - saved} ({100 * saved / max(1, whole):.0f} % "
                       "fewer) |")
    lines += ["", "| run | the tune's server starts (final comparison included) | of them racing candidates | "
                  "starts the pruning would have saved | left |", "|---|---|---|---|---|", *summary,
              f"| all | {whole_all} | {starts_all} | {saved_all} | {whole_all - saved_all} "
              f"({100 * saved_all / max(1, whole_all):.0f} % fewer) |", "",
              "Pruned starts that were a race's winner or the judged best: " + (", ".join(bad) if bad else "none") + "."]
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text)
    return 1 if bad else 0


# -- a CPU space where bytes and compute matter: threads × K/V type × depth, generation, the model's pruning ------------
CPU_MODELS = {  # small enough for a 2-core machine; written once with random weights (tests/support/random_gguf)
    "dense": ("dense", dict(n_layer=12, n_embd=768, n_ff=2048, n_head=12, n_head_kv=4, head_dim=64,
                            n_ctx_train=8192)),
    "moe": ("moe", dict(n_layer=8, n_embd=768, n_ff=2048, n_ff_exp=512, n_expert=16, n_expert_used=2, n_head=12,
                        n_head_kv=4, head_dim=64, n_ctx_train=8192)),
}
CPU_MODELS_LARGE = {  # `--cpu-shape large`, for a host with many cores (the lent machine's 16): ~4x the bytes a token
    "dense": ("dense", dict(n_layer=16, n_embd=1536, n_ff=4096, n_head=12, n_head_kv=4, head_dim=128,
                            n_ctx_train=16384)),
    "moe": ("moe", dict(n_layer=12, n_embd=1536, n_ff=4096, n_ff_exp=768, n_expert=32, n_expert_used=4, n_head=12,
                        n_head_kv=4, head_dim=128, n_ctx_train=16384)),
}
CPU_SPACE = "t=1,2 kv=f16,q8_0,q4_0"


def _cpu_models(d: Path, large: bool = False) -> dict[str, str]:
    from tests.support.random_gguf import write_qwen3_dense, write_qwen3_moe

    d.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, (kind, shape) in (CPU_MODELS_LARGE if large else CPU_MODELS).items():
        path = d / f"cpu-{name}{'-large' if large else ''}-q8_0.gguf"
        if not path.exists():
            writer = write_qwen3_dense if kind == "dense" else write_qwen3_moe
            writer(path, weight_type="Q8_0", embd_type="Q8_0", name=f"tune-vs-grid {name}", seed=1, **shape)
        out[name] = str(path)
    return out


def _calibrate(models: list[str], engine, threads: tuple[int, ...]) -> tuple[object, float]:
    """The app's own probe (llama-bench, services.speed.run_probe) on both models at these thread counts, with its
    error on its own cells (core.speed.calibrate.with_error), kept in the benchmark's history under the build and
    GPU driver the tune looks it up by (services.speed.calibration_identity); stops when the tune would not see it."""
    from llm_tuner.core.speed.calibrate import with_error
    from llm_tuner.services.speed import calibration_identity, run_probe
    from llm_tuner.services.telemetry.host import host_info
    from llm_tuner.services.tune.placement import server_path
    from llm_tuner.services.tune.speed import calibration_for
    from llm_tuner.store.speed import SpeedCalibrationRepo

    build, driver, _ = calibration_identity(server_path())
    t0 = time.monotonic()
    cal, ms = run_probe(models, threads, cpu_flags=tuple(host_info().cpu_flags), build=build, driver=driver)
    cal = with_error(cal, ms)
    SpeedCalibrationRepo(engine).save(cal)
    if calibration_for(engine, server_path()) is None:
        raise SystemExit(f"the probe's calibration (build {build}, driver {driver!r}) is not the one a tune finds")
    return cal, time.monotonic() - t0


def _grid(bench, base, knobs, objective, spec, reps):
    ServerClock.total_s, ServerClock.starts = 0.0, 0
    cells = [dict(zip([k.key for k in knobs], combo, strict=True)) for combo in
             itertools.product(*[k.values for k in knobs])]
    grid = []
    for values in cells:
        argv = apply_values(base, knobs, values)  # every cell runs, even those llama.cpp clamps to another
        run = bench.run(ServerTarget(argv=argv, label="grid"), spec.bench_spec(reps)).run
        s = median(rep_scores(run, objective))
        grid.append((s, values, argv, run))
        print(f"grid {values}: {s if s is None else round(s, 2)}", file=sys.stderr, flush=True)
    return grid, ServerClock.total_s, ServerClock.starts


def _as_grid_cell(values: tuple, knobs) -> tuple:
    """A tune's candidate (sorted (key, value) pairs; None: the flag absent) as the grid cell that runs the same
    command: absent threads are llama.cpp's default (the physical cores), absent K/V types f16."""
    from llm_tuner.services.tune.placement import physical_cores

    default = {"threads": str(physical_cores() or os.cpu_count() or 1), "cache_type_k+cache_type_v": "f16"}
    flag_of = {k.key: k.flag for k in knobs}
    return tuple(sorted((k, default.get(flag_of.get(k, ""), v) if v is None else v) for k, v in values))


def _gap(bench, spec, objective, best_argv, pick, rounds):
    """The grid's best cell against a tune's pick, interleaved A B A B, a fresh server each (core.stats.compare)."""
    a_runs, b_runs = [], []
    for _ in range(rounds):
        a_runs.append(bench.run(ServerTarget(argv=list(best_argv), label="grid best"), spec.bench_spec(1)).run)
        b_runs.append(bench.run(ServerTarget(argv=list(pick), label="tune pick"), spec.bench_spec(1)).run)
    return compare("score", rep_scores(pooled(a_runs), objective), rep_scores(pooled(b_runs), objective),
                   higher_is_better=True)


def _tune(engine, bench, spec):
    ServerClock.total_s, ServerClock.starts = 0.0, 0
    PplClock.total_s, PplClock.runs = 0.0, 0
    t0 = time.monotonic()
    result = TuneRunner(TuneRepository(engine), bench_runner=bench).run(spec, progress=lambda f, t: None)
    return (result, TuneRepository(engine).list_trials(result.tune_id), ServerClock.total_s, ServerClock.starts,
            PplClock.total_s, time.monotonic() - t0)


def cpu_space(args) -> int:
    """Per model and depth: the grid, the tune without the model's pruning, the same tune with it, and the pruned
    tune's pick against the grid's best (interleaved); the issue's three checks, printed and returned."""
    from llm_tuner.core.stats import NOISE
    from llm_tuner.core.tune.prune import trial_prediction

    models = _cpu_models(Path(args.models_dir), args.cpu_shape == "large")
    data = Path(tempfile.mkdtemp(prefix="tune-vs-grid-cpu-"))
    engine = open_engine(data / "h.sqlite")
    runs = RunRepository(engine)
    bench = BenchRunner(runs, predict_memory=False)
    load0 = os.getloadavg()
    print(f"# tune vs grid on the CPU, with and without the speed model's pruning · {time.strftime('%Y-%m-%d %H:%M')}"
          f" · {os.cpu_count()} CPUs · load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")
    threads = tuple(int(t) for t in args.probe_threads.split(","))
    cal, probe_s = _calibrate(list(models.values()), engine, threads)
    print(f"# calibration: {cal.source} at {threads} threads, {probe_s:.0f} s (llama-bench, not server time); its "
          f"error on its own cells (with_error): ±{100 * (cal.error or 0):.1f} %")
    print(f"# space: {args.cpu_knobs} × depth {args.combos or args.depths} · objective generation t/s (prompt {args.prompt_tokens}, "
          f"gen {args.gen_tokens}) · grid {args.reps} reps a cell · gap {args.gap_rounds} interleaved rounds")
    ok_all = True
    rows = []
    combos = ([(c.split(":")[0], int(c.split(":")[1])) for c in args.combos.split(",")] if args.combos else
              [(name, int(d)) for name in models for d in args.depths.split(",")])
    for name, depth in combos:
        model = models[name]
        objective = Objective(kind="gen_tps", prompt_tokens=args.prompt_tokens, gen_tokens=args.gen_tokens,
                              depth=depth)
        ctx = 256 * ((depth + args.prompt_tokens + args.gen_tokens + 255) // 256 + 1)
        base = [*flags.argv_for("model", model), *flags.argv_for("ctx_size", str(ctx))]
        knobs = [parse_knob(k) for k in args.cpu_knobs.split()]
        spec = TuneSpec(base_argv=tuple(base), objective=objective, knobs=tuple(knobs), budget_s=args.budget,
                        screen_reps=args.screen_reps, final_reps=args.final_reps, final_rounds=args.final_rounds,
                        label=f"{name} d{depth}")
        print(f"\n## {name} · depth {depth}")
        grid, grid_s, _ = _grid(bench, base, knobs, objective, spec, args.reps) if not args.tunes_only else ([], 0, 0)
        within = set()
        if grid:
            best_s, best_values, best_argv, best_run = max((g for g in grid if g[0] is not None), key=lambda g: g[0])
        for s_, values, _argv, run in grid:
            if s_ is None:
                continue
            c = compare("score", rep_scores(best_run, objective), rep_scores(run, objective),
                        higher_is_better=True)
            if c.verdict != "worse":
                within.add(tuple(sorted(values.items())))
            print(f"grid {values}: {s_:.2f}" + (" (within noise of the best)" if c.verdict != "worse" else ""))
        # The tune's server time depends on the noise (whether it tops near-ties up to more repetitions), so
        # with --tune-repeats each tune runs that many times, alternating which goes first; the ratio is of the
        # total server times (the mean's), every repeat printed.
        frees, pruneds = [], []
        for k in range(args.tune_repeats):
            order = (False, True) if k % 2 == 0 else (True, False)
            for prune in order:
                (pruneds if prune else frees).append(
                    _tune(engine, bench, spec.model_copy(update={"prune_by_speed": prune})))
        for label, tunes in (("without pruning", frees), ("with pruning", pruneds)):
            for k, (result, trials, srv_s, starts, ppl_s, _wall_s) in enumerate(tunes):
                of_grid = f" ({100 * srv_s / grid_s:.0f} % of the grid's {grid_s:.1f} s)" if grid_s else ""
                rep = f" (repeat {k + 1})" if len(tunes) > 1 else ""
                print(f"tune {label}{rep}: {len(trials)} trials · {starts} server starts · server time {srv_s:.1f} s"
                      f"{of_grid} · perplexity {ppl_s:.1f} s · verdict {result.verdict}")
                for t in trials:
                    pred, vs = trial_prediction(t.predicted, t.score)
                    print(f"  trial {t.seq} {t.knob or 'baseline'} {t.values}: {t.status}"
                          + (f" {t.score:.2f} (n={len(t.samples)})" if t.score is not None else "")
                          + f" · predicted {pred} · vs predicted {vs}"
                          + (f" · {t.reason.splitlines()[0][:150]}" if t.reason else ""))
        free_s, pruned_s = sum(t[2] for t in frees), sum(t[2] for t in pruneds)
        free_starts, pruned_starts = sum(t[3] for t in frees), sum(t[3] for t in pruneds)
        ratio = pruned_s / free_s if free_s else float("nan")
        picks = list(dict.fromkeys(tuple(t[0].searched_winner_argv) for t in pruneds))  # distinct, in order
        pruned_keys = list(dict.fromkeys(tuple(sorted(t.values.items())) for tune in pruneds for t in tune[1]
                                         if t.status == "pruned" and "speed model" in (t.reason or "")))
        each = (" (" + ", ".join(f"{p[2]:.0f}/{f[2]:.0f}" for p, f in zip(pruneds, frees, strict=True)) + " s per repeat)"
                if len(frees) > 1 else "")
        said_picks = "; ".join(" ".join(p[len(base):]) or "(baseline)" for p in picks)
        if args.tunes_only:  # no grid, no gap: the server time and what was pruned
            print(f"pick(s) of the pruned tune: {said_picks} · server time with pruning / without: {pruned_s:.1f} / "
                  f"{free_s:.1f} s = {100 * ratio:.0f} %{each} · pruned: {[dict(k) for k in pruned_keys]}")
            continue
        gaps = [_gap(bench, spec, objective, best_argv, list(p), args.gap_rounds) for p in picks]
        wrong = [dict(k) for k in pruned_keys if _as_grid_cell(k, knobs) in within]
        pick_ok = all(g.verdict != "worse" for g in gaps)
        time_ok = ratio <= 0.60
        ok = pick_ok and time_ok and not wrong
        ok_all &= ok
        print(f"pick(s) of the pruned tune: {said_picks} · grid best {best_values} {best_s:.2f}")
        for p, gap in zip(picks, gaps, strict=True):
            print(f"gap (pruned tune's pick {' '.join(p[len(base):]) or '(baseline)'} vs grid best, "
                  f"{args.gap_rounds} interleaved rounds): Δ {gap.delta_pct:+.1f} % [{_r(gap.ci_low_pct)}, "
                  f"{_r(gap.ci_high_pct)}] · {gap.verdict} -> {'met' if gap.verdict != 'worse' else 'NOT met'} "
                  "(within noise or better)")
        print(f"server time with pruning / without: {pruned_s:.1f} / {free_s:.1f} s = {100 * ratio:.0f} %{each} -> "
              f"{'met' if time_ok else 'NOT met'} (≤ 60 %)")
        print(f"pruned candidates: {[dict(k) for k in pruned_keys]}; of them within noise of the grid's best: "
              f"{wrong or 'none'} -> {'met' if not wrong else 'NOT met'}")
        said_gaps = "; ".join(f"{g.delta_pct:+.1f} % ({g.verdict})" for g in gaps)
        rows.append(f"| {name} | {depth} | {best_values} {best_s:.1f} | {said_picks} | {said_gaps} | "
                    f"{free_starts} / {pruned_starts} | {free_s:.0f} / {pruned_s:.0f} s = {100 * ratio:.0f} % | "
                    f"{len(pruned_keys)} ({len(wrong)} within noise of the best) | {'met' if ok else 'NOT met'} |")
    busy = summarize([r.other_cpu_pct for run in runs.list_runs(limit=10000) for r in run.reps])
    print("\n| model | depth | grid's best | pruned tune's pick | pick vs grid best | starts without / with pruning | "
          "server time without / with | pruned (of them within noise) | done-when |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\nbusy: other processes' CPU share median {busy.median if busy else float('nan'):.0f} % "
          f"(max {busy.max if busy else float('nan'):.0f} %) · load average {load0[0]:.2f} -> {os.getloadavg()[0]:.2f} "
          f"({os.cpu_count()} CPUs{'; ' + args.host_note if args.host_note else ''})")
    print(f"all done-when checks: {'met' if ok_all else 'NOT met'} ({NOISE!r} is core.stats' within-noise verdict)")
    return 0


def _r(x):
    return x if x is None else round(x, 1)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", help="llama-server (default: the configured/embedded one)")
    p.add_argument("--model", help="GGUF (default: the demo model)")
    p.add_argument("--space", default="ub=64,128,256,512 t=1,2 b=256,2048", help="knobs as `tune --knob` takes them")
    p.add_argument("--base", default="-c 512", help="other llama-server arguments of every cell")
    p.add_argument("--objective", default="prefill_tps")
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--gen-tokens", type=int, default=16)
    p.add_argument("--reps", type=int, default=3, help="grid repetitions per cell")
    p.add_argument("--screen-reps", type=int, default=2)
    p.add_argument("--final-reps", type=int, default=4)
    p.add_argument("--final-rounds", type=int, default=2)
    p.add_argument("--gap-rounds", type=int, default=5)
    p.add_argument("--budget", type=float, default=3600.0)
    p.add_argument("--replay-gpu", metavar="OUT.md", help="replay the recorded H200 placement tunes offline with the "
                   "speed model's pruning (no server started) and write the table")
    p.add_argument("--models-dir", default="/tmp/tune-vs-grid-models", help="--replay-gpu: where the recorded models' "
                   "headers are restored as sparse files")
    p.add_argument("--cpu-space", action="store_true", help=f"the CPU space {CPU_SPACE!r} × --depths on a random dense "
                   "and a random MoE model, the tune with and without the speed model's pruning (a calibration probe "
                   "first)")
    p.add_argument("--cpu-knobs", default=CPU_SPACE, help="--cpu-space: the knobs, as `tune --knob` takes them")
    p.add_argument("--cpu-shape", choices=("small", "large"), default="small",
                   help="--cpu-space: the random models' shapes (large: for a host with many cores)")
    p.add_argument("--host-note", default="", help="--cpu-space: a word on the host, printed with the busy figure")
    p.add_argument("--depths", default="0,1024", help="--cpu-space: the depths (tokens in the cache)")
    p.add_argument("--probe-threads", default="1,2", help="--cpu-space: the probe's thread counts")
    p.add_argument("--tune-repeats", type=int, default=1, help="--cpu-space: run each tune (with and without "
                   "pruning) this many times, alternating which goes first; the server-time ratio is of the totals")
    p.add_argument("--tunes-only", action="store_true", help="--cpu-space: only the two tunes (no grid, no gap): "
                   "their server time and what the model pruned")
    p.add_argument("--combos", default="", help="--cpu-space: model:depth pairs in the order to run them (default: "
                   "each model at each of --depths), e.g. dense:2048,moe:0")
    args = p.parse_args()
    if args.tune_repeats < 1:
        p.error("--tune-repeats: at least 1")
    if args.combos and not re.fullmatch(r"(dense|moe):\d+(,(dense|moe):\d+)*", args.combos):
        p.error(f"--combos {args.combos!r}: give model:depth pairs, e.g. dense:2048,moe:0 (models: dense, moe)")
    if args.replay_gpu:
        return replay_gpu(args.replay_gpu, args.models_dir)
    if args.cpu_space:
        return cpu_space(args)

    if args.server:
        os.environ[binaries.ENV_VARS[binaries.SERVER]] = args.server
    model = args.model
    if model is None:
        from llm_tuner.services.demo_model import find_demo_model

        model = str(find_demo_model())
    knobs = [parse_knob(k) for k in args.space.split()]
    base = [*flags.argv_for("model", model), *shlex.split(args.base)]
    objective = Objective(kind=args.objective, prompt_tokens=args.prompt_tokens, gen_tokens=args.gen_tokens)
    data = Path(tempfile.mkdtemp(prefix="tune-vs-grid-"))
    engine = open_engine(data / "h.sqlite")
    runs = RunRepository(engine)
    bench = BenchRunner(runs, predict_memory=False)
    spec = TuneSpec(base_argv=tuple(base), objective=objective, knobs=tuple(knobs), budget_s=args.budget,
                    screen_reps=args.screen_reps, final_reps=args.final_reps,
                    final_rounds=args.final_rounds, label="tune")
    print(f"# tune vs grid · {time.strftime('%Y-%m-%d %H:%M')} · {os.cpu_count()} CPUs · model {Path(model).name}")
    print(f"# space: {args.space} · base: {args.base} · objective: {objective.describe()}")
    load0 = os.getloadavg()[0]

    # -- grid ----------------------------------------------------------------------------------------
    grid, grid_s, grid_starts = _grid(bench, base, knobs, objective, spec, args.reps)
    cells = grid
    best_s, best_values, best_argv, _ = max((g for g in grid if g[0] is not None), key=lambda g: g[0])

    # -- tune ------------------------------------------------------------------------------------------
    ServerClock.total_s, ServerClock.starts = 0.0, 0
    tuner = TuneRunner(TuneRepository(engine), bench_runner=bench)
    result = tuner.run(spec, progress=lambda f, t: None)
    tune_s, tune_starts = ServerClock.total_s, ServerClock.starts
    trials = TuneRepository(engine).list_trials(result.tune_id)
    searched = list(result.searched_winner_argv)

    # -- gap: grid's best cell against the tuner's pick, interleaved ---------------------------------------
    gap = _gap(bench, spec, objective, best_argv, searched, args.gap_rounds)
    busy = summarize([r.other_cpu_pct for run in runs.list_runs(limit=10000) for r in run.reps])
    for t in trials:  # what the tune did, trial by trial (pruned and failed with the reason)
        changed = {k: v for k, v in t.values.items() if v != trials[0].values.get(k)} if trials else {}
        print(f"trial {t.seq} {t.knob or 'baseline'} {changed or ''}: {t.status}"
              + (f" {t.score:.2f} (n={len(t.samples)}, {len(t.run_ids)} start(s))" if t.score is not None else "")
              + (f" · {t.reason.splitlines()[0][:160]}" if t.reason else "") + (" · flagged" if t.flagged else ""))

    print(f"grid: {len(cells)} cells × {args.reps} reps · {grid_starts} server starts · server time {grid_s:.1f} s "
          f"· best {best_values} = {best_s:.2f}")
    print(f"tune: {len(trials)} trials ({sum(t.status == 'measured' for t in trials)} measured) · {tune_starts} "
          f"server starts · server time {tune_s:.1f} s = {100 * tune_s / grid_s:.0f}% of the grid's · "
          f"verdict vs its baseline: {result.verdict}")
    print(f"tune pick: {' '.join(flags.mask_argv(searched[len(base):]) or ['(baseline)'])}; "
          f"kept after its final comparison: {'winner' if result.winner_argv != result.baseline_argv else 'baseline'}")
    main = next((c for c in result.comparisons if c.get("name") == result.objective_metric), None)
    if main:
        print(f"tune final: Δ {main['delta_pct']:+.1f}% [{main['ci_low_pct']:+.1f}, {main['ci_high_pct']:+.1f}] "
              f"n={main['a']['n']}/{main['b']['n']} · {result.note}")
    print(f"gap (tune pick vs grid best, {args.gap_rounds} interleaved rounds): Δ {gap.delta_pct:+.1f}% "
          f"[{gap.ci_low_pct if gap.ci_low_pct is None else round(gap.ci_low_pct, 1)}, "
          f"{gap.ci_high_pct if gap.ci_high_pct is None else round(gap.ci_high_pct, 1)}] · {gap.verdict}")
    print(f"goal: gap within noise or under 3% -> {'met' if gap.verdict != 'worse' or abs(gap.delta_pct) < 3 else 'NOT met'}; "
          f"server time ≤ 40% of the grid's -> {'met' if tune_s <= 0.4 * grid_s else 'NOT met'}")
    print(f"busy: other processes' CPU share median {busy.median if busy else float('nan'):.0f}% "
          f"(max {busy.max if busy else float('nan'):.0f}%) · load average {load0:.2f} -> {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
