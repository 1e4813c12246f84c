#!/usr/bin/env bash
# `kernelstitch bench examples` on a lent GPU machine, resumable across machines: the run store
# (.kernelstitch/runs.sqlite) goes back in $OUT at the end; copy it into .kernelstitch/ here and
# name `.kernelstitch` in the next call's `carry`, and that call skips what is already measured.
# Usage: [KS_TIME_LIMIT=per-problem seconds, default 420] scripts/device_bench.sh SECONDS [extra bench options...]
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT/bench"
limit=$1; shift
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a
# SIGINT, not SIGTERM: the harness then cancels running problems, saves what finished, and
# still writes the report.
timeout -s INT "$limit" kernelstitch bench examples --out "$OUT/bench" --build-jobs 14 \
    --time-limit "${KS_TIME_LIMIT:-420}" "$@" >"$OUT/bench/console.log" 2>&1
echo "bench exit status $?"
# sqlite3's backup API: a consistent copy even if a WAL file is still around.
python -c "import sqlite3,sys; sqlite3.connect(sys.argv[1]).backup(sqlite3.connect(sys.argv[2]))" \
    .kernelstitch/runs.sqlite "$OUT/runs.sqlite" || echo "no run store to return"
grep -E "^- (correct|geomean)" "$OUT/bench/results.md"
