#!/usr/bin/env python3
"""Replay a lent-GPU speed session (benchmarks/sessions/2026-12-06-gpu-speed, or --session) offline, through the
code path placement_vs_grid.py used (services.tune.speed.SpeedOracle.guess), and tabulate the speed model's errors.

- the calibration: rebuilt from the costs the session's dense.txt or moe.txt printed (`# calibration: ... costs: key value, ...`, 4
  significant digits: the replay reproduces the recorded predictions to about that precision);
- the devices: CUDA0 as `--list-devices` listed it under the holder (free MiB), the host from host.txt (its CPU
  flags decide which weights ggml-cpu repacks);
- the models: the GGUF headers under headers/ (a session without them: 2026-12-06's, the same driver's models),
  restored as sparse files (a plan reads only the header); the
  recorded argv's model path is mapped to them;
- every run of logs/{dense,moe}/runs.jsonl: its argv through SpeedOracle.guess (objective gen_tps, prompt 2048,
  64 generated), the recorded prediction beside it, and the measured medians.

    python3 benchmarks/replay_gpu_speed.py [--session benchmarks/sessions/2026-12-07-gpu-speed]
        [--out benchmarks/results/speed_model/gpu-h100-2026-12-06.md]
        [--before FILE.json]   # a previous replay's JSON (--json) to print a before/after table against
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FIRST = ROOT / "benchmarks" / "sessions" / "2026-12-06-gpu-speed"
SESSION = FIRST  # --session
PROMPT, GEN = 2048, 64
DEFAULT_THREADS = 16  # the host's physical cores (llama.cpp's default -t)


def restore(d: Path) -> dict[str, Path]:
    """The two models as sparse files: the recorded header, then a hole to the file's size."""
    out = {}
    for name in ("dense", "moe"):
        p = d / f"{name}-q4_k_m.gguf"
        headers = SESSION / "headers" if (SESSION / "headers").is_dir() else FIRST / "headers"
        with open(p, "wb") as f:
            f.write((headers / f"{name}.head").read_bytes())
            f.truncate(int((headers / f"{name}.head.size").read_text()))
        out[f"/tmp/m/{name}-q4_k_m.gguf"] = p
    return out


def one_process_read_gbps() -> float:
    """host.txt's read-bandwidth probe of one process (numpy, GB/s): what one CPU thread streams from memory."""
    return float(
        re.search(r"read bandwidth, 1 process: ([\d.]+) GB/s", (SESSION / "host.txt").read_text()).group(1)
    )


# The session's probe fitted the CPU's attention while generating per GFLOP (speed model version 2); version 3
# costs it per million K/V head-cells. Both probe models attend 4 query heads of 128 a K/V head (driver.sh: 32/8
# and 16/4 heads): 4 FLOPs x 4 x 128 = 2048 a head-cell, so a version-2 cost converts exactly.
V2_FLOPS_PER_HEAD_CELL = 4 * 4 * 128


def calibration(link: str = "recorded"):
    """The session's calibration from the costs dense.txt printed. `link`: "recorded" (the probe's fitted host->GPU
    cost), or "host-1proc": one CPU thread's read rate from host.txt (the weights are mmap'd, i.e. pageable: the
    CUDA driver stages a pageable copy through a pinned buffer with one CPU thread's memcpy)."""
    from llm_tuner.core.speed import SpeedCalibration
    from llm_tuner.core.speed.predict import GB, MCELLS

    line = next(
        ln for name in ("dense.txt", "moe.txt") if (SESSION / name).exists()
        for ln in (SESSION / name).read_text().splitlines() if ln.startswith("# calibration:")
    )
    src = re.search(r"# calibration: (.*?), -ngl", line).group(1)
    err = float(re.search(r"±([\d.]+) %", line).group(1)) / 100
    costs = {k: float(v) for k, v in (kv.rsplit(" ", 1) for kv in line.split("costs: ", 1)[1].split(", "))}
    for k in costs:
        # the first session's are per GFLOP (speed model version 2), now per million head-cells
        if SESSION == FIRST and k.startswith("attn_gen:"):
            costs[k] *= V2_FLOPS_PER_HEAD_CELL * MCELLS / GB
    threads = tuple(sorted({int(k.rsplit("@", 1)[1]) for k in costs if "@" in k}))
    build = re.search(r"build (\S+),", line).group(1)
    driver = re.search(r"driver (\S+);", line).group(1)
    if link == "host-1proc":
        costs["link"] = 1 / one_process_read_gbps()
        src += f" (link: host.txt's one-process read rate, {one_process_read_gbps()} GB/s)"
    return SpeedCalibration(costs, {}, build, driver, src, err, threads)


