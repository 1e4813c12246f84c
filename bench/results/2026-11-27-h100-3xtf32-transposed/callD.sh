#!/usr/bin/env bash
# Call D (twelfth session, one H100): the 3xTF32 GPU tests (transposed operands read in place), the
# conv 3xTF32 microbenchmark, then level1/16-18 (transposed matmuls) with the in-place split.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
start=$SECONDS
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
timeout -s INT 200 python -P -m pytest -q -rfE -p no:cacheprovider -m gpu -s tests/test_gemm_split_gpu.py >"$OUT/tests_split.log" 2>&1
echo "split tests exit $? at $((SECONDS - start)) s"; grep -E "passed|failed|FAILED|largest error|Error" "$OUT/tests_split.log" | tail -10
timeout -s INT 170 python bench/microbench/conv_split_tf32.py .kb/kernelbench >"$OUT/conv_split_tf32.jsonl" 2>"$OUT/conv_split.err"
echo "conv microbench exit $? at $((SECONDS - start)) s"
python - "$OUT/conv_split_tf32.jsonl" <<'P'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "error" in r:
        print(r["problem"][:36], r["error"][:80]); continue
    print(f'{r["problem"][:36]:36} {r["conv"][:15]:15} K={r["reduce_len"]:5} fp32 {r["fp32_ms"]:8.3f} tf32 {r["tf32_ms"]:8.3f} '
          f'cat {r["cat3x_ms"]:8.3f} ({r["speedup_cat"]:.2f}x) three {r["three3x_ms"]:8.3f} ({r["speedup_three"]:.2f}x) '
          f'err fp32 {r["err_fp32"]:.1e} tf32 {r["err_tf32"]:.1e} cat {r["err_cat"]:.1e} three {r["err_three"]:.1e}')
P
mkdir -p "$OUT/l1t" /tmp/ws_l1t
timeout --foreground -s INT -k 15 $((575 - (SECONDS - start))) kernelstitch bench .kb/kernelbench --out "$OUT/l1t" \
  --workspace /tmp/ws_l1t --build-jobs 14 --time-limit 240 --timing-budget 1 \
  --only level1/16_Matmul_with_transposed_A,level1/17_Matmul_with_transposed_B,level1/18_Matmul_with_transposed_both \
  >"$OUT/l1t/console.log" 2>&1
echo "bench exit $? at $((SECONDS - start)) s"
rm -f "$OUT"/l1t/*.png
python - "$OUT/l1t/results.json" <<'P' 2>/dev/null
import json, sys
for p in json.load(open(sys.argv[1]))["problems"]:
    print(p["problem"][:40].ljust(40), p["status"], p.get("speedup_vs_eager"), p.get("speedup_vs_compiled"),
          {k: round(v, 3) if isinstance(v, float) else v for k, v in (p.get("variants_ms") or {}).items()},
          "|", str(p.get("message"))[:200])
P
echo "script used $((SECONDS - start)) s"
