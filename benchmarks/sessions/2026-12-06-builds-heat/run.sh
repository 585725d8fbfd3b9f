#!/usr/bin/env bash
# Issue 39 on the lent GPU, step 2 (after setup.sh left /tmp/ready): one heat-gated A/B (-ub 512 vs 2048), the same
# without the gate for contrast, and build A against build B. Everything the scripts write goes to $OUT (heat_ab*.md
# / .json, vs_binary.md / .json); copy them into this folder afterwards. ~8 minutes on an H200.
set -u
[ -e /tmp/ready ] || { echo "run setup.sh first"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
A=/tmp/lcb-a/build/bin/llama-server B=/tmp/lcb-b/build/bin/llama-server M=/tmp/heat/model.gguf
common=(--model "$M" --rounds 3 --reps 4 --prompt-tokens 2048 --gen-tokens 512 --cool-within 3 --cool-limit 120)
python3 benchmarks/heat_ab.py --binary "$A" --out /tmp/heat/gated "${common[@]}" --param -ub --values 512,2048 \
  && cp /tmp/heat/gated/heat_ab.md "$OUT/heat_ab_gated.md" && cp /tmp/heat/gated/heat_ab.json "$OUT/heat_ab_gated.json"
python3 benchmarks/heat_ab.py --binary "$A" --out /tmp/heat/ungated "${common[@]}" --param -ub --values 512,2048 \
  --no-heat-gate && cp /tmp/heat/ungated/heat_ab.md "$OUT/heat_ab_ungated.md"
python3 benchmarks/vs_binary.py --a "$A" --b "$B" --out /tmp/heat/builds "${common[@]}" \
  && cp /tmp/heat/builds/vs_binary.md /tmp/heat/builds/vs_binary.json "$OUT/"
nvidia-smi --query-gpu=name,driver_version,temperature.gpu,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.txt"
