#!/usr/bin/env bash
# Call A (thirteenth session, 4 x H100): first GPU run of the conv 3xTF32 variant.
# GPU 0: the 3xTF32 GEMM / conv GPU tests, then the verifier's GPU tests alone.
# GPUs 1-3: level1/16-18 (numpy_T fix) and the 29 level-2 problems that get conv3xtf32; a store kept for resuming.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
start=$SECONDS
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
LIST=level1/16_Matmul_with_transposed_A,level1/17_Matmul_with_transposed_B,level1/18_Matmul_with_transposed_both,$(cat scripts/_only_list.txt)
mkdir -p "$OUT/bench" /tmp/ws_a
if [ -f .kb/runs_a.sqlite ]; then mkdir -p /tmp/ws_a/.kernelstitch && cp .kb/runs_a.sqlite /tmp/ws_a/.kernelstitch/runs.sqlite && echo resuming; fi
(CUDA_VISIBLE_DEVICES=1,2,3 timeout --foreground -s INT -k 15 $((560 - (SECONDS - start))) kernelstitch bench \
  .kb/kernelbench --out "$OUT/bench" --workspace /tmp/ws_a --jobs 3 --build-jobs 12 --time-limit 240 \
  --timing-budget 1 --only "$LIST" >"$OUT/bench/console.log" 2>&1; echo "bench exit $? at $((SECONDS - start)) s") & b=$!
T="python -P -m pytest -q -rfE -p no:cacheprovider -m gpu"
CUDA_VISIBLE_DEVICES=0 timeout -s INT 240 $T -n 4 -s tests/test_gemm_split_gpu.py tests/test_conv_split_gpu.py >"$OUT/tests_split.log" 2>&1
echo "split tests exit $? at $((SECONDS - start)) s"; grep -E "passed|failed|FAILED|err|Error" "$OUT/tests_split.log" | tail -25
CUDA_VISIBLE_DEVICES=0 timeout -s INT $((530 - (SECONDS - start))) $T -n 6 --dist loadgroup tests/test_verifier_gpu.py >"$OUT/tests_verifier.log" 2>&1
echo "verifier tests exit $? at $((SECONDS - start)) s"; grep -E "passed|failed|FAILED|Error" "$OUT/tests_verifier.log" | tail -12
wait $b
cp /tmp/ws_a/.kernelstitch/runs.sqlite "$OUT/runs.sqlite" 2>/dev/null
rm -f "$OUT"/bench/*.png
grep -E "^- (correct|geomean)" "$OUT/bench/results.md" 2>/dev/null
python - "$OUT/bench/results.json" <<'P' 2>/dev/null
import json, sys
for p in json.load(open(sys.argv[1]))["problems"]:
    print(p["problem"][:40].ljust(40), p["status"], p.get("speedup_vs_eager"), p.get("speedup_vs_compiled"),
          {k: round(v, 3) if isinstance(v, float) else v for k, v in (p.get("variants_ms") or {}).items()},
          "|", str(p.get("reasons"))[:160], str(p.get("message"))[:160])
P
echo "script used $((SECONDS - start)) s"
