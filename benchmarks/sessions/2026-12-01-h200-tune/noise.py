"""Within-start against between-start spread of generation t/s on the lent H200: the same argv started N times,
each start 1 warm-up + R repetitions through the benchmark runner; prints every repetition's t/s and the spreads."""

import statistics
import sys

from llm_tuner.core.bench_spec import BenchSpec
from llm_tuner.services.bench import BenchRunner, ServerTarget
from llm_tuner.store.db import open_engine
from llm_tuner.store.runs import RunRepository

M, D = "/tmp/m/c1b-q4_k_m.gguf", "/tmp/m/draft-q4_k_m.gguf"
argv = ["-m", M, "-ngl", "99", "-c", "8192", "-fa", "on", "-dev", "CUDA0", "-md", D, "-ngld", "99", "-devd", "CUDA0",
        "--spec-type", "draft-simple", "--temp", "0", *sys.argv[2:]]
bench = BenchRunner(RunRepository(open_engine("/tmp/noise.sqlite")), predict_memory=False)
spec = BenchSpec(prompt_tokens=(512,), gen_tokens=512, reps=5, warmup=int(sys.argv[1]))
means = []
for start in range(4):
    run = bench.run(ServerTarget(argv=argv, label="noise"), spec)
    tps = [r.predicted_per_second for r in run.reps if r.error is None]
    means.append(statistics.median(tps))
    print(f"start {start}: " + " ".join(f"{x:.0f}" for x in tps) + f" · median {means[-1]:.0f} · within-start CV "
          f"{100 * statistics.stdev(tps) / statistics.mean(tps):.1f}%", flush=True)
print(f"between-start CV of the medians: {100 * statistics.stdev(means) / statistics.mean(means):.1f}%")
