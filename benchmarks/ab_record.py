"""Shared by benchmarks/vs_binary.py and benchmarks/heat_ab.py: a throwaway data folder, the runner with the
machine's GPU telemetry, and the record of an A/B (JSON with every run and repetition, a Markdown summary with
each repetition's temperature, clocks and throttle reasons, the run notes and the verdict)."""

from __future__ import annotations

import json
import os
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def setup(out: Path) -> Path:
    """Keep the runs in OUT/data (never the user's history); returns OUT."""
    out.mkdir(parents=True, exist_ok=True)
    os.environ["LLM_TUNER_DATA_DIR"] = str(out / "data")
    return out


def runner(args, trusted: list[str]):
    """A BenchRunner over OUT/data with NVML/AMD telemetry (when a driver is there) and the given programs
    confirmed for this process only (the command line named them)."""
    from llm_tuner.services import binaries
    from llm_tuner.services.bench import BenchRunner, default_telemetry
    from llm_tuner.services.bench.heat import CoolDown
    from llm_tuner.services.settings_store import database_path, load_settings
    from llm_tuner.services.telemetry.inventory import detect_inventory
    from llm_tuner.store.db import open_engine
    from llm_tuner.store.runs import RunRepository

    settings = load_settings()
    for path in trusted:
        settings = binaries.trust_binary(path, settings, save=False)
    try:
        devices = [d.model_dump(mode="json") for d in detect_inventory().devices]
    except Exception:  # noqa: BLE001 - the record says "none recorded"
        devices = []
    telemetry = default_telemetry(trusted[0] if trusted else None)
    run = BenchRunner(RunRepository(open_engine(database_path())), settings=settings, telemetry=telemetry,
                      devices=devices)
    run.heat_gate = not args.no_heat_gate
    cool = CoolDown.for_telemetry(telemetry, within_c=args.cool_within, limit_s=args.cool_limit) \
        if run.heat_gate else None
    return run, cool


def add_common(p) -> None:
    p.add_argument("--model", required=True, metavar="GGUF")
    p.add_argument("--out", required=True, metavar="DIR", type=Path)
    p.add_argument("--rounds", type=int, default=3, help="rounds of A B (3)")
    p.add_argument("--reps", type=int, default=5, help="repetitions per run (5)")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--prompt-tokens", type=int, default=512)
    p.add_argument("--gen-tokens", type=int, default=256)
    p.add_argument("--ctx", type=int, default=4096)
    p.add_argument("--ngl", default="all", help="-ngl (all)")
    p.add_argument("--no-heat-gate", action="store_true", help="do not wait for the GPU to cool before each run")
    p.add_argument("--cool-within", type=float, default=5.0, metavar="C")
    p.add_argument("--cool-limit", type=float, default=300.0, metavar="SECONDS")
    p.add_argument("extra", nargs="*", help="after --: more llama-server arguments for both sides")


def base_argv(args) -> list[str]:
    from llm_tuner.core import flags

    return [*flags.argv_for("model", args.model), *flags.argv_for("ctx_size", str(args.ctx)),
            *flags.argv_for("gpu_layers", args.ngl), *[a for a in args.extra if a != "--"]]


def spec(args):
    from llm_tuner.core.bench_spec import BenchSpec

    return BenchSpec(prompt_tokens=(args.prompt_tokens,), gen_tokens=args.gen_tokens, reps=args.reps,
                     warmup=args.warmup)


def progress(frac, text) -> None:
    pct = "" if frac is None else f"[{100 * frac:5.1f}%] "
    print(f"{pct}{text}", file=sys.stderr, flush=True)


def rep_rows(runs) -> list[str]:
    rows = ["| run | side | rep | GPU | temp at start °C | peak °C | SM MHz | mem MHz | reasons | throttled | gen t/s |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        for rep in r.reps:
            for p in rep.peaks:
                if p.device == "Host":
                    continue
                rows.append(f"| {r.id} | {r.sweep_value} | {rep.rep} | {p.device} | {p.temp_start_c} | {p.temp_c} | "
                            f"{p.sm_clock_mhz} | {p.mem_clock_mhz} | {hex(p.throttle_reasons or 0)} | {p.throttled} | "
                            f"{rep.predicted_per_second and round(rep.predicted_per_second, 2)} |")
    return rows


def write(out: Path, name: str, title: str, argv: list[str], runs, verdict_text: str, comparisons, warnings,
          extra: dict) -> None:
    from llm_tuner.core.bench_report import metric_label, run_to_json

    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    data = {"when": when, "host": platform.node(), "argv": argv, "verdict": verdict_text, "warnings": list(warnings),
            "metrics": [c.to_json() for c in comparisons], "runs": [run_to_json(r) for r in runs], **extra}
    (out / f"{name}.json").write_text(json.dumps(data, indent=1, default=str))
    lines = [f"# {title}", "", f"{when} on {platform.node()}", "", "Command: `" + " ".join(argv) + "`", "",
             f"**{verdict_text}**", ""]
    lines += [f"- Warning: {w}" for w in warnings]
    lines += ["", "| metric | Δ B vs A | 95% interval | verdict |", "|---|---|---|---|"]
    for c in comparisons:
        if c.delta_pct is not None:
            ci = "–" if c.ci_low_pct is None else f"[{c.ci_low_pct:+.1f}, {c.ci_high_pct:+.1f}]%"
            lines.append(f"| {metric_label(c.name)} | {c.delta_pct:+.1f}% | {ci} | {c.verdict} |")
    lines += ["", "## Runs", ""]
    for r in runs:
        lines.append(f"- run {r.id} side {r.sweep_value}: {r.status}; "
                     + (r.build.describe() if r.build else (r.binary_path or "")))
        lines += [f"  - {n}" for n in r.notes]
    lines += ["", "## Repetitions", "", *rep_rows(runs), ""]
    (out / f"{name}.md").write_text("\n".join(lines))
    print("\n".join(lines[:12]))
    print(f"written: {out / (name + '.md')} and {out / (name + '.json')}")
