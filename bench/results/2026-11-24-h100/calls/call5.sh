#!/usr/bin/env bash
# Device call 5 (2026-11-24): variants of the coder's strided-softmax cluster kernel (math, register caps).
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
for rep in 1 2; do
  for b in .scratch/colbin/*; do timeout 30 "$b" >>"$OUT/mb.jsonl" 2>&1 || echo "{\"failed\": \"$b\"}" >>"$OUT/mb.jsonl"; done
done
timeout 60 .scratch/softmax_variants softmax_dim1_3d 2>&1 | grep -E "w32_ty16_rpt16_c4|memcpy" >>"$OUT/mb.jsonl"
cat "$OUT/mb.jsonl"