def devices(model: str):
    """CUDA0 under the holder (its `--list-devices` line in the model's .txt) and the host of host.txt."""
    from llm_tuner.core.devices import parse_list_devices
    from llm_tuner.core.memory import PlanDevice, listed_device

    text = (SESSION / f"{model}.txt").read_text()
    listed = re.search(r"# --list-devices under the holder: (.*)", text).group(1)
    gpus = [listed_device(d) for d in parse_list_devices("\n".join("  " + x for x in listed.split(" | ")))]
    host_txt = (SESSION / "host.txt").read_text()
    mem = re.search(r"^Mem:\s+(\d+)\s+\d+\s+\d+\s+\d+\s+\d+\s+(\d+)", host_txt, re.M)
    cpu = re.search(r"^Model name:\s+(.*)$", host_txt, re.M).group(1).strip()
    flags = tuple(re.search(r"^Flags:\s+(.*)$", host_txt, re.M).group(1).split())
    host = PlanDevice("Host", "CPU", int(mem.group(1)) * 1024, int(mem.group(2)) * 1024, cpu)
    return gpus, host, flags


def copy_terms(argv: list[str], gpus, host, flags, cal) -> tuple[float, float]:
    """(GB the model copies host->GPU per ubatch of the prompt, seconds per prompt token of everything else)."""
    from llm_tuner.core.speed.predict import terms
    from llm_tuner.services.speed import plan_traffic

    t = plan_traffic(argv, gpus, host, cpu_flags=flags)
    threads = threads_of(argv)
    _, pre = terms(t, depth=0, prompt_tokens=PROMPT)
    ub = max(1, min(t.n_ubatch, PROMPT))
    rest = sum(v * (cal.cost(k, threads)[0] or 0.0) for k, v in pre.items() if k != "link")
    return pre.get("link", 0.0) * ub, rest


def copy_section(rows: list[dict], gbps: float) -> list[str]:
    """How much of what the model copies per ubatch the measured prefill leaves time for, at `gbps`."""
    out = [
        "",
        f"## Host->GPU copies per ubatch: what the measured prefill leaves time for at {gbps} GB/s",
        "",
        "Per run: (measured time per ubatch − the model's other prefill terms) × the rate, over the bytes the model "
        "copies (host weights, all experts, plus the host layers' K/V). ~1: the copies explain the prefill.",
        "",
        "| model | runs | median | min | max |",
        "|---|---|---|---|---|",
    ]
    for model in ("dense", "moe"):
        fr = []
        for r in rows:
            if r["model"] == model and r["pre"] and r["copy_gb"]:
                ub_s = 512 / r["pre"] - 512 * r["rest_s"]
                fr.append(ub_s * gbps / r["copy_gb"])
        if fr:
            out.append(
                f"| {model} | {len(fr)} | {statistics.median(fr):.2f} | {min(fr):.2f} | {max(fr):.2f} |"
            )
    return out


def kind_of(argv: list[str]) -> str:
    return "explicit" if "--fit" in argv and argv[argv.index("--fit") + 1] == "off" else "--fit"


def kv_of(argv: list[str]) -> str:
    from llm_tuner.core import flags

    return flags.value_of(argv, "cache_type_k") or "f16"


def threads_of(argv: list[str]) -> int:
    """As the app reads a stored run's threads (any spelling of -t; before, `-t 8` of a calibration run read 16)."""
    from llm_tuner.services.speed import threads_of as app_threads_of

    return app_threads_of(argv, DEFAULT_THREADS)


def as_chosen(argv: list[str], fit_params: dict | None) -> list[str]:
    """A run left to --fit, placed as llama-fit-params chose for it (recorded by placement_vs_grid.py since
    2026-12-07): --fit-target dropped, the chosen -ngl/-ot appended with --fit off. Predicting on this isolates
    the speed model from the plan's emulation of --fit."""
    if not fit_params or kind_of(argv) == "explicit":
        return argv
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--fit-target", "-fitt", "--fit"):
            skip = True
        else:
            out.append(a)
    chosen = list(fit_params["args"])
    if "-c" in chosen:  # the run's own -c stays
        i = chosen.index("-c")
        del chosen[i : i + 2]
    return out + ["--fit", "off", *chosen]


