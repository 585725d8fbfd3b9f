#!/usr/bin/env bash
# Copy session 3's results back ($OUT), waiting at most $1 seconds for run.sh to finish.
for _ in $(seq 1 "${1:-500}"); do [ -e /tmp/s3/DONE ] && break; sleep 1; done
mkdir -p $OUT/s3
cp /tmp/s3/*.jsonl /tmp/s3/*.txt /tmp/s3/*.log $OUT/s3/ 2>/dev/null
[ -d /tmp/s3/headers ] && tar czf $OUT/s3/headers.tgz -C /tmp/s3/headers .
cp /tmp/s3run.log $OUT/ 2>/dev/null; tail -8 /tmp/s3run.log; ls /tmp/s3
