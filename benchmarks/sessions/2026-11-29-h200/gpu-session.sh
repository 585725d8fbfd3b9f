#!/usr/bin/env bash
# Everything we check on the lent 2x H200 machine, in one detached run. Results: /tmp/R (tarred to $OUT at the end).
set -u
R=/tmp/R; mkdir -p $R; exec > >(tee -a $R/session.log) 2>&1
step() { echo; echo "=== $(date +%T) $*"; }
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
step build; bash .dev/gpu-build.sh || { echo BUILD FAILED; exit 1; }
B=/tmp/lcb/build/bin; SERVER=$B/llama-server
export LLM_TUNER_LLAMA_SERVER=$SERVER LLM_TUNER_LLAMA_BENCH=$B/llama-bench LLM_TUNER_LLAMA_FIT_PARAMS=$B/llama-fit-params
export LLM_TUNER_DATA_DIR=/tmp/ltd
$SERVER --version > $R/cuda-version.txt 2>&1; $SERVER --list-devices > $R/cuda-list-devices.txt 2>&1
step model; python3 - <<'PY'
from tests.support.random_gguf import write_qwen3_dense
p = write_qwen3_dense("/tmp/m/qwen3-1b-f16.gguf", n_layer=24, n_embd=2048, n_ff=5632, n_head=16, n_head_kv=4,
                      head_dim=128, n_ctx_train=32768, weight_type="F16", embd_type="F16")
print(p)
PY
M=/tmp/m/qwen3-1b-f16.gguf; ls -la /tmp/m
step devices; python3 -m llm_tuner devices --json > $R/devices.json; cat $R/devices.json
step gpu-check; timeout 300 python3 scripts/gpu-check --server $SERVER --model $M --oom --out $R/gpu-check
step memory-accuracy; timeout 420 python3 benchmarks/memory_accuracy.py --cuda --server $SERVER --threads 8 > $R/memory_accuracy_cuda_h200.txt; tail -12 $R/memory_accuracy_cuda_h200.txt
step memory-accuracy-2dev; GGML_CUDA_DEVICES=2 $SERVER --list-devices > $R/cuda-list-devices-virtual2.txt 2>&1; GGML_CUDA_DEVICES=2 timeout 300 python3 benchmarks/memory_accuracy.py --cuda --split-only --server $SERVER --threads 8 > $R/memory_accuracy_cuda_virtual2.txt; tail -8 $R/memory_accuracy_cuda_virtual2.txt
step bench-ab; for ub in 512 2048; do timeout 240 python3 -m llm_tuner bench --json --label "ub$ub" --prompt-tokens 512,4096 --gen-tokens 128 --reps 5 --warmup 1 $([ $ub = 512 ] && echo --llama-bench) -- -m $M -ngl 99 -t 8 -c 16384 -np 1 -fa on -ub $ub > $R/bench-ub$ub.json; done
python3 -m llm_tuner runs compare 1 2 --json > $R/compare-ub512-vs-ub2048.json; python3 -m llm_tuner runs compare 1 2 | tee $R/compare-ub512-vs-ub2048.txt
step sweep-ts; GGML_CUDA_DEVICES=2 timeout 300 python3 -m llm_tuner sweep --json --param=tensor-split --values "50,50;40,60;25,75" --prompt-tokens 512 --gen-tokens 128 --reps 3 -- -m $M -ngl 99 -t 8 -c 8192 -np 1 -dev CUDA0,CUDA1 > $R/sweep-ts.json; tail -c 600 $R/sweep-ts.json
step run-json-lines; (sleep 15; curl -s localhost:18181/completion -d '{"prompt":"Hello there, tell me a story about GPUs","n_predict":256,"ignore_eos":true}' > /dev/null) &
GGML_CUDA_DEVICES=2 timeout 60 python3 -m llm_tuner run --json-lines --duration 35 -- -m $M -ngl 99 -t 8 -c 8192 -dev CUDA0,CUDA1 -ts 40,60 --port 18181 > $R/run-2gpu.jsonl; grep -c '"sample"' $R/run-2gpu.jsonl; grep '"request"' $R/run-2gpu.jsonl | head -2
step watch-cost; timeout 300 python3 benchmarks/watch_cost.py --server $SERVER --model $M --ngl 99 --threads 8 --reps 6 --n-predict 256 --label h200 > $R/watch_cost_h200.txt; tail -8 $R/watch_cost_h200.txt
cp -r benchmarks/results $R/bench-results-written 2>/dev/null
step done; echo ALLDONE