def measurement(argv: list[str], r: dict, gpus, host, flags, label: str):
    """A run's generation and prefill as core.speed measurements, as services.speed.run_measurements makes them
    from a stored run (generation at the depth of its middle token)."""
    from llm_tuner.core.speed.calibrate import Measurement
    from llm_tuner.services.speed import plan_traffic

    t = plan_traffic(argv, gpus, host, cpu_flags=flags)
    prompt = int(statistics.median(r.get("prompt_n") or [PROMPT]))
    return [
        Measurement(t, threads_of(argv), 0, prompt, None, statistics.median(r["prefill"]),
                    f"{label} prompt {prompt} prefill"),
        Measurement(t, threads_of(argv), prompt + GEN // 2, prompt, statistics.median(r["gen"]), None,
                    f"{label} prompt {prompt} gen"),
    ]


def replay(link: str = "recorded", fit_chosen: bool = False, mode: str = "probe") -> list[dict]:
    """Every recorded run with its recorded and replayed prediction and its measured medians. `fit_chosen`: runs
    left to --fit are predicted on llama-fit-params' recorded choice instead of the plan's emulation of --fit.
    `mode`: "probe" (the probe's calibration alone, as the session predicted before its first server run),
    "baseline" (+ the server's per-token cost learned from the model's first tune baseline, as the tune does:
    SpeedOracle.learn_server_cost), "loo" (the probe refitted on the session's other command lines, both
    models, as a benchmark's refit does: services.speed.calibrate_on_runs; each command line held out)."""
    from llm_tuner.core.speed import SpeedCalibration
    from llm_tuner.core.tune import Objective
    from llm_tuner.services.speed import calibrate_on_runs
    from llm_tuner.services.tune.speed import SpeedOracle

    cal = calibration(link)
    objective = Objective(kind="gen_tps", prompt_tokens=PROMPT, gen_tokens=GEN)
    rows = []
    with tempfile.TemporaryDirectory(prefix="replay-h100-") as tmp:
        paths = restore(Path(tmp))
        runs = []  # (model, record, argv as predicted, devices)
        for model in ("dense", "moe"):
            if not (SESSION / "logs" / model / "runs.jsonl").exists():
                continue
            gpus, host, flags = devices(model)
            for line in (SESSION / "logs" / model / "runs.jsonl").read_text().splitlines():
                r = json.loads(line)
                argv = [str(paths.get(a, a)) for a in r["argv"]]
                if fit_chosen:
                    argv = as_chosen(argv, r.get("fit_params"))
                runs.append((model, r, argv, (gpus, host, flags)))
        ms = {
            i: measurement(argv, r, *dev, f"{model} {r['n']}")
            for i, (model, r, argv, dev) in enumerate(runs) if r["gen"] and r["prefill"]
        }
        oracles: dict[str, SpeedOracle] = {}
        one = None
        if mode == "probe+1":
            probed = re.search(r"probe of (\w+)-", cal.source).group(1)
            one = next(i for i, b in enumerate(runs) if b[0] == probed and b[1]["label"].startswith("tune")
                       and i in ms)
            c, _ = calibrate_on_runs(cal, ms[one], build=cal.build, driver=cal.driver)
            cal = c or cal
        served: dict[str, SpeedCalibration] = {}
        if mode == "server-cal":  # each model's probe refined on its own calibration server runs, as recorded
            for model in {b[0] for b in runs}:
                mine = [m for i, mm in ms.items() if runs[i][0] == model and runs[i][1]["label"] == "calibrate"
                        for m in mm]
                if not mine:
                    sys.exit(f"--mode server-cal: {model} has no 'calibrate' runs (placement_vs_grid.py "
                             "--calibrate-server records them)")
                c, _ = calibrate_on_runs(cal, mine, build=cal.build, driver=cal.driver)
                served[model] = c or cal
        for model, r, argv, (gpus, host, flags) in runs:
            if one is not None and r["argv"] == runs[one][1]["argv"]:
                continue
            if mode == "server-cal" and r["label"] == "calibrate":
                continue
            if mode == "loo":
                others = [m for j, mm in ms.items() if runs[j][1]["argv"] != r["argv"] for m in mm]
                c, _ = calibrate_on_runs(cal, others, build=cal.build, driver=cal.driver)
                oracle = SpeedOracle(objective, c or cal, gpus, host, flags, DEFAULT_THREADS)
            else:
                if model not in oracles:
                    oracles[model] = SpeedOracle(objective, served.get(model, cal), gpus, host, flags,
                                                 DEFAULT_THREADS)
                    if mode == "baseline":
                        base = next(b for b in runs if b[0] == model and b[1]["label"].startswith("tune")
                                    and b[1]["gen"])
                        oracles[model].learn_server_cost(base[2], None, statistics.median(base[1]["gen"]))
                oracle = oracles[model]
            g = oracle.guess(argv)
            rec = r["predicted"] or {}
            copy_gb, rest_s = copy_terms(argv, gpus, host, flags, cal)
            rows.append(
                {
                    "model": model,
                    "n": r["n"],
                    "label": r["label"],
                    "kind": kind_of(r["argv"]),
                    "kv": kv_of(r["argv"]),
                    "threads": threads_of(r["argv"]),
                    "what": " ".join(r["argv"][4:]),
                    "rec_gen": rec.get("gen_tps"),
                    "rec_pre": rec.get("prefill_tps"),
                    "gen_pred": g.gen_tps if g else None,
                    "pre_pred": g.prefill_tps if g else None,
                    "gen": statistics.median(r["gen"]) if r["gen"] else None,
                    "pre": statistics.median(r["prefill"]) if r["prefill"] else None,
                    "gen_spread": spread(r["gen"]),
                    "copy_gb": copy_gb,
                    "rest_s": rest_s,
                }
            )
    return rows


