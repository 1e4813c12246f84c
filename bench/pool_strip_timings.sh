#!/usr/bin/env bash
# The two strip forms' kernel A/B on a GPU machine, one command for scripts/gpu_tests_and_levels.sh's
# GPU0_AFTER (bench/results/2026-12-07-h100-s37/RUN.md, "Next session's calls"):
#   GPU0_AFTER="bash bench/pool_strip_timings.sh" ... bash scripts/gpu_tests_and_levels.sh
# the kept row kernel's `row_rows` (bench/pool_row_timing.py) and the plane kernel's `plane_rows`
# (bench/pool_plane_vl_timing.py), each under its own time limit; JSON rows under $OUT/c.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT/c"
RUNS=${RUNS:-20}
timeout "${ROW_LIMIT:-120}" python bench/pool_row_timing.py --out "$OUT/c/pool_row.json" --runs "$RUNS"
echo "pool_row_timing exit $?"
timeout "${PLANE_LIMIT:-150}" python bench/pool_plane_vl_timing.py --out "$OUT/c/pool_plane.json" --runs "$RUNS"
echo "pool_plane_vl_timing exit $?"
