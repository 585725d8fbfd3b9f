#!/usr/bin/env bash
# Second GPU run: confirm the CUDA memory-plan calibration live, and the CUDA0 device names in samples/peaks.
set -u
R=/tmp/R2; mkdir -p $R; exec > >(tee -a $R/session.log) 2>&1
step() { echo; echo "=== $(date +%T) $*"; }
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
step build; bash .dev/gpu-build.sh || { echo BUILD FAILED; exit 1; }
B=/tmp/lcb/build/bin; SERVER=$B/llama-server
export LLM_TUNER_LLAMA_SERVER=$SERVER LLM_TUNER_LLAMA_BENCH=$B/llama-bench LLM_TUNER_LLAMA_FIT_PARAMS=$B/llama-fit-params
export LLM_TUNER_DATA_DIR=/tmp/ltd
step memory-accuracy; timeout 300 python3 benchmarks/memory_accuracy.py --cuda --server $SERVER --threads 8 > $R/memory_accuracy_cuda_h200.txt; grep -A8 "# summary" $R/memory_accuracy_cuda_h200.txt
step memory-accuracy-2dev; GGML_CUDA_DEVICES=2 timeout 240 python3 benchmarks/memory_accuracy.py --cuda --split-only --server $SERVER --threads 8 > $R/memory_accuracy_cuda_virtual2.txt; grep -A8 "# summary" $R/memory_accuracy_cuda_virtual2.txt
step model; python3 - <<'PY'
from tests.support.random_gguf import write_qwen3_dense
print(write_qwen3_dense("/tmp/m/qwen3-1b-f16.gguf", n_layer=24, n_embd=2048, n_ff=5632, n_head=16, n_head_kv=4,
                        head_dim=128, n_ctx_train=32768, weight_type="F16", embd_type="F16"))
PY
M=/tmp/m/qwen3-1b-f16.gguf
step estimate-vs-nvml; python3 -m llm_tuner estimate --json --check -- -m $M -ngl 99 -c 16384 -np 1 -fa on > $R/estimate-1b.json; cat $R/estimate-1b.json
step bench; timeout 200 python3 -m llm_tuner bench --json --label names --prompt-tokens 512 --gen-tokens 64 --reps 2 -- -m $M -ngl 99 -t 8 -c 16384 -np 1 -fa on > $R/bench-names.json; grep -o '"peak_vram_mib:[A-Za-z0-9:]*"' $R/bench-names.json | sort | uniq -c; grep -o '"memory_predicted_mib": {[^}]*}' $R/bench-names.json | head -2; grep -o '"memory_measured_mib": {[^}]*}' $R/bench-names.json | head -2
step run-json-lines; (sleep 12; curl -s localhost:18182/completion -d '{"prompt":"Hello","n_predict":256,"ignore_eos":true}' > /dev/null) &
timeout 50 python3 -m llm_tuner run --json-lines --duration 25 -- -m $M -ngl 99 -t 8 -c 8192 --port 18182 > $R/run-1gpu.jsonl; grep '"source": "gpu"' $R/run-1gpu.jsonl | head -2; grep '"event": "memory"' $R/run-1gpu.jsonl | head -2
step done; echo ALLDONE
