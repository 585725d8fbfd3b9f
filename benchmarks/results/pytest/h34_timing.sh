#!/bin/bash
# before/after timings of the selections touched by h34's CI changes, back to back on the same machine
SEL_NS="tests/integration/test_hub_cli.py tests/integration/test_hub_download.py tests/ui/test_get_models.py tests/ui/test_models_panel.py tests/ui/test_plan_bad_args.py tests/ui/test_plan_panel.py tests/ui/test_plan_values.py tests/ui/test_tune_candidates.py tests/unit/test_estimate_cli_text.py tests/unit/test_hostile_strings.py tests/unit/test_library.py tests/unit/test_models_state.py tests/unit/test_plan_state.py tests/unit/test_preflight.py tests/unit/test_speed_model.py tests/unit/test_tune_speed_prune.py"
SEL_S="tests/integration/test_estimate_speed.py tests/integration/test_memory_vs_llamacpp.py tests/integration/test_bench_speed_state.py tests/integration/test_tune_dry_run.py"
for round in 1 2; do
for tree in /tmp/h34/before /work/wt-h34; do
  cd $tree
  for sel in NS S; do
    if [ $sel = NS ]; then files=$SEL_NS; mark="not server"; else files=$SEL_S; mark="server"; fi
    t0=$(date +%s.%N)
    out=$(PYTHONPATH=$PWD QT_QPA_PLATFORM=offscreen .venv/bin/python -m pytest -q -p no:cacheprovider -m "$mark" $files 2>&1 | tail -1)
    t1=$(date +%s.%N)
    echo "round $round $(basename $tree) $sel: $(echo "$t1 - $t0" | bc) s wall: $out (load $(cut -d' ' -f1 /proc/loadavg))"
  done
done
done
