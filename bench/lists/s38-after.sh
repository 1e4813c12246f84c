#!/usr/bin/env bash
# s38 call 1's GPU0_AFTER: the three kernel A/Bs written in s37 and never run (the strip forms of the
# two pool kernels, the elementwise strided_vec form); JSON rows under $OUT/c.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT/c"
ROW_LIMIT=${ROW_LIMIT:-100} PLANE_LIMIT=${PLANE_LIMIT:-120} bash bench/pool_strip_timings.sh
timeout "${STRIDED_LIMIT:-90}" python bench/elementwise_strided_timing.py --out "$OUT/c/strided.json" --runs 20
echo "elementwise_strided_timing exit $?"
