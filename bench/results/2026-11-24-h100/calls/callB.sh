#!/usr/bin/env bash
# Bench call B (2026-11-24): all 18 problems; the 9 of call A are reused from the carried run store.
set -u
OUT=${OUT:-/tmp/ks_out}
KS_TIME_LIMIT=300 bash scripts/device_bench.sh 585
grep -E "^\| [a-z_0-9]+ \| " "$OUT/bench/results.md"