def spread(reps: list[float]) -> float | None:
    """(max - min) / median of one run's repetitions: the issue's 'cell's spread'."""
    return (max(reps) - min(reps)) / statistics.median(reps) if reps and statistics.median(reps) else None


def beyond_allowance(rows: list[dict]) -> tuple[list[dict], int]:
    """The runs whose generation error exceeds issue 42's per-cell allowance, max(25 %, 2x the run's spread), and
    how many runs were judged."""
    judged = [r for r in rows if err(r["gen_pred"], r["gen"]) is not None]
    return [r for r in judged if abs(err(r["gen_pred"], r["gen"])) > max(0.25, 2 * (r.get("gen_spread") or 0))], \
        len(judged)


def starts_section() -> list[str]:
    """One placement started more than once (any label, calibration runs included): the same weights and K/V on
    the same devices (the -lv 4 buffer sizes) at the same thread count, measured at each start. What a speed model
    cannot predict better than."""
    import ast

    groups: dict[tuple, list[tuple[str, float]]] = {}
    for model in ("dense", "moe"):
        path = SESSION / "logs" / model / "runs.jsonl"
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if not r["gen"] or not r.get("memory"):
                continue
            memory = r["memory"] if isinstance(r["memory"], dict) else ast.literal_eval(r["memory"])
            buffers = memory.get("buffers") or {}
            key = (model, threads_of(r["argv"]), kv_of(r["argv"]), repr(buffers.get("model")), repr(buffers.get("kv")))
            groups.setdefault(key, []).append((f"{r['label']} {r['n']}", statistics.median(r["gen"])))
    out = ["", "## One placement, several starts (generation t/s: each start's median; the same buffers and threads)",
           "", "| model | threads | K/V | starts | gen t/s per start | between starts (max - min) / median |",
           "|---|---|---|---|---|---|"]
    for (model, t, kv, _m, _k), starts in sorted(groups.items()):
        if len(starts) < 2:
            continue
        g = [x for _, x in starts]
        out.append(f"| {model} | {t} | {kv} | {', '.join(n for n, _ in starts)} | "
                   f"{', '.join(f'{x:.1f}' for x in g)} | {100 * (max(g) - min(g)) / statistics.median(g):.0f} % |")
    return out


def err(p: float | None, m: float | None) -> float | None:
    return (p - m) / m if p and m else None


def pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:+.1f} %"


