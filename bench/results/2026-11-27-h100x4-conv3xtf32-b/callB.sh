#!/usr/bin/env bash
# Call B (thirteenth session, 4 GPUs): the rest of the conv 3xTF32 and 3xTF32 problems, resumed from call A's store.
# GPU 0: the too-large verifier test (sized from the device now) (alone: a quarter of the card each for input and output).
# GPUs 1-3: level2/60, 91, the 12 level-1 conv problems and 9 level-3 problems.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
start=$SECONDS
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
LIST=$(cat scripts/_only_list.txt)
mkdir -p "$OUT/bench" /tmp/ws_a
if [ -f .kb/runs_a.sqlite ]; then mkdir -p /tmp/ws_a/.kernelstitch && cp .kb/runs_a.sqlite /tmp/ws_a/.kernelstitch/runs.sqlite && echo resuming; fi
(CUDA_VISIBLE_DEVICES=1,2,3 timeout --foreground -s INT -k 15 $((560 - (SECONDS - start))) kernelstitch bench \
  .kb/kernelbench --out "$OUT/bench" --workspace /tmp/ws_a --jobs 3 --build-jobs 12 --time-limit 240 \
  --timing-budget 1 --only "$LIST" >"$OUT/bench/console.log" 2>&1; echo "bench exit $? at $((SECONDS - start)) s") & b=$!
T="python -P -m pytest -q -rfE -p no:cacheprovider -m gpu"
CUDA_VISIBLE_DEVICES=0 timeout -s INT 240 $T -k too_large tests/test_verifier_gpu.py >"$OUT/tests_too_large.log" 2>&1
echo "too-large test exit $? at $((SECONDS - start)) s"; grep -E "passed|failed|FAILED|err|Error" "$OUT/tests_too_large.log" | tail -25
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
