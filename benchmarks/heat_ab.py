"""One heat-gated A/B on a GPU: two values of one flag, interleaved A B A B, each run waiting until the GPU is
back within N °C of where the A/B began, every repetition's temperature, clocks and throttle reasons recorded.

    python benchmarks/heat_ab.py --model GGUF --out DIR [--binary BIN] [--param -ub --values 512,2048]
        [--rounds 3] [--reps 5] [--gen-tokens 256] [--cool-within 5] [--cool-limit 300] [--no-heat-gate]
        [-- more llama-server arguments]

The engine is `llm-tuner sweep`'s with rounds (BenchRunner.sweep: interleaved, heat-gated when rounds > 1 and a
GPU reads temperatures), with its runs in DIR/data. Writes DIR/heat_ab.md (the verdict of B against A with its
95 % interval, the heat warning when the sides ran at different temperatures or clocks, each run's cool-down note
and a table of every repetition's temperature at start and peak, SM and memory clocks, throttle reasons) and
DIR/heat_ab.json. Run it once with the gate and once with --no-heat-gate (another DIR) to see what the gate does.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ab_record


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--binary", metavar="BIN", help="the llama-server (default: the configured or embedded one)")
    p.add_argument("--param", default="-ub", help="the flag A and B differ in (-ub)")
    p.add_argument("--values", default="512,2048", metavar="A,B", help="its two values (512,2048)")
    ab_record.add_common(p)
    args = p.parse_args()
    out = ab_record.setup(args.out)

    from llm_tuner.core.bench_report import compare_runs, pooled
    from llm_tuner.core.heat import heat_warning
    from llm_tuner.services.bench import ServerTarget

    values = [v.strip() for v in args.values.split(",") if v.strip()]
    if len(values) != 2:
        p.error("--values takes two values: A,B")
    binary = str(Path(args.binary).expanduser().resolve()) if args.binary else None
    runner, cool = ab_record.runner(args, [binary] if binary else [])
    target = ServerTarget(argv=ab_record.base_argv(args), label="heat_ab", binary=binary)
    with runner.heat_gated(cool):
        _group, runs = runner.sweep(target, ab_record.spec(args), args.param, values, rounds=args.rounds,
                                    progress=ab_record.progress)
    runs = [r.model_copy(update={"sweep_value": "A" if r.sweep_value == values[0] else "B"}) for r in runs]
    a = pooled([r for r in runs if r.sweep_value == "A"])
    b = pooled([r for r in runs if r.sweep_value == "B"])
    comparisons = compare_runs(a, b) if a and b else []
    lead = next((c for c in comparisons if c.name.startswith("gen_tps@")), None)
    text = (f"B ({args.param} {values[1]}) against A ({args.param} {values[0]}): generation "
            + (f"{lead.delta_pct:+.1f}% -> {lead.verdict}" if lead and lead.delta_pct is not None else "not measured"))
    warn = heat_warning([r for r in runs if r.sweep_value == "A"], [r for r in runs if r.sweep_value == "B"])
    gate = (f"heat-gated within {args.cool_within:g} °C, at most {args.cool_limit:g} s per run" if cool is not None
            else "not heat-gated (" + ("--no-heat-gate" if args.no_heat_gate else "no GPU temperatures") + ")")
    ab_record.write(out, "heat_ab", f"Heat-gated A/B: {args.param} {values[0]} vs {values[1]} ({gate})", sys.argv,
                    runs, text, comparisons, [warn] if warn else [],
                    {"gate": gate, "waited_s": cool.waited_s if cool else 0.0, "param": args.param, "values": values})
    return 0 if runs and all(r.status == "complete" for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
