"""How close core.memory's instant estimate is to what llama.cpp really allocates (issue 4 targets).

For each configuration the REAL llama-server is started with `-lv 4 -fit off --port 0`, stopped once it
listens, and its buffer lines (`load_tensors: ... model buffer size`, `llama_kv_cache: ... KV buffer
size`, `llama_context: ... output buffer size`, `sched_reserve: ... compute buffer size`) are summed per
device and kind (core.memory_log.parse_memory_log). Our estimate (core.memory.plan_memory with the same
arguments) is printed beside them. Targets: weights and KV within 1% (or 4 MiB), compute within 10%,
device totals (weights + KV + output + compute) within 2%.

Models: the demo model (Gemma 3 270M Q4_K_M: SWA, 262k vocabulary, tied output) and random-weight
qwen3 (dense, Q4_0 so the CPU repacks it), qwen3moe and qwen35 (hybrid gated delta net + MTP) models written with the `gguf` package
(tests/support/random_gguf.py, tests/support/random_hybrid.py).

CPU build (what CI has): every buffer is on the host. `-ngl`, `-ot ...=CPU` and `--cpu-moe` still
change which buffer each weight lands in (CPU_Mapped vs CPU_REPACK, and the mmap range), but the
GPU side of a split cannot be seen; the `--cuda` matrix checks that on a GPU build.

Run here:
    .venv/bin/python benchmarks/memory_accuracy.py > benchmarks/results/memory_accuracy/memory_accuracy_cpu.txt
On the lent GPU with a CUDA build of llama-server (same commit):
    .venv/bin/python benchmarks/memory_accuracy.py --cuda --server /path/to/llama-server \\
        > benchmarks/results/memory_accuracy/memory_accuracy_cuda.txt
`--cuda` runs the GPU matrix (full and partial -ngl, -ot FFN to CPU, -nkvo, q8_0/q4_0 KV, --cpu-moe,
two-GPU -ts when there are two GPUs) and measures the CUDA runtime overhead per device: memory used
by the process beyond llama.cpp's buffers (free before start minus free at exit minus buffers),
i.e. what core.memory.RUNTIME_BEYOND_LISTING_MIB holds (the breakdown's 'unaccounted' is RUNTIME_OVERHEAD_MIB).
Without a GPU, `--replay FILE` re-plans every configuration of a recorded --cuda result file with the
recorded devices and prints our CURRENT estimate beside the recorded llama.cpp buffers:
    for f in memory_accuracy_cuda_h200 memory_accuracy_cuda_virtual2; do
        .venv/bin/python benchmarks/memory_accuracy.py --replay tests/data/memory/cuda/$f.txt; echo; done \
        > benchmarks/results/memory_accuracy/memory_accuracy_cuda_replay.txt
(tests/unit/test_memory_cuda_replay.py asserts the same in CI; the replay and the targets are
tests/support/memory_replay.py. The replay of the first GPU session is in benchmarks/sessions/2026-11-29-h200/.)
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llm_tuner.core.memory import MIB, PlanDevice, parse_server_args, plan_memory
from llm_tuner.core.memory_log import MemoryLog, parse_memory_log
from llm_tuner.services.binaries import list_devices, locate, measure_server_memory
from llm_tuner.services.demo_model import find_demo_model
from llm_tuner.services.library import read_model
from tests.support.memory_replay import (
    KINDS,
    SPLIT,
    TOLERANCE,
    check,
    make_models,
    measured_lines,
    replay,
    within,
)


def cpu_flags() -> tuple[str, ...]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return tuple(line.split(":", 1)[1].split())
    return ()


def measured(log: MemoryLog, gpu_names: set[str]) -> dict[str, dict[str, float]]:
    return measured_lines([(b.kind, b.buffer, b.mib) for b in log.buffers], gpu_names)


def cpu_matrix() -> list[tuple[str, list[str]]]:
    return [
        ("demo", []),
        ("demo", ["-c", "4096"]),
        ("demo", ["-c", "8192", "-np", "1"]),
        ("demo", ["-c", "8192", "-np", "2", "-fa", "off"]),
        ("demo", ["-c", "16384", "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on"]),
        ("demo", ["-c", "16384", "-ctk", "q4_0", "-ctv", "q4_0"]),
        ("demo", ["-c", "32768", "-ub", "2048", "-fa", "on"]),
        ("demo", ["-c", "32768", "-ub", "128", "-fa", "off"]),
        ("demo", ["-c", "8192", "--swa-full"]),
        ("demo", ["-c", "4096", "-np", "8", "-kvu"]),
        ("demo", ["-c", "16384", "-b", "256", "-ub", "256"]),
        ("demo", ["-c", "8192", "-lm", "none"]),
        ("demo", ["-np", "2", "-fit", "on"]),
        ("demo", ["-c", "4096", "-md", "{demo}", "--spec-type", "draft-simple"]),
        ("dense", []),
        ("dense", ["-c", "8192", "-np", "1", "-fa", "off"]),
        ("dense", ["-c", "16384", "-ctk", "q8_0", "-ctv", "q8_0", "-ub", "1024"]),
        ("dense", ["-c", "4096", "-ngl", "3"]),
        ("dense", ["-c", "4096", "-ot", r"blk\.(1|3|5)\.ffn_.*=CPU"]),
        ("dense", ["-c", "4096", "--no-repack"]),
        ("moe", []),
        ("moe", ["-c", "8192", "--cpu-moe"]),
        ("moe", ["-c", "8192", "-ncmoe", "3", "-np", "2"]),
        ("moe", ["-c", "4096", "-ot", r"blk\.[0-2]\.ffn_(up|gate)_exps=CPU", "-fa", "off"]),
        ("tied", ["-c", "4096"]),
        ("tied", ["-c", "2048", "-np", "1", "-ub", "2048"]),
        # less common settings (checked after the model was fitted on the rows above)
        ("demo", ["--embeddings", "-c", "4096"]),
        ("demo", ["-c", "8192", "-ctk", "q4_0", "-ctv", "f16"]),
        ("demo", ["-c", "4096", "-ctk", "f32", "-ctv", "f32", "-fa", "off"]),
        ("demo", ["-c", "100000", "-np", "1"]),
        ("dense", ["-c", "4096", "-b", "512", "-ub", "1024"]),
        ("dense", ["-np", "3", "-c", "5000"]),
        ("moe", ["-fa", "off", "-ub", "1024", "-c", "4096"]),
        ("tied", ["-c", "2048", "-ub", "64", "-b", "64"]),
        ("hybrid", []),
        ("hybrid", ["-c", "8192", "-np", "2", "-fa", "off"]),
        ("hybrid", ["-c", "4096", "-np", "3", "-fa", "off"]),
        ("hybrid", ["-c", "8192", "-np", "1", "--spec-type", "draft-mtp"]),
        ("hybrid", ["-c", "4096", "-ctk", "q8_0", "-ctv", "q8_0", "--spec-type", "draft-mtp", "--spec-draft-n-max", "2"]),
        ("gemma", ["-c", "8192"]),
        ("gemma", ["-c", "8192", "--swa-full", "-np", "2"]),
    ]


def cuda_matrix(n_gpus: int, split_only: bool = False) -> list[tuple[str, list[str]]]:
    rows = [] if split_only else [
        ("demo", ["-c", "32768", "-ngl", "99"]),
        ("demo", ["-c", "32768", "-ngl", "10"]),
        ("demo", ["-c", "32768", "-ngl", "99", "-nkvo"]),
        ("demo", ["-c", "32768", "-ngl", "99", "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on"]),
        ("demo", ["-c", "32768", "-ngl", "99", "-ctk", "q4_0", "-ctv", "q4_0", "-fa", "on"]),
        ("demo", ["-c", "32768", "-ngl", "99", "-fa", "off", "-ub", "1024"]),
        ("dense", ["-ngl", "99"]),
        ("dense", ["-ngl", "5"]),
        # the KV/FA rows again on a model that exists on the GPU machine (the demo model cannot travel there)
        ("dense", ["-c", "32768", "-ngl", "99", "-nkvo"]),
        ("dense", ["-c", "32768", "-ngl", "99", "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on"]),
        ("dense", ["-c", "32768", "-ngl", "99", "-ctk", "q4_0", "-ctv", "q4_0", "-fa", "on"]),
        ("dense", ["-c", "32768", "-ngl", "99", "-fa", "off", "-ub", "1024", "-np", "2"]),
        ("dense", ["-ngl", "99", "-ot", r"blk\.(1|3|5)\.ffn_.*=CPU"]),
        ("dense", ["-np", "1", "-lm", "none", "-ngl", "4"]),
        ("moe", ["-ngl", "99"]),
        ("moe", ["-ngl", "99", "--cpu-moe"]),
        ("moe", ["-ngl", "99", "-ncmoe", "3"]),
        ("tied", ["-ngl", "99"]),
        ("tied", ["-ngl", "4"]),
        ("hybrid", ["-ngl", "99", "-c", "16384"]),
        ("hybrid", ["-ngl", "99", "-c", "16384", "--spec-type", "draft-mtp"]),
        ("hybrid", ["-ngl", "5", "-c", "16384"]),
        ("gemma", ["-ngl", "99", "-c", "32768"]),
        ("gemma", ["-ngl", "99", "-c", "32768", "--swa-full"]),
        ("gemma", ["-ngl", "6", "-c", "16384", "-np", "2"]),
        ("gemma", ["-ngl", "99", "-c", "32768", "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on"]),
    ]
    if n_gpus >= 2:
        rows += [
            ("dense", ["-ngl", "99", "-ts", "1,1"]),
            ("dense", ["-ngl", "99", "-ts", "3,1", "-np", "2"]),
            ("dense", ["-ngl", "99", "-sm", "tensor", "-fa", "on"]),
            ("moe", ["-ngl", "99", "-ts", "1,2", "-dev", "CUDA0,CUDA1"]),
            # issue 8: the split sweep users make (50/50, 40/60, 25/75), with and without -ot, layer and row
            ("dense", ["-ngl", "99", "-dev", "CUDA0,CUDA1", "-sm", "layer", "-ts", "50,50"]),
            ("dense", ["-ngl", "99", "-dev", "CUDA0,CUDA1", "-sm", "layer", "-ts", "40,60"]),
            ("dense", ["-ngl", "99", "-dev", "CUDA0,CUDA1", "-sm", "layer", "-ts", "25,75"]),
            ("dense", ["-ngl", "99", "-dev", "CUDA0,CUDA1", "-ts", "40,60", "-ot", r"blk\.(0|3|6)\.ffn_.*=CPU"]),
            ("dense", ["-ngl", "99", "-dev", "CUDA0,CUDA1", "-sm", "row", "-ts", "40,60"]),
            ("moe", ["-ngl", "99", "-dev", "CUDA0,CUDA1", "-ts", "25,75", "--cpu-moe"]),
            ("moe", ["-ngl", "99", "-dev", "CUDA0,CUDA1", "-ts", "40,60", "-ot", r"blk\.[0-2]\.ffn_(up|gate)_exps=CPU"]),
        ]
    return rows


def print_replay(path: Path, models: dict[str, Path]) -> int:
    rows = replay(path, models)
    print(f"# replay of {path.name}: core.memory's CURRENT estimate vs the recorded llama.cpp buffers "
          f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
    print(f"# command: .venv/bin/python benchmarks/memory_accuracy.py --replay {path}")
    print("# tolerance: weights/KV 1% or 4 MiB, output 1% or 1 MiB, compute 10% or 8 MiB, totals 2% or 8 MiB")
    print("# columns: ours/llama.cpp MiB per kind; 'ok' when within tolerance")
    fails = {k: 0 for k in (*KINDS, "total")}
    checked = {k: 0 for k in (*KINDS, "total")}
    last = None
    for row in rows:
        key = (row["model"], tuple(row["extra"]))
        if key != last:
            print(f"\n## {row['model']} {' '.join(row['extra']) or '(defaults)'}")
            last = key
        res = check(row)
        cells = []
        for k in (*KINDS, "total"):
            o = sum(row["ours"].values()) if k == "total" else row["ours"][k]
            r = sum(row["real"].values()) if k == "total" else row["real"][k]
            if o or r:
                checked[k] += 1
                fails[k] += 0 if res[k] else 1
            cells.append(f"{k} {o:.1f}/{r:.1f} {'ok' if res[k] else 'XX'}")
        print(f"  {row['device']:6} " + "  ".join(cells))
    print("\n# summary (outside tolerance / checked)")
    for k in (*KINDS, "total"):
        print(f"  {k:8} {fails[k]}/{checked[k]}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server", type=Path, help="llama-server to measure (default: the one llm-tuner finds)")
    ap.add_argument("--cuda", action="store_true", help="run the GPU matrix and measure runtime overhead")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--only", help="run only configurations of this model (demo, dense, moe, tied, hybrid, gemma)")
    ap.add_argument("--split-only", action="store_true",
                    help="with --cuda: only the rows that split over two devices (e.g. GGML_CUDA_DEVICES=2 on one GPU)")
    ap.add_argument("--replay", type=Path,
                    help="no server: re-plan every configuration of a recorded result file (e.g. the CUDA ones) "
                         "and print our current estimate beside the recorded llama.cpp buffers")
    args = ap.parse_args()
    if args.replay:
        with tempfile.TemporaryDirectory(prefix="llm-tuner-mem-") as tmp:
            models = make_models(Path(tmp))
            demo = find_demo_model()
            if demo is not None:
                models["demo"] = demo
            return print_replay(args.replay, models)

    server = args.server or (locate("llama-server").path if locate("llama-server") else None)
    if server is None:
        print("llama-server not found", file=sys.stderr)
        return 2
    demo = find_demo_model()
    if demo is None:
        print("# demo model not found (python -m llm_tuner.services.demo_model assembles it): demo rows skipped")
    flags = cpu_flags()
    gpus_found = list_devices(server)
    gpus = [PlanDevice(d.name, d.backend, d.memory_total_mib, d.memory_free_mib, d.description,
                       free_includes_runtime=True) for d in gpus_found]
    gpu_names = {g.name for g in gpus}
    print(f"# memory accuracy: core.memory estimate vs llama-server -lv 4 buffers ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
    print(f"# command: .venv/bin/python benchmarks/memory_accuracy.py {' '.join(sys.argv[1:])}")
    print(f"# server: {server}")
    print(f"# host: {platform.machine()} {platform.processor() or ''} cpu flags incl. "
          f"{' '.join(f for f in ('avx2', 'avx512f', 'neon', 'asimddp', 'i8mm') if f in flags)}; "
          f"GPUs: {', '.join(f'{g.name} {g.description} {g.capacity_mib} MiB' for g in gpus) or 'none'}")
    print("# targets: weights and KV within 1% or 4 MiB, compute within 10%, device totals within 2% "
          "(absolute floors for tiny buffers: output 1 MiB, compute 8 MiB, totals 8 MiB; TOLERANCE)")
    print("# columns: ours/llama.cpp MiB per kind; 'ok' when within target")
    with tempfile.TemporaryDirectory(prefix="llm-tuner-mem-") as tmp:
        models = make_models(Path(tmp))
        if demo is not None:
            models["demo"] = demo
        infos = {k: read_model(v) for k, v in models.items()}
        matrix = cuda_matrix(len(gpus), args.split_only) if args.cuda else cpu_matrix()
        if args.only:
            matrix = [m for m in matrix if m[0] == args.only]
        matrix = [m for m in matrix if m[0] in models and (demo is not None or "{demo}" not in " ".join(m[1]))]
        fails = {"model": 0, "kv": 0, "compute": 0, "total": 0}
        checked = {"model": 0, "kv": 0, "compute": 0, "total": 0}
        worst = {"model": 0.0, "kv": 0.0, "compute": 0.0, "total": 0.0}
        overheads: list[tuple[str, float]] = []
        times_ms: list[float] = []
        for name, extra in matrix:
            extra = [x.replace("{demo}", str(demo)) for x in extra]
            argv = ["-m", str(models[name]), "-fit", "off", "-t", args.threads, *extra]
            free_before = {d.name: d.memory_free_mib for d in (list_devices(server) if args.cuda else [])}
            run = measure_server_memory(server, argv, timeout=300)
            log = parse_memory_log(run.log)
            if not run.loaded:
                tail = " | ".join(run.log.strip().splitlines()[-3:])
                print(f"\n## {name} {' '.join(extra)}: server did not load ({tail[:300]})")
                continue
            real = measured(log, gpu_names)
            pargs = parse_server_args(argv)
            t0 = time.perf_counter()
            draft = read_model(pargs.draft_model) if pargs.draft_model else None
            plan = plan_memory(infos[name], pargs, gpus, PlanDevice("Host", "CPU", None), cpu_flags=flags,
                               draft_model=draft)
            ms = (time.perf_counter() - t0) * 1000
            times_ms.append(ms)
            print(f"\n## {name} {' '.join(extra) or '(defaults)'}   [n_ctx {log.context.get('n_ctx')} "
                  f"ours {plan.n_ctx}; estimate {ms:.1f} ms]")
            print(f"  {'device':8} {'weights':>19} {'KV':>19} {'output':>15} {'compute':>21} {'total':>21}")
            # -sm row logs one *_Split buffer (compared as a whole); -sm tensor logs Meta(...) per device
            real_split = SPLIT in real
            split_mib = sum(v for d in plan.devices for k, v in d.buffers.items()
                            if k.endswith("_Split")) if real_split else 0.0
            for dev in [*(g.name for g in gpus), SPLIT, "Host"]:
                ours = plan.device(dev)
                r = real.get(dev, {k: 0.0 for k in KINDS})
                if dev == SPLIT:
                    if not split_mib and not any(r.values()):
                        continue
                    o = {"model": split_mib, "kv": 0.0, "output": 0.0, "compute": 0.0}
                elif ours is None and not any(r.values()):
                    continue
                else:
                    own_split = sum(v for k, v in ours.buffers.items()
                                    if k.endswith("_Split")) if ours and real_split else 0.0
                    o = {"model": (ours.model_mib - own_split) if ours else 0.0, "kv": ours.kv_mib if ours else 0.0,
                         "output": ours.output_mib if ours else 0.0, "compute": ours.compute_mib if ours else 0.0}
                o_tot = sum(o.values())
                r_tot = sum(r.values())
                cells = []
                for kind, (pct, ab) in ((k, TOLERANCE[k]) for k in KINDS):
                    good = within(o[kind], r[kind], pct, ab)
                    if kind in fails and (o[kind] or r[kind]):
                        checked[kind] += 1
                        fails[kind] += 0 if good else 1
                        if r[kind]:
                            worst[kind] = max(worst[kind], abs(o[kind] / r[kind] - 1) * 100)
                    w = 21 if kind == "compute" else (15 if kind == "output" else 19)
                    cells.append(f"{o[kind]:.1f}/{r[kind]:.1f} {'ok' if good else 'XX'}".rjust(w))
                good_t = within(o_tot, r_tot, *TOLERANCE["total"])
                checked["total"] += 1
                fails["total"] += 0 if good_t else 1
                if r_tot:
                    worst["total"] = max(worst["total"], abs(o_tot / r_tot - 1) * 100)
                cells.append(f"{o_tot:.1f}/{r_tot:.1f} {'ok' if good_t else 'XX'}".rjust(21))
                print(f"  {dev:8} " + " ".join(cells))
                if dev != "Host" and args.cuda and dev in free_before:
                    row = next((b for b in log.breakdown if b.name == dev), None)
                    if row is not None and row.free_mib is not None and free_before[dev] is not None:
                        overhead = free_before[dev] - row.free_mib - row.self_mib
                        overheads.append((dev, overhead))
                        print(f"  {dev:8} runtime overhead beyond buffers: {overhead} MiB "
                              f"(free before {free_before[dev]}, at exit {row.free_mib}, buffers {row.self_mib}; "
                              f"breakdown 'unaccounted' {row.unaccounted_mib})")
            bufs = " ".join(f"{b.kind}:{b.buffer}={b.mib:.2f}" for b in log.buffers)
            print(f"  llama.cpp buffers: {bufs}")
            ours_bufs = " ".join(f"{d.name}:{k}={v:.2f}" for d in plan.devices for k, v in d.buffers.items())
            print(f"  our weight buffers: {ours_bufs}")
        print("\n# summary (checks failed / checked, worst relative error)")
        if times_ms:
            t = sorted(times_ms)
            print(f"  estimate time per plan: median {t[len(t) // 2]:.1f} ms, max {t[-1]:.1f} ms "
                  "(the max is a first call on a model, which builds its tensor view)")
        for k in ("model", "kv", "compute", "total"):
            print(f"  {k:8} {fails[k]}/{checked[k]} failed, worst {worst[k]:.1f}%")
        # the UI re-plans while a slider moves: time it on a big synthetic table (64-layer MoE)
        from tests.unit.test_memory import make_model

        big = make_model(n_layer=64, n_expert=64)
        a = parse_server_args(["-m", "x", "-ngl", "99", "-ot", r"blk\.(1|2|3)\.ffn_.*=CPU"])
        gpu0 = [PlanDevice("CUDA0", "CUDA", 24576, 24000)]
        plan_memory(big, a.with_(ctx=4096), gpu0, cpu_flags=flags)
        ts = []
        for i in range(100):
            t0 = time.perf_counter()
            plan_memory(big, a.with_(ctx=4096 + 256 * i), gpu0, cpu_flags=flags)
            ts.append((time.perf_counter() - t0) * 1000)
        ts.sort()
        print(f"  slider timing: {len(big.tensors)}-tensor MoE, 100 plans with -c changing: median {ts[50]:.2f} ms, "
              f"p95 {ts[95]:.2f} ms")
        if overheads:
            vals = sorted(v for _, v in overheads)
            print(f"  runtime overhead per GPU: median {vals[len(vals) // 2]} MiB, range {vals[0]}..{vals[-1]} MiB "
                  "(this is core.memory.RUNTIME_BEYOND_LISTING_MIB; the breakdown 'unaccounted' is RUNTIME_OVERHEAD_MIB)")
    _ = MIB, os
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
