#!/usr/bin/env bash
# s39 call 1's GPU0_AFTER (bench/results/2026-12-07-h100-s38/RUN.md, "Next session's calls"): the
# elementwise tiled_any_dim A/B written in s38 (level3/48's Y_diag + Y_off, a + b.t()) and the pool
# plane forms with s38's shared-memory 1-D kernel (`smem1d`, level1/41) and the column loop's batched tail
# (level2/24's min over 22 values); JSON under $OUT/c.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT/c"
timeout "${TILED_LIMIT:-120}" python bench/elementwise_tiled_timing.py --out "$OUT/c/tiled.json" --runs 20
echo "elementwise_tiled_timing exit $?"
timeout "${PLANE_LIMIT:-150}" python bench/pool_plane_vl_timing.py --out "$OUT/c/pool_plane.json" --runs 20
echo "pool_plane_vl_timing exit $?"
timeout "${COLLOOP_LIMIT:-100}" python bench/colloop_tail_timing.py --out "$OUT/c/colloop_tail.json" --runs 20
echo "colloop_tail_timing exit $?"
