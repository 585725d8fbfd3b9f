#!/usr/bin/env bash
# Call A on the lent H200: setup, then the app's answers on a CUDA+Vulkan+RPC build (issue 12 item 8, issue 14).
set -u
H=benchmarks/results/gpu/h200-verify
exec > >(tee -a /tmp/call-a.log) 2>&1
step() { echo; echo "=== $(date +%T) $*"; }
bash $H/setup.sh || { echo SETUP FAILED; cp /tmp/call-a.log $OUT/; exit 1; }
source $H/env.sh
R=$OUT; LT="python3 -m llm_tuner"
step "devices (learns the PCI addresses with a model load once)"
$LT devices; $LT devices --json > $R/devices.json; cat /tmp/ltd/device_ids.json 2>/dev/null; echo
step "estimate --check: no -dev (llama.cpp skips Vulkan0), and -dev CUDA0,Vulkan0 -ts 40,60 (one pool)"
$LT estimate --check -- -m $M -ngl 99 -c 32768 -fa on 2>&1 | tail -15
$LT estimate --json --check -- -m $M -ngl 99 -c 32768 -fa on -dev CUDA0,Vulkan0 -ts 40,60 > $R/estimate-both.json 2>&1
$LT estimate --check -- -m $M -ngl 99 -c 32768 -fa on -dev CUDA0,Vulkan0 -ts 40,60 2>&1 | tail -15
step "RPC: a local GPU worker and a CPU worker through the app"
$B/ggml-rpc-server -H 127.0.0.1 -p 50052 -d CUDA0 > /tmp/w1.log 2>&1 & W1=$!
$B/ggml-rpc-server -H 127.0.0.1 -p 50053 -d CPU -t 4 > /tmp/w2.log 2>&1 & W2=$!
sleep 2
$LT devices --json --rpc 127.0.0.1:50052,127.0.0.1:50053 > $R/devices-rpc.json; $LT devices --rpc 127.0.0.1:50052,127.0.0.1:50053
for a in "-dev RPC0" "-dev CUDA0,RPC0 -ts 40,60" "-dev RPC0,RPC1 -ts 1,1"; do
  echo "--- $a"; $LT estimate --check -- -m $M --rpc 127.0.0.1:50052,127.0.0.1:50053 -ngl 99 -c 4096 -fa on $a 2>&1 | tail -12
done
kill $W1 $W2; wait $W1 $W2 2>/dev/null
step "agent: GPU samples over HTTP, read by Live's reader"
timeout 60 python3 benchmarks/results/rpc/agent_gpu_check.py 2>&1 | tee $R/agent-h200.txt
step done; cp /tmp/call-a.log $OUT/