def summary(rows: list[dict], key: str) -> tuple[float, float, int]:
    e = [abs(x) for r in rows if (x := err(r[f"{key}_pred"], r[key])) is not None]
    return (statistics.median(e), max(e), len(e)) if e else (float("nan"), float("nan"), 0)


def session_name() -> str:
    try:
        return str(SESSION.relative_to(ROOT))
    except ValueError:
        return str(SESSION)


def report(rows: list[dict], before: list[dict] | None = None, source: str = "") -> str:
    out = [
        f"# Speed model vs the lent-GPU session {session_name()} (offline replay)",
        "",
        f"Calibration: {source}.",
        "",
        f"Replayed by `benchmarks/replay_gpu_speed.py` from {session_name()} (the "
        "calibration from the printed costs, CUDA0 under the holder, the models from their headers), through "
        "SpeedOracle.guess as placement_vs_grid.py predicted. Measured: the median of each run's 2 "
        "repetitions (prompt 2048 tokens, 64 generated).",
        "",
    ]
    dg = [abs(r["gen_pred"] - r["rec_gen"]) / r["rec_gen"] for r in rows if r["rec_gen"] and r["gen_pred"]]
    dp = [abs(r["pre_pred"] - r["rec_pre"]) / r["rec_pre"] for r in rows if r["rec_pre"] and r["pre_pred"]]
    out += [
        f"Replay vs the recorded predictions (same code as recorded only when the model is unchanged): "
        f"generation max |Δ| {100 * max(dg):.2f} %, median {100 * statistics.median(dg):.2f} %; prefill max "
        f"|Δ| {100 * max(dp):.2f} %, median {100 * statistics.median(dp):.2f} % over {len(dg)} runs.",
        "",
    ]
    out += [
        "## Summary (|error| median / max, runs)",
        "",
        "| model | placement | gen median | gen max | prefill median | prefill max | n |",
        "|---|---|---|---|---|---|---|",
    ]
    for model in ("dense", "moe", None):
        for kind in ("explicit", "--fit", None):
            sel = [
                r
                for r in rows
                if (model is None or r["model"] == model) and (kind is None or r["kind"] == kind)
            ]
            if not sel:
                continue
            gm, gx, n = summary(sel, "gen")
            pm, px, _ = summary(sel, "pre")
            b = ""
            if before is not None:
                bs = [
                    r
                    for r in before
                    if (model is None or r["model"] == model) and (kind is None or r["kind"] == kind)
                ]
                bgm, bgx, _ = summary(bs, "gen")
                bpm, bpx, _ = summary(bs, "pre")
                b = f" (before {100 * bgm:.1f} / {100 * bgx:.1f} · {100 * bpm:.1f} / {100 * bpx:.1f})"
            out.append(
                f"| {model or 'all'} | {kind or 'all'} | {100 * gm:.1f} % | {100 * gx:.1f} % | "
                f"{100 * pm:.1f} % | {100 * px:.1f} % | {n}{b} |"
            )
    out += [
        "",
        "Issue 42's goal: generation median ≤ 10 %, max ≤ 25 % (or 2× the cell's spread); prefill median ≤ 15 %, "
        "max ≤ 35 %.",
        "",
    ]
    beyond, judged = beyond_allowance(rows)
    out += [f"Generation beyond max(25 %, 2× the run's spread between its repetitions): {len(beyond)} of {judged} "
            "runs" + (": " + "; ".join(f"{r['model']} #{r['n']} {pct(err(r['gen_pred'], r['gen']))} (spread "
                                       f"{100 * (r.get('gen_spread') or 0):.0f} %, {r['threads']} threads)"
                                       for r in beyond) if beyond else "") + ".",
            *starts_section(),
            "",
            "## By model × placement × K/V × threads (mean signed error over the runs of the group)",
        "",
        "| model | placement | K/V | threads | runs | gen error | prefill error |"
        + (" gen before | prefill before |" if before else ""),
        "|---|---|---|---|---|---|---|" + ("---|---|" if before else ""),
    ]
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["model"], r["kind"], r["kv"], r["threads"]), []).append(r)
    bgroups: dict[tuple, list[dict]] = {}
    for r in before or []:
        bgroups.setdefault((r["model"], r["kind"], r["kv"], r["threads"]), []).append(r)

    def mean_err(sel: list[dict], key: str) -> float | None:
        e = [x for r in sel if (x := err(r[f"{key}_pred"], r[key])) is not None]
        return statistics.mean(e) if e else None

    for k in sorted(groups):
        sel = groups[k]
        line = f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {len(sel)} | {pct(mean_err(sel, 'gen'))} | {pct(mean_err(sel, 'pre'))} |"
        if before:
            bs = bgroups.get(k, [])
            line += f" {pct(mean_err(bs, 'gen'))} | {pct(mean_err(bs, 'pre'))} |"
        out.append(line)
    if "one-process read rate" in source:
        out += copy_section(rows, one_process_read_gbps())
    out += [
        "",
        "## Every run",
        "",
        "| model | # | run | recorded gen | replayed gen | measured gen | error | recorded prefill | replayed prefill "
        "| measured prefill | error |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    f = lambda x, d=1: "–" if x is None else f"{x:.{d}f}"  # noqa: E731
    for r in rows:
        out.append(
            f"| {r['model']} | {r['n']} | {r['label']}: {r['what'][:110]} | {f(r['rec_gen'])} | {f(r['gen_pred'])} | "
            f"{f(r['gen'])} | {pct(err(r['gen_pred'], r['gen']))} | {f(r['rec_pre'], 0)} | {f(r['pre_pred'], 0)} | "
            f"{f(r['pre'], 0)} | {pct(err(r['pre_pred'], r['pre']))} |"
        )
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="the report (markdown)")
    ap.add_argument("--json", help="write the replayed rows as JSON (a later --before)")
    ap.add_argument("--before", help="a previous replay's --json: before/after columns")
    ap.add_argument(
        "--link",
        choices=("recorded", "host-1proc"),
        default="recorded",
        help="the host->GPU copy cost: the probe's fitted one (recorded) or host.txt's one-process read "
        "rate (an independent measurement, not fitted to these runs)",
    )
    ap.add_argument("--session", help="the session folder (default: 2026-12-06-gpu-speed)")
    ap.add_argument(
        "--mode",
        choices=("probe", "baseline", "loo", "probe+1", "server-cal"),
        default="probe",
        help="the calibration each prediction rests on: the probe's alone (as recorded before the first server "
        "run); + the server's per-token cost from the model's first tune baseline (as the tune learns it); "
        "probe+1: the probe refined on one server run of the probe's model; server-cal: each model's probe refined "
        "on its own recorded calibration server runs (placement_vs_grid.py --calibrate-server), which are left "
        "out of the table; or loo: the probe refitted on the "
        "session's other command lines (leave one command line out, as a benchmark's refit does)",
    )
    ap.add_argument(
        "--fit-as-chosen",
        action="store_true",
        help="predict runs left to --fit on llama-fit-params' recorded choice (the session must have recorded "
        "it: 2026-12-07 on), not on the plan's emulation of --fit",
    )
    a = ap.parse_args()
    if a.session:
        global SESSION
        SESSION = Path(a.session).resolve()
        if not (SESSION / "host.txt").is_file() or not list(SESSION.glob("logs/*/runs.jsonl")):
            sys.exit(f"--session {a.session}: not a GPU speed session folder (it needs host.txt and "
                     "logs/<model>/runs.jsonl, as 2026-12-06-gpu-speed has)")
    rows = replay(a.link, a.fit_as_chosen, a.mode)
    before = json.loads(Path(a.before).read_text()) if a.before else None
    source = calibration(a.link).source
    source += {"probe": "", "baseline": "; + the server's per-token cost learned from each model's first tune "
               "baseline (SpeedOracle.learn_server_cost)", "loo": "; refitted on the session's other command "
               "lines, each held out (services.speed.calibrate_on_runs)", "probe+1": "; refined on one server run of the "
               "probe's model, its first tune baseline (services.speed.calibrate_on_runs); that command line is "
               "left out", "server-cal": "; refined, per model, on that model's own calibration server runs "
               "(placement_vs_grid.py --calibrate-server; services.speed.calibrate_on_runs), left out of the "
               "tables"}[a.mode]
    if a.fit_as_chosen:
        source += "; runs left to --fit predicted on llama-fit-params' recorded choice (not the plan's emulation)"
    text = report(rows, before, source)
    print(text)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(text)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=0))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
