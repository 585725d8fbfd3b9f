#!/usr/bin/env bash
# One device call: prepare/build (idempotent), then measure and pack the results into $OUT.
set -u
H=benchmarks/results/gpu/h200-vulkan
exec > >(tee -a /tmp/session.log) 2>&1
PREP_WAIT_S=${PREP_WAIT_S:-480} bash $H/prep.sh || { cp /tmp/session.log $OUT/; exit 3; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
B=/tmp/lcb/build/bin R=/tmp/R; mkdir -p $R
if [ ! -e $R/measured ]; then
  echo "=== $(date +%T) measure"; timeout 400 python3 $H/measure.py $R $B /tmp/m/qwen3-1b-f16.gguf /tmp/m/qwen3-1b-q4_k_m.gguf && touch $R/measured
fi
if [ ! -e $R/rpc ]; then echo "=== $(date +%T) rpc"; timeout 200 bash $H/rpc.sh $R $B /tmp/m/qwen3-1b-q4_k_m.gguf && touch $R/rpc; fi
if [ ! -e /tmp/bin.tar.xz ]; then
  echo "=== $(date +%T) pack binaries"
  (cd $B && tar cf - llama-server llama-bench llama-fit-params llama-quantize llama-perplexity ggml-rpc-server *.so*) | xz -T16 -6 > /tmp/bin.tar.xz
  ls -la /tmp/bin.tar.xz
fi
mkdir -p $OUT/bin; (cd $OUT/bin && split -b 15M /tmp/bin.tar.xz part-)
tar czf $OUT/logs.tar.gz -C $R logs; cp $R/vulkan_overhead.json $OUT/ 2>/dev/null; cp /tmp/session.log $OUT/
ls -la $OUT $OUT/bin
