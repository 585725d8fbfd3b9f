#!/usr/bin/env bash
# RPC worker on the GPU (issue 14): ggml-rpc-server -d CUDA0 on loopback, llama-server --rpc with -dev RPC0 and a
# local+remote split; logs to $1/logs.
O=$1 B=$2 M=$3; mkdir -p $O/logs
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json CUDA_DEVICE_ORDER=PCI_BUS_ID
$B/ggml-rpc-server -H 127.0.0.1 -p 50052 -d CUDA0 > $O/logs/rpc-worker-gpu.log 2>&1 &
W1=$!
$B/ggml-rpc-server -H 127.0.0.1 -p 50053 -d CPU -t 4 > $O/logs/rpc-worker-cpu.log 2>&1 &
W2=$!
sleep 3
$B/llama-server --rpc 127.0.0.1:50052,127.0.0.1:50053 --list-devices > $O/logs/rpc-list-devices.txt 2>&1
cat $O/logs/rpc-list-devices.txt | grep -A8 "Available"
for cfg in "rpc0:-dev RPC0" "cuda0-rpc0-ts40-60:-dev CUDA0,RPC0 -ts 40,60" "rpc0-rpc1-ts1-1:-dev RPC0,RPC1 -ts 1,1"; do
  name=${cfg%%:*}; args=${cfg#*:}
  timeout 120 $B/llama-server --rpc 127.0.0.1:50052,127.0.0.1:50053 -m $M -ngl 99 -c 4096 -fa on -np 1 -lv 4 $args --port 18400 > $O/logs/rpc-$name.log 2>&1 &
  S=$!
  for i in $(seq 600); do curl -sf localhost:18400/health > /dev/null && break; sleep 0.2; done
  curl -s localhost:18400/completion -d '{"prompt":"Hello","n_predict":8}' > /dev/null
  kill $S; wait $S
  echo "== $name"; grep -E "buffer size|using device" $O/logs/rpc-$name.log | head -20
done
kill $W1 $W2; wait
