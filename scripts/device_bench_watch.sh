#!/usr/bin/env bash
# scripts/device_bench.sh plus stack dumps: at the given offsets (seconds after start) every
# python process's stack goes to $OUT/stacks.txt (py-spy --nonblocking: processes are not
# paused, so timing runs are not disturbed).  For finding where a slow problem spends its time.
# py-spy travels as a wheel (.whl/, see the device tool's README).
# Usage: scripts/device_bench_watch.sh SECONDS "OFFSET OFFSET ..." [extra bench options...]
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
limit=$1; offsets=$2; shift 2
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl >/dev/null 2>&1 && export PATH=/tmp/site/bin:$PATH
(
  start=$(date +%s)
  for at in $offsets; do
    sleep $(( start + at - $(date +%s) ))
    for pid in $(pgrep -f "python|kernelstitch"); do
      echo "===== t=${at}s pid $pid: $(tr '\0' ' ' </proc/$pid/cmdline 2>/dev/null | cut -c1-200)"
      py-spy dump --nonblocking --pid "$pid" 2>&1 | head -60
    done >>"$OUT/stacks.txt"
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader >>"$OUT/stacks.txt"
  done
) &
watcher=$!
bash scripts/device_bench.sh "$limit" "$@"
kill "$watcher" 2>/dev/null
exit 0
