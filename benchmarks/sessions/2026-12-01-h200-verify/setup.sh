#!/usr/bin/env bash
# Idempotent setup on the lent H200 from carried files (.h200rt: the CUDA+Vulkan+RPC binaries built in
# ../h200-vulkan, the app's wheels, the Vulkan loader and glvnd debs). Writes /tmp/m/qwen3-1b-*.gguf.
set -u
step() { echo; echo "=== $(date +%T) $*"; }
if [ ! -e /tmp/setup_ok ]; then
  step setup
  for f in .h200rt/deb/*.deb; do dpkg -x $f /; done; ldconfig
  mkdir -p /tmp/lcb/build/bin && tar xJf .h200rt/bin.tar.xz -C /tmp/lcb/build/bin || exit 1
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .h200rt/whl/*.whl || exit 1
  mkdir -p /tmp/m
  PYTHONPATH=/tmp/site:$PWD python3 -c "
from tests.support.random_gguf import write_qwen3_dense
write_qwen3_dense('/tmp/m/qwen3-1b-f16.gguf', n_layer=24, n_embd=2048, n_ff=5632, n_head=16, n_head_kv=4,
                  head_dim=128, n_ctx_train=32768, weight_type='F16', embd_type='F16')" || exit 1
  /tmp/lcb/build/bin/llama-quantize /tmp/m/qwen3-1b-f16.gguf /tmp/m/qwen3-1b-q4_k_m.gguf Q4_K_M 16 > /tmp/m/quantize.log 2>&1 || exit 1
  touch /tmp/setup_ok
fi
