#!/usr/bin/env bash
# Session 2: the probe (the app's own: two llama-bench runs, f16 and q8_0 K/V crossed) and the fixed CPU set, two
# starts, each run waiting for the other cores to be quiet (benchmarks/speed_model.py). After setup-cpu.sh.
set -u
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
B=/tmp/lcc/build/bin
timeout 200 python3 benchmarks/speed_model.py probe --dir /tmp/sm2 --bench $B/llama-bench
timeout 330 python3 benchmarks/speed_model.py measure --dir /tmp/sm2 --bench $B/llama-bench
cp /tmp/sm2/probe.jsonl /tmp/sm2/measure.jsonl $OUT/ 2>/dev/null
python3 benchmarks/speed_model.py headers --dir /tmp/sm2 --out /tmp/hd2 && cp /tmp/sm2/recorded/* /tmp/hd2/ && tar czf $OUT/headers.tgz -C /tmp/hd2 .
ls -la $OUT
