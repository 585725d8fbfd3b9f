#!/usr/bin/env bash
# The writeback check (writeback.sh): start driver.sh detached if it is not running, follow it until it is DONE or
# LIMIT seconds (default 560) passed, then copy what it has written to $OUT. Repeat the call (at once: a lent
# machine is released ~30 s after a call) until DONE.
D=/tmp/dwb; S=$(date +%s)
if [ ! -e $D/driver.log ]; then
  mkdir -p $D; setsid nohup bash benchmarks/sessions/2026-12-07-gpu-server-cal/writeback.sh > /dev/null 2>&1 < /dev/null &
  sleep 2
fi
while [ ! -e $D/DONE ] && [ $(( $(date +%s) - S )) -lt ${LIMIT:-560} ]; do sleep 15; done
grep "^===" $D/driver.log | tail -4; tail -3 $D/driver.log
for f in writeback; do [ -e $D/$f.txt ] && { echo "--- $f"; tail -4 $D/$f.txt; }; done
cp $D/*.txt $D/driver.log $OUT/ 2>/dev/null
tar czf $OUT/logs.tgz -C $D logs 2>/dev/null
[ -e $D/DONE ] && echo DONE || echo "still running after $(( $(date +%s) - S )) s"
