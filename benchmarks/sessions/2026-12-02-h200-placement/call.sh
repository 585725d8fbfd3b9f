#!/usr/bin/env bash
# One measuring call on the lent H200 (after setup.sh): benchmarks/placement_vs_grid.py for MODEL (dense|moe) at the
# free-memory sizes FREE (GiB, comma separated). Carry .dev. Output: $OUT/<model>-<free>.txt
set -u
bash benchmarks/results/gpu/h200-placement/setup.sh > $OUT/setup-again.log 2>&1 || { cat $OUT/setup-again.log; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 LLM_TUNER_DATA_DIR=/tmp/ltd
B=/tmp/lcb/build/bin
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw,memory.used --format=csv; uptime
timeout ${LIMIT:-560} python3 benchmarks/placement_vs_grid.py --server $B/llama-server --model /tmp/m/$MODEL-q4_k_m.gguf \
  --free-gib $FREE ${EXTRA:-} 2>&1 | tee $OUT/$MODEL-${FREE//,/_}.txt
echo "rc=${PIPESTATUS[0]}"
