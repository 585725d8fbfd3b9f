#!/usr/bin/env bash
# Call B on the lent H200 (superseded by ../h200-tune): the tune against a full grid (issue 13's performance goal), a random-weight Qwen3 1B
# (Q4_K_M) as its own draft model at --temp 0 over -ub, -b, K/V type and draft depth; CUDA0 only.
set -u
H=benchmarks/results/gpu/h200-verify
exec > >(tee -a /tmp/call-b.log) 2>&1
bash $H/setup.sh || exit 1
source $H/env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv; uptime
timeout 570 python3 benchmarks/tune_vs_grid.py --server $B/llama-server --model $M \
  --space "ub=512,1024,2048 b=2048,4096 kv=f16,q8_0 spec-draft-n-max=2,3,4" \
  --base "-ngl 99 -c 8192 -fa on -dev CUDA0 -md $M -ngld 99 -devd CUDA0 --spec-type draft-simple --temp 0" \
  --objective ${OBJ:-gen_tps} --prompt-tokens 512 --gen-tokens 64 --reps 3 > $OUT/tune_vs_grid_h200.txt 2>&1
echo "rc=$?"; tail -40 $OUT/tune_vs_grid_h200.txt; cp /tmp/call-b.log $OUT/
