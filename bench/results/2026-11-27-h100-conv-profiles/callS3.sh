#!/usr/bin/env bash
# Call 3 (fourteenth session, 1 GPU): the two failing verifier tests' verdicts, then eager /
# torch.compile / every variant of ours per kernel on three level-2 convolution problems.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
start=$SECONDS
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
T="python -P -m pytest -q -rfE -p no:cacheprovider -m gpu"
mkdir -p /tmp/extra
export KS_VERDICT_DIR=/tmp/extra/verdicts
timeout -s INT 120 $T -s -k "cheat_side_stream and untimed" tests/test_verifier_gpu.py 2>&1 | grep -E "accepted|rejected|passed|failed" | tail -3
timeout -s INT 150 $T -s -k "reference_ops_when_timed" tests/test_verifier_gpu.py 2>&1 | grep -E "accepted|rejected|passed|failed" | tail -3
echo "tests done at $((SECONDS - start)) s"
python - /tmp/extra/verdicts <<'P'
import json, sys
from pathlib import Path
for f in sorted(Path(sys.argv[1]).glob("*.json")):
    v = json.loads(f.read_text())
    print("##", f.name, v.get("status"), [r.get("code") for r in v.get("reasons", [])])
    for n in v.get("notes", []):
        print("   note:", str(n)[:400])
    print("   checks:", [(c.get("name"), c.get("passed")) for c in v.get("checks", [])][:40])
P
timeout -s INT $((560 - (SECONDS - start))) python scripts/_prof_loss.py /tmp/extra/prof \
  .kb/kernelbench/level2/52_Conv2d_Activation_BatchNorm.py .kb/kernelbench/level2/85_Conv2d_GroupNorm_Scale_MaxPool_Clamp.py \
  .kb/kernelbench/level2/60_ConvTranspose3d_Swish_GroupNorm_HardSwish.py >/tmp/extra/prof.log 2>&1
echo "profiles done at $((SECONDS - start)) s"
cp -r /tmp/ws_prof/.kernelstitch /tmp/extra/ws 2>/dev/null; find /tmp/extra/ws \( -name "*.so" -o -name "*.o" -o -name "*.sqlite*" \) -delete 2>/dev/null
tar -czf "$OUT/extra.tgz" -C /tmp extra
grep -E "^==|ms/call" /tmp/extra/prof.log
echo "script used $((SECONDS - start)) s"
