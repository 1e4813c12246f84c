#!/usr/bin/env bash
# Call 1 (fifteenth session, 1 x H100): GPU tests of the channels-last kernels and the layout
# copy, then bench + per-kernel profiles of three 2-D conv problems against torch.compile.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
start=$SECONDS
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
T="python -P -m pytest -q -rfE -p no:cacheprovider -m gpu --durations=5"
timeout -s INT 170 $T -n 8 tests/test_layout_swap_gpu.py tests/test_codegen_gpu.py -k "swap or channels_last or tiled or more_dims" >"$OUT/tests_layout.log" 2>&1
echo "layout tests exit $? at $((SECONDS - start)) s"; grep -E "passed|failed|FAILED|Error|s call" "$OUT/tests_layout.log" | tail -25
mkdir -p "$OUT/bench" /tmp/ws_t
timeout --foreground -s INT -k 15 $((470 - (SECONDS - start))) kernelstitch bench .kb/kernelbench --out "$OUT/bench" --workspace /tmp/ws_t \
  --jobs 1 --build-jobs 14 --time-limit 200 --timing-budget 1 \
  --only "level2/52_Conv2d_Activation_BatchNorm,level2/93_ConvTranspose2d_Add_Min_GELU_Multiply,level2/85_Conv2d_GroupNorm_Scale_MaxPool_Clamp" >"$OUT/bench/console.log" 2>&1
echo "bench exit $? at $((SECONDS - start)) s"
cp /tmp/ws_t/.kernelstitch/runs.sqlite "$OUT/runs.sqlite" 2>/dev/null
rm -f "$OUT"/bench/*.png
python - "$OUT/bench/results.json" <<'P' 2>/dev/null
import json, sys
for p in json.load(open(sys.argv[1]))["problems"]:
    print(p["problem"][:40].ljust(40), p["status"], p.get("eager_ms"), p.get("compiled_ms"), p.get("candidate_ms"),
          p.get("speedup_vs_eager"), p.get("speedup_vs_compiled"), p.get("delivered"),
          {k: round(v, 3) if isinstance(v, float) else v for k, v in (p.get("variants_ms") or {}).items()},
          "|", str(p.get("reasons"))[:200], str(p.get("message"))[:200])
P
K=.kb/kernelbench/level2
timeout -s INT $((585 - (SECONDS - start))) python scripts/profile_vs_compile.py --workspace /tmp/ws_t "$OUT/prof" \
  $K/52_Conv2d_Activation_BatchNorm.py $K/93_ConvTranspose2d_Add_Min_GELU_Multiply.py $K/85_Conv2d_GroupNorm_Scale_MaxPool_Clamp.py >"$OUT/prof.log" 2>"$OUT/prof_err.log"
echo "profiles exit $? at $((SECONDS - start)) s"; tail -3 "$OUT/prof_err.log"
echo "script used $((SECONDS - start)) s"
