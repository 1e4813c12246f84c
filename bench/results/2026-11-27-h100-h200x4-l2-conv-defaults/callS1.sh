#!/usr/bin/env bash
# Call 1 (fourteenth session, 1 x H100): smoke of the bench under PyTorch's default timing
# (2 conv problems), then the GPU tests of the thirteenth session's code.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
start=$SECONDS
python -m pytest --version 2>&1 | head -1
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p "$OUT/bench" /tmp/ws_s
timeout --foreground -s INT -k 15 200 kernelstitch bench .kb/kernelbench --out "$OUT/bench" --workspace /tmp/ws_s \
  --jobs 1 --build-jobs 14 --time-limit 180 --timing-budget 1 \
  --only "level2/52_Conv2d_Activation_BatchNorm,level2/47_Conv3d_Mish_Tanh" >"$OUT/bench/console.log" 2>&1
echo "bench exit $? at $((SECONDS - start)) s"
cp /tmp/ws_s/.kernelstitch/runs.sqlite "$OUT/runs.sqlite" 2>/dev/null
rm -f "$OUT"/bench/*.png
grep -E "^- " "$OUT/bench/results.md" 2>/dev/null | head -20
python - "$OUT/bench/results.json" <<'P' 2>/dev/null
import json, sys
for p in json.load(open(sys.argv[1]))["problems"]:
    print(p["problem"][:40].ljust(40), p["status"], p.get("timed_under"), p.get("eager_ms"), p.get("published_eager_ms"),
          p.get("compiled_ms"), p.get("candidate_ms"), p.get("speedup_vs_eager"), p.get("speedup_vs_compiled"),
          {k: round(v, 3) if isinstance(v, float) else v for k, v in (p.get("variants_ms") or {}).items()},
          "|", str(p.get("reasons"))[:200], str(p.get("message"))[:200])
P
T="python -P -m pytest -q -rfE -p no:cacheprovider -m gpu --durations=8"
timeout -s INT $((330 - (SECONDS - start))) $T -n 6 --dist loadgroup tests/test_verifier_gpu.py >"$OUT/tests_verifier.log" 2>&1
echo "verifier tests exit $? at $((SECONDS - start)) s"; grep -E "passed|failed|FAILED|Error|s call" "$OUT/tests_verifier.log" | tail -20
timeout -s INT $((575 - (SECONDS - start))) $T -n 6 --dist loadgroup tests/test_batch_norm_gpu.py tests/test_conv_split_gpu.py \
  tests/test_precision_gpu.py tests/test_search_gpu.py tests/test_verifier_protect_gpu.py tests/test_verifier_indirect_gpu.py \
  tests/test_worker_gpu.py >"$OUT/tests_rest.log" 2>&1
echo "other tests exit $? at $((SECONDS - start)) s"; grep -E "passed|failed|FAILED|Error|s call" "$OUT/tests_rest.log" | tail -25
echo "script used $((SECONDS - start)) s"
