#!/usr/bin/env bash
# Third GPU run: the memory plan for a sliding-window model (random gemma3) on CUDA.
set -u
R=/tmp/R4; mkdir -p $R; exec > >(tee -a $R/session.log) 2>&1
step() { echo; echo "=== $(date +%T) $*"; }
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
step build; bash .dev/gpu-build.sh || { echo BUILD FAILED; exit 1; }
B=/tmp/lcb/build/bin; SERVER=$B/llama-server
export LLM_TUNER_LLAMA_SERVER=$SERVER LLM_TUNER_DATA_DIR=/tmp/ltd
step memory-accuracy-gemma; timeout 240 python3 benchmarks/memory_accuracy.py --cuda --only gemma --server $SERVER --threads 8 > $R/memory_accuracy_cuda_gemma.txt; grep -A8 "# summary" $R/memory_accuracy_cuda_gemma.txt
step done; echo ALLDONE
