#!/usr/bin/env bash
# Call C (twelfth session, 4 x H100): GPU 0: the codegen GPU tests (3xTF32 accuracy) and the
# verifier's GPU tests (6 GiB tests in one lane).  GPUs 1-3: level 1's matmuls and the level-3
# problems with a 3xtf32 variant, then the level-2 problems call B did not run (resumable store).
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
start=$SECONDS
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
LIST=$(cat scripts/_only_list.txt)
mkdir -p "$OUT/sample" /tmp/ws_sample/.kernelstitch
if [ -f .kb/runs_sample.sqlite ]; then cp .kb/runs_sample.sqlite /tmp/ws_sample/.kernelstitch/runs.sqlite && echo resuming; fi
(CUDA_VISIBLE_DEVICES=1,2,3 timeout --foreground -s INT -k 15 $((${KS_BENCH_S:-555} - (SECONDS - start))) kernelstitch bench \
  .kb/kernelbench --out "$OUT/sample" --workspace /tmp/ws_sample --jobs 3 --build-jobs 12 --time-limit 240 \
  --timing-budget 1 --only "$LIST" >"$OUT/sample/console.log" 2>&1; echo "bench exit $? at $((SECONDS - start)) s") & b=$!
T="python -P -m pytest -q -rfE -p no:cacheprovider -m gpu"
CUDA_VISIBLE_DEVICES=0 timeout -s INT 330 $T -n 4 tests/test_codegen_gpu.py >"$OUT/tests_codegen.log" 2>&1
echo "codegen tests exit $? at $((SECONDS - start)) s"; grep -E "passed|failed|FAILED|Error" "$OUT/tests_codegen.log" | tail -12
CUDA_VISIBLE_DEVICES=0 timeout -s INT $((540 - (SECONDS - start))) $T -n 6 --dist loadgroup tests/test_verifier_gpu.py >"$OUT/tests_verifier.log" 2>&1
echo "verifier tests exit $? at $((SECONDS - start)) s"; grep -E "passed|failed|FAILED" "$OUT/tests_verifier.log" | tail -8
wait $b
cp /tmp/ws_sample/.kernelstitch/runs.sqlite "$OUT/runs.sqlite" 2>/dev/null
rm -f "$OUT"/sample/*.png
grep -E "^- (correct|geomean)" "$OUT/sample/results.md" 2>/dev/null
python - "$OUT/sample/results.json" <<'P' 2>/dev/null
import json, sys
for p in json.load(open(sys.argv[1]))["problems"]:
    if p["status"] == "cancelled":
        continue
    print(p["problem"][:40].ljust(40), p["status"], p.get("speedup_vs_eager"), p.get("speedup_vs_compiled"),
          {k: round(v, 3) if isinstance(v, float) else v for k, v in (p.get("variants_ms") or {}).items()},
          "|", str(p.get("reasons"))[:160])
P
echo "script used $((SECONDS - start)) s"
