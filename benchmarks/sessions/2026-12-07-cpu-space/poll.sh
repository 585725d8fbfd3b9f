#!/usr/bin/env bash
# One device call: start driver.sh detached if it is not running, follow it until DONE or LIMIT seconds (default
# 560), then copy what it has written to $OUT. Repeat the call at once (a lent machine is released ~30 s after a
# call) until DONE.
D=/tmp/d37d; S=$(date +%s)
if [ ! -e $D/driver.log ]; then
  mkdir -p $D; setsid nohup bash benchmarks/sessions/2026-12-07-cpu-space/driver.sh > /dev/null 2>&1 < /dev/null &
  sleep 2
fi
while [ ! -e $D/DONE ] && [ $(( $(date +%s) - S )) -lt ${LIMIT:-560} ]; do sleep 10; done
grep "^===" $D/driver.log | tail -3; tail -${TAILN:-3} $D/driver.log
[ -e $D/cpu_space.txt ] && { echo "--- cpu_space.txt"; tail -${TAILN:-6} $D/cpu_space.txt; echo "--- err"; tail -3 $D/cpu_space.err; }
cp $D/*.txt $D/*.err $D/driver.log $OUT/ 2>/dev/null
[ -e $D/DONE ] && echo DONE || echo "still running after $(( $(date +%s) - S )) s"
