#!/usr/bin/env bash
# Call C (thirteenth session, 4 x H100): the level-2 problems neither call A, call B nor the 3xTF32 GEMM run measured, weakest first, on all 4 GPUs.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
start=$SECONDS
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
LIST=$(cat scripts/_only_list.txt)
mkdir -p "$OUT/bench" /tmp/ws_c
if [ -f .kb/runs_c.sqlite ]; then mkdir -p /tmp/ws_c/.kernelstitch && cp .kb/runs_a.sqlite /tmp/ws_c/.kernelstitch/runs.sqlite && echo resuming; fi
(CUDA_VISIBLE_DEVICES=0,1,2,3 timeout --foreground -s INT -k 15 $((400 - (SECONDS - start))) kernelstitch bench \
  .kb/kernelbench --out "$OUT/bench" --workspace /tmp/ws_c --jobs 4 --build-jobs 14 --time-limit 240 \
  --timing-budget 1 --only "$LIST" >"$OUT/bench/console.log" 2>&1; echo "bench exit $? at $((SECONDS - start)) s") & b=$!
T="python -P -m pytest -q -rfE -p no:cacheprovider -m gpu"
wait $b
cp /tmp/ws_c/.kernelstitch/runs.sqlite "$OUT/runs.sqlite" 2>/dev/null
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
