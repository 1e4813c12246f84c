#!/usr/bin/env bash
# Call 4 (fourteenth session, 4 GPUs): the 27 level-2 convolution problems call 2 left cancelled
# (21 on GPUs 1-3, 6 on GPU 0 after the verifier's GPU tests of the settings-checks change).
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
start=$SECONDS
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
mkdir -p "$OUT/bench" "$OUT/bench0" /tmp/ws_c/.kernelstitch /tmp/ws_d
cp .kb/runs_s2.sqlite /tmp/ws_c/.kernelstitch/runs.sqlite
(CUDA_VISIBLE_DEVICES=1,2,3 timeout --foreground -s INT -k 15 $((425 - (SECONDS - start))) kernelstitch bench \
  .kb/kernelbench --out "$OUT/bench" --workspace /tmp/ws_c --jobs 3 --build-jobs 10 --time-limit 240 \
  --timing-budget 1 --only "$(cat scripts/_only_list.txt)" >"$OUT/bench/console.log" 2>&1; echo "bench exit $? at $((SECONDS - start)) s") & b=$!
T="python -P -m pytest -q -rfE -p no:cacheprovider -m gpu"
CUDA_VISIBLE_DEVICES=0 timeout -s INT 130 $T -n 2 -k "reference_ops_when_timed or detects_timing_settings" tests/test_verifier_gpu.py 2>&1 | grep -E "passed|failed|FAILED" | tail -4
echo "tests done at $((SECONDS - start)) s"
(CUDA_VISIBLE_DEVICES=0 timeout --foreground -s INT -k 15 $((425 - (SECONDS - start))) kernelstitch bench \
  .kb/kernelbench --out "$OUT/bench0" --workspace /tmp/ws_d --jobs 1 --build-jobs 4 --time-limit 240 \
  --timing-budget 1 --only "$(cat scripts/_only_list_b.txt)" >"$OUT/bench0/console.log" 2>&1; echo "bench0 exit $? at $((SECONDS - start)) s")
wait $b
cp /tmp/ws_c/.kernelstitch/runs.sqlite "$OUT/runs.sqlite" 2>/dev/null
cp /tmp/ws_d/.kernelstitch/runs.sqlite "$OUT/runs0.sqlite" 2>/dev/null
rm -f "$OUT"/bench/*.png "$OUT"/bench0/*.png
for f in "$OUT/bench/results.json" "$OUT/bench0/results.json"; do
python - "$f" <<'P' 2>/dev/null
import json, sys
for p in json.load(open(sys.argv[1]))["problems"]:
    if p.get("reused"): continue
    print(p["problem"][:34].ljust(34), p["status"], round(p.get("speedup_vs_eager") or 0, 2), round(p.get("speedup_vs_compiled") or 0, 2), p.get("delivered"))
P
done
echo "script used $((SECONDS - start)) s"
