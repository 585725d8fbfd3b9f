#!/usr/bin/env bash
# Idempotent setup on the lent H200 from carried files (.h200rt: the CUDA+Vulkan+RPC binaries built in
# ../h200-vulkan, the app's wheels, the Vulkan loader debs). Writes two "confident" random-weight Qwen3 models
# (tests/support/random_gguf.py: they repeat their last token with a wide logit margin, so greedy output does not
# turn on rounding and one drafts for the other with every token accepted): a 1B target and a 2-layer draft.
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
write_qwen3_dense('/tmp/m/c1b-f16.gguf', n_layer=24, n_embd=2048, n_ff=5632, n_head=16, n_head_kv=4, head_dim=128,
                  n_ctx_train=32768, weight_type='F16', embd_type='F16', confident=True, name='Confident 1B')
write_qwen3_dense('/tmp/m/draft-f16.gguf', n_layer=2, n_embd=1024, n_ff=2816, n_head=8, n_head_kv=4, head_dim=128,
                  n_ctx_train=32768, weight_type='F16', embd_type='F16', confident=True, seed=1, name='Confident draft')
" || exit 1
  for n in c1b draft; do
    /tmp/lcb/build/bin/llama-quantize /tmp/m/$n-f16.gguf /tmp/m/$n-q4_k_m.gguf Q4_K_M 16 > /tmp/m/quantize-$n.log 2>&1 || exit 1
  done
  touch /tmp/setup_ok
fi
