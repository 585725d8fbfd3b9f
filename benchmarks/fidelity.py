"""Benchmark fidelity: does the tool report what the server measured, and is an A/A comparison quiet?

1. Counters: start llama-server (with --metrics), scrape /metrics, let the benchmark runner measure
   cold requests (no warm-up, no priming) against it as an attached server, scrape again. The tool's
   figures (sums of the per-request `timings`, and the medians it reports) are compared with the
   server's own counters over the same requests: prompt_tokens_total / prompt_seconds_total and
   tokens_predicted_total / tokens_predicted_seconds_total. Target: equal within 0.5%.
2. A/A: PAIRS pairs of runs of the same settings (the server restarted for each run), compared with
   the A/B code: every metric should come out "within noise".
3. Optional A/B (on a GPU machine): `--ab "-ub 512" "-ub 2048"` runs both and records the verdicts.

    .venv/bin/python benchmarks/fidelity.py                         # demo model, CPU, -t 2
    .venv/bin/python benchmarks/fidelity.py --model M.gguf --server-args "-ngl 999 -fa on" \
        --prompt-tokens 512,4096 --gen-tokens 128 --reps 5 --pairs 1 \
        --ab "-ub 512" "-ub 2048" --llama-bench --out benchmarks/results/fidelity/fidelity_gpu.md

Writes a Markdown report (default benchmarks/results/fidelity/fidelity_cpu.md) and prints it.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llm_tuner.core.bench_report import (  # noqa: E402
    BUSY_CPU_PCT,
    busy_warning,
    compare_runs,
    llama_bench_gap,
    metric_samples,
)
from llm_tuner.core.bench_spec import BenchSpec  # noqa: E402
from llm_tuner.core.stats import NOISE, summarize  # noqa: E402
from llm_tuner.services import binaries  # noqa: E402
from llm_tuner.services.bench import BenchRunner, ServerTarget, scrape_metrics  # noqa: E402
from llm_tuner.services.client import LlamaClient  # noqa: E402
from llm_tuner.services.demo_model import find_demo_model  # noqa: E402
from llm_tuner.services.launch import free_port  # noqa: E402
from llm_tuner.services.server import ServerProcess  # noqa: E402
from llm_tuner.store.db import open_engine  # noqa: E402
from llm_tuner.store.runs import RunRepository  # noqa: E402


def pct(a: float, b: float) -> float:
    return 100.0 * (a - b) / b if b else float("nan")


def counters_check(model: str, extra: list[str], spec: BenchSpec, repo: RunRepository) -> list[str]:
    server = binaries.locate(binaries.SERVER)
    port = free_port()
    argv = [str(server.path), "-m", model, "--host", "127.0.0.1", "--port", str(port), "--metrics", "-np", "1",
            *extra]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
    proc = ServerProcess(argv, env)
    proc.start()
    url = f"http://127.0.0.1:{port}"
    try:
        with LlamaClient(url) as client:
            if not client.wait_ready(timeout=300, alive=proc.alive).ready:
                raise SystemExit("server did not start:\n" + "\n".join(list(proc.lines)[-20:]))
            before = scrape_metrics(client)
            run = BenchRunner(repo).run(ServerTarget(attached_url=url, label="fidelity (attached)",
                                                     argv=["-m", model, *extra]), spec).run
            after = scrape_metrics(client)
    finally:
        proc.stop()
    d = {k: after[k] - before.get(k, 0.0) for k in after}
    reps = [r for r in run.reps if r.error is None]
    tool_prompt_n = sum(r.prompt_n for r in reps)
    tool_prompt_s = sum(r.prompt_ms for r in reps) / 1000
    tool_gen_n = sum(r.predicted_n for r in reps)
    tool_gen_s = sum(r.predicted_ms for r in reps) / 1000
    srv_pp = d["prompt_tokens_total"] / d["prompt_seconds_total"]
    srv_tg = d["tokens_predicted_total"] / d["tokens_predicted_seconds_total"]
    tool_pp, tool_tg = tool_prompt_n / tool_prompt_s, tool_gen_n / tool_gen_s
    samples = metric_samples(run)
    lines = ["## 1. Tool figures vs the server's /metrics counters (same requests)", "",
             f"Run {run.id}: {run.spec.describe()}, status {run.status}, {len(reps)} requests.", "",
             "| Quantity | Tool (sum of per-request timings) | Server /metrics delta | Difference |",
             "|---|---:|---:|---:|",
             f"| prompt tokens | {tool_prompt_n} | {d['prompt_tokens_total']:.0f} | "
             f"{pct(tool_prompt_n, d['prompt_tokens_total']):+.3f}% |",
             f"| prompt seconds | {tool_prompt_s:.4f} | {d['prompt_seconds_total']:.4f} | "
             f"{pct(tool_prompt_s, d['prompt_seconds_total']):+.3f}% |",
             f"| prefill t/s (aggregate) | {tool_pp:.2f} | {srv_pp:.2f} | {pct(tool_pp, srv_pp):+.3f}% |",
             f"| generated tokens | {tool_gen_n} | {d['tokens_predicted_total']:.0f} | "
             f"{pct(tool_gen_n, d['tokens_predicted_total']):+.3f}% |",
             f"| generation seconds | {tool_gen_s:.4f} | {d['tokens_predicted_seconds_total']:.4f} | "
             f"{pct(tool_gen_s, d['tokens_predicted_seconds_total']):+.3f}% |",
             f"| generation t/s (aggregate) | {tool_tg:.2f} | {srv_tg:.2f} | {pct(tool_tg, srv_tg):+.3f}% |", ""]
    ok = all(abs(x) <= 0.5 for x in (pct(tool_pp, srv_pp), pct(tool_tg, srv_tg),
                                     pct(tool_prompt_n, d["prompt_tokens_total"]),
                                     pct(tool_gen_n, d["tokens_predicted_total"])))
    lines.append(f"**Within 0.5%: {'yes' if ok else 'NO'}.**")
    lines.append("")
    lines.append("Per prompt length, what the tool reports (median of per-request server figures):")
    lines.append("")
    for name, m in samples.items():
        if name.startswith(("prefill_tps", "gen_tps")):
            s = summarize(m.values)
            lines.append(f"- {name}: median {s.median:.2f} t/s, IQR {s.iqr:.2f}, n={s.n}")
    lines += ["", "Note: the server's per-request `predicted_per_second` counts the first token as free "
              "((n-1)/ms, server-common.h); the aggregate above uses n/ms like the /metrics counters.", ""]
    return lines


def busy(run) -> str:
    s = summarize([r.other_cpu_pct for r in run.reps])
    return "?" if s is None else f"{s.median:.0f}%"


def aa_check(model: str, extra: list[str], spec: BenchSpec, repo: RunRepository, pairs: int,
             threshold: float) -> list[str]:
    runner = BenchRunner(repo)
    lines = ["## 2. A/A: the same settings twice, compared", "",
             f"{pairs} pair(s) of runs, each run on a fresh server: {spec.describe()}; threshold {threshold:g}%.", "",
             "`busy` = CPU used by other processes while the run measured (median over requests, % of all cores).",
             "", "| Pair | Metric | A median | B median | Δ% | 95% CI of Δ | Verdict | busy A / B |",
             "|---|---|---:|---:|---:|---|---|---|"]
    n_metrics = n_noise = 0
    quiet_pairs = []
    for p in range(pairs):
        a = runner.run(ServerTarget(argv=["-m", model, *extra], label="A/A"), spec).run
        b = runner.run(ServerTarget(argv=["-m", model, *extra], label="A/A"), spec).run
        comps = [c for c in compare_runs(a, b, threshold) if c.verdict is not None]
        quiet_pairs.append(None if busy_warning(a) or busy_warning(b) else
                           (sum(c.verdict == NOISE for c in comps), len(comps)))
        for c in comps:
            if c.verdict is None:
                continue
            n_metrics += 1
            n_noise += c.verdict == NOISE
            ci = "–" if c.ci_low_pct is None else f"[{c.ci_low_pct:+.1f}, {c.ci_high_pct:+.1f}]"
            lines.append(f"| {p + 1} | {c.name} | {c.a.median:.2f} | {c.b.median:.2f} | {c.delta_pct:+.2f} | {ci} | "
                         f"{c.verdict} | {busy(a)} / {busy(b)} |")
    lines += ["", f"**{n_noise} of {n_metrics} A/A metric comparisons came out 'within noise'.**", ""]
    quiet = [r for r in quiet_pairs if r]
    lines += [f"Pairs where neither run saw other processes above {BUSY_CPU_PCT:g}% CPU: {len(quiet)} of {pairs}; "
              f"'within noise' among their metrics: {sum(q[0] for q in quiet)} of {sum(q[1] for q in quiet)}.", ""]
    return lines


def ab_check(model: str, extra: list[str], spec: BenchSpec, repo: RunRepository, a_flags: str, b_flags: str,
             threshold: float) -> list[str]:
    runner = BenchRunner(repo)
    a = runner.run(ServerTarget(argv=["-m", model, *extra, *shlex.split(a_flags)], label=a_flags), spec).run
    b = runner.run(ServerTarget(argv=["-m", model, *extra, *shlex.split(b_flags)], label=b_flags), spec).run
    lines = [f"## 3. A/B: `{a_flags}` (A) vs `{b_flags}` (B)", "", f"{spec.describe()}; threshold {threshold:g}%.", "",
             "| Metric | A median | B median | Δ% | 95% CI of Δ | Verdict |", "|---|---:|---:|---:|---|---|"]
    for c in compare_runs(a, b, threshold):
        if c.verdict is None:
            continue
        ci = "–" if c.ci_low_pct is None else f"[{c.ci_low_pct:+.1f}, {c.ci_high_pct:+.1f}]"
        lines.append(f"| {c.name} | {c.a.median:.2f} | {c.b.median:.2f} | {c.delta_pct:+.2f} | {ci} | {c.verdict} |")
    lines.append("")
    for run, name in ((a, "A"), (b, "B")):
        for g in llama_bench_gap(run):
            lines.append(f"- {name} `{run.label}`: {g['text']}")
        if run.llama_bench_skipped:
            lines.append(f"- {name}: flags llama-bench lacks: `{' '.join(run.llama_bench_skipped)}`")
        if run.llama_bench_error:
            lines.append(f"- {name}: llama-bench: {run.llama_bench_error}")
        if busy_warning(run):
            lines.append(f"- {name}: warning: {busy_warning(run)}")
        if run.memory_predicted_mib or run.memory_measured_mib:
            lines.append(f"- {name}: memory plan {run.memory_predicted_mib} MiB; measured peaks "
                         f"{ {k: round(v) for k, v in (run.memory_measured_mib or {}).items()} } MiB")
    return lines + [""]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="GGUF (default: the demo model)")
    ap.add_argument("--server-args", default="-t 2 -c 4096", help="extra llama-server flags (default '-t 2 -c 4096')")
    ap.add_argument("--prompt-tokens", default="128,512")
    ap.add_argument("--gen-tokens", type=int, default=32)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=2, help="A/A pairs")
    ap.add_argument("--threshold", type=float, default=2.0)
    ap.add_argument("--ab", nargs=2, metavar=("A_FLAGS", "B_FLAGS"), help="also record an A/B of two settings")
    ap.add_argument("--llama-bench", action="store_true",
                    help="in the A/B, also run llama-bench with the same settings and record the gap")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "fidelity" / "fidelity_cpu.md"))
    args = ap.parse_args()
    model = args.model or str(find_demo_model())
    extra = shlex.split(args.server_args)
    spec = BenchSpec(prompt_tokens=tuple(int(x) for x in args.prompt_tokens.split(",")), gen_tokens=args.gen_tokens,
                     reps=args.reps, warmup=0)
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        repo = RunRepository(open_engine(Path(tmp) / "fidelity.sqlite"))
        lines = [f"# Benchmark fidelity ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
                 f"- Command: `{' '.join(sys.argv)}`",
                 f"- Host: {platform.node()} · {platform.processor() or platform.machine()} · {os.cpu_count()} CPUs "
                 f"(shared with other work while measured)",
                 f"- Model: `{model}` · server flags `{' '.join(extra)}`", ""]
        lines += counters_check(model, extra, spec, repo)
        spec_aa = spec.model_copy(update={"warmup": 1})
        lines += aa_check(model, extra, spec_aa, repo, args.pairs, args.threshold)
        if args.ab:
            spec_ab = spec_aa.model_copy(update={"llama_bench": args.llama_bench})
            lines += ab_check(model, extra, spec_ab, repo, args.ab[0], args.ab[1], args.threshold)
    lines.append(f"_Total time {time.time() - t0:.0f} s._")
    text = "\n".join(lines) + "\n"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
