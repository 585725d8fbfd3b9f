#!/usr/bin/env python3
"""Were the dense calibration runs slow because the freshly quantized model was still being written back?

In this session the dense model's three calibration runs, started right after llama-quantize wrote the 2.2 GB
file, generated ~8.5 % slower than the grid's runs of the same placement a minute later (46.4 vs 50.7 t/s at 16
threads, 31.9 vs 34.8 at 8; same buffers in their -lv 4 logs). This runs one placement (the model's first 20
`--fit off -ngl 20`: 16 of 36 layers on the host, no holder) right after quantization, then after `sync`, with
/proc/meminfo's Dirty and Writeback before each run.

    python3 writeback.py SERVER MODEL
"""

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from llm_tuner.core import flags  # noqa: E402
from llm_tuner.core.stats import median  # noqa: E402
from llm_tuner.core.tune import Objective, TuneSpec, rep_scores  # noqa: E402
from llm_tuner.services import binaries  # noqa: E402
from llm_tuner.services.bench import BenchRunner, ServerTarget  # noqa: E402
from llm_tuner.store.db import open_engine  # noqa: E402
from llm_tuner.store.runs import RunRepository  # noqa: E402


def meminfo() -> str:
    kib = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+):\s+(\d+)", Path("/proc/meminfo").read_text(), re.M)}
    return " ".join(f"{k} {kib.get(k, 0) // 1024} MiB" for k in ("Dirty", "Writeback"))


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit("usage: writeback.py SERVER MODEL (a llama-server and a GGUF just written)")
    server, model = sys.argv[1], sys.argv[2]
    os.environ[binaries.ENV_VARS[binaries.SERVER]] = server
    objective = Objective(kind="gen_tps", prompt_tokens=2048, gen_tokens=64)
    bench = BenchRunner(RunRepository(open_engine(Path(tempfile.mkdtemp()) / "h.sqlite")), predict_memory=False)
    t0 = time.monotonic()

    def run(extra: list[str], what: str) -> None:
        argv = [*flags.argv_for("model", model), *flags.argv_for("ctx_size", "8192"), *flags.argv_for("fit", "off"),
                *flags.argv_for("gpu_layers", "20"), *extra]
        before = meminfo()
        r = bench.run(ServerTarget(argv=argv, label=what), TuneSpec(base_argv=tuple(argv), objective=objective)
                      .bench_spec(2)).run
        gen = [round(x.predicted_per_second, 1) for x in r.reps if x.error is None and x.predicted_per_second]
        pre = [round(x.prompt_per_second) for x in r.reps if x.error is None and x.prompt_per_second]
        print(f"[{time.monotonic() - t0:5.1f} s] {what:24} {' '.join(extra) or 'default -t':10} gen {gen} "
              f"(median {median(rep_scores(r, objective)) or 0:.1f}) prefill {pre} · before: {before}", flush=True)

    t8 = flags.argv_for("threads", "8")
    for what in ("after quantize", "after quantize", "after quantize"):
        run([], what)
        run(t8, what)
    t = time.monotonic()
    subprocess.run(["sync"], check=False)
    print(f"[{time.monotonic() - t0:5.1f} s] sync took {time.monotonic() - t:.1f} s · {meminfo()}", flush=True)
    for what in ("after sync", "after sync"):
        run([], what)
        run(t8, what)


if __name__ == "__main__":
    main()
