#!/usr/bin/env bash
# The tune against a full grid on the lent H200 (issue 13's performance goal): the confident 1B (Q4_K_M) with the
# 2-layer confident draft at --temp 0 over -ub, -b, K/V type and draft depth; CUDA0 only. Carry .h200rt.
set -u
H=benchmarks/results/gpu/h200-tune
exec > >(tee -a /tmp/call.log) 2>&1
bash $H/setup.sh || exit 1
source benchmarks/results/gpu/h200-verify/env.sh
M=/tmp/m/c1b-q4_k_m.gguf D=/tmp/m/draft-q4_k_m.gguf
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv; uptime
# the draft's acceptance, once, as llama-server reports it
timeout 60 $B/llama-server -m $M -md $D -ngl 99 -ngld 99 -dev CUDA0 -devd CUDA0 --spec-type draft-simple \
  --spec-draft-n-max 8 -c 4096 --port 18555 > /tmp/accept.log 2>&1 &
SP=$!
for i in $(seq 60); do curl -sf localhost:18555/health >/dev/null && break; sleep 1; done
curl -s localhost:18555/completion -d '{"prompt":"The quick brown fox jumps over","n_predict":64,"temperature":0}' \
  | python3 -c "import json,sys; d=json.load(sys.stdin); print(repr(d['content'][:80]), d['timings'])"
kill $SP; wait $SP
grep "draft acceptance" /tmp/accept.log | tail -1
timeout ${LIMIT:-480} python3 benchmarks/tune_vs_grid.py --server $B/llama-server --model $M \
  --space "${SPACE:-ub=512,2048 b=2048,4096 kv=f16,q8_0 spec-draft-n-max=2,3,4,8}" \
  --base "-ngl 99 -c 8192 -fa on -dev CUDA0 -md $D -ngld 99 -devd CUDA0 --spec-type draft-simple --temp 0" \
  --objective ${OBJ:-gen_tps} --prompt-tokens 512 --gen-tokens ${GEN:-128} --reps 3 > $OUT/tune_vs_grid_h200.txt 2>&1
echo "rc=$?"; tail -40 $OUT/tune_vs_grid_h200.txt; cp /tmp/call.log $OUT/
