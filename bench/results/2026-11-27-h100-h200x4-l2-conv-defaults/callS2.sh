#!/usr/bin/env bash
# Call 2 (fourteenth session, 4 GPUs): GPUs 1-3 bench the level-2 convolution problems under
# PyTorch's default timing (resumable store); GPU 0 reruns the two failing verifier GPU tests
# (verdicts kept), then profiles eager / torch.compile / ours on three level-2 problems.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
start=$SECONDS
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
LIST=$(cat scripts/_only_list.txt)
mkdir -p "$OUT/bench" /tmp/ws_b
if [ -f .kb/runs_s.sqlite ]; then mkdir -p /tmp/ws_b/.kernelstitch && cp .kb/runs_s.sqlite /tmp/ws_b/.kernelstitch/runs.sqlite && echo resuming; fi
(CUDA_VISIBLE_DEVICES=1,2,3 timeout --foreground -s INT -k 15 $((565 - (SECONDS - start))) kernelstitch bench \
  .kb/kernelbench --out "$OUT/bench" --workspace /tmp/ws_b --jobs 3 --build-jobs 12 --time-limit 240 \
  --timing-budget 1 --only "$LIST" >"$OUT/bench/console.log" 2>&1; echo "bench exit $? at $((SECONDS - start)) s") & b=$!
T="python -P -m pytest -q -rfE -p no:cacheprovider -m gpu"
export KS_VERDICT_DIR="$OUT/verdicts"
for i in 1 2 3; do
  CUDA_VISIBLE_DEVICES=0 timeout -s INT 100 $T -s -k "cheat_side_stream and untimed" tests/test_verifier_gpu.py 2>&1 | grep -E "accepted|rejected|passed|failed" | tail -3
  cp "$OUT/verdicts/cheat_side_stream.json" "$OUT/verdicts/cheat_side_stream_$i.json" 2>/dev/null
done
echo "side-stream reruns done at $((SECONDS - start)) s"
CUDA_VISIBLE_DEVICES=0 timeout -s INT 150 $T -s -k "reference_ops_when_timed" tests/test_verifier_gpu.py 2>&1 | grep -E "accepted|rejected|passed|failed" | tail -3
echo "reference-ops rerun done at $((SECONDS - start)) s"
python - "$OUT/verdicts" <<'P'
import json, sys
from pathlib import Path
for f in sorted(Path(sys.argv[1]).glob("*.json")):
    v = json.loads(f.read_text())
    print("##", f.name, v.get("status"), [r.get("code") for r in v.get("reasons", [])])
    for n in v.get("notes", []):
        print("   note:", str(n)[:300])
    print("   checks:", [(c.get("name"), c.get("passed")) for c in v.get("checks", [])][:40])
P
CUDA_VISIBLE_DEVICES=0 timeout -s INT $((540 - (SECONDS - start))) python scripts/_prof_loss.py "$OUT/prof" \
  .kb/kernelbench/level2/52_Conv2d_Activation_BatchNorm.py .kb/kernelbench/level2/85_Conv2d_GroupNorm_Scale_MaxPool_Clamp.py \
  .kb/kernelbench/level2/60_ConvTranspose3d_Swish_GroupNorm_HardSwish.py 2>"$OUT/prof_err.log"
echo "profiles done at $((SECONDS - start)) s"; tail -3 "$OUT/prof_err.log"
wait $b
cp /tmp/ws_b/.kernelstitch/runs.sqlite "$OUT/runs.sqlite" 2>/dev/null
rm -f "$OUT"/bench/*.png
grep -E "^- (correct|geomean|KernelBench)" "$OUT/bench/results.md" 2>/dev/null
python - "$OUT/bench/results.json" <<'P' 2>/dev/null
import json, sys
for p in json.load(open(sys.argv[1]))["problems"]:
    print(p["problem"][:40].ljust(40), p["status"], p.get("speedup_vs_eager"), p.get("speedup_vs_compiled"), p.get("delivered"),
          {k: round(v, 3) if isinstance(v, float) else v for k, v in (p.get("variants_ms") or {}).items()},
          "|", str(p.get("message"))[:120])
P
echo "script used $((SECONDS - start)) s"
