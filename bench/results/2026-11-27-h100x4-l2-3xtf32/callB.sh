#!/usr/bin/env bash
# Call B (twelfth session, 4 x H100): 3xTF32.  GPU 0: the microbenchmark (chunk sizes), the GEMM
# codegen GPU tests, the search GPU tests, then the verifier's GPU tests alone.  GPUs 1-3: the
# level-2 problems with a GEMM step (the 3xtf32 variant is proposed there), a fresh store.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
start=$SECONDS
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
L2=level2/9_Matmul_Subtract_Multiply_ReLU,level2/30_Gemm_GroupNorm_Hardtanh,level2/37_Matmul_Swish_Sum_GroupNorm,level2/39_Gemm_Scale_BatchNorm,level2/41_Gemm_BatchNorm_GELU_ReLU,level2/51_Gemm_Subtract_GlobalAvgPool_LogSumExp_GELU_ResidualAdd,level2/62_Matmul_GroupNorm_LeakyReLU_Sum,level2/64_Gemm_LogSumExp_LeakyReLU_LeakyReLU_GELU_GELU,level2/70_Gemm_Sigmoid_Scaling_ResidualAdd,level2/75_Gemm_GroupNorm_Min_BiasAdd,level2/80_Gemm_Max_Subtract_GELU,level2/81_Gemm_Swish_Divide_Clamp_Tanh_Clamp,level2/84_Gemm_BatchNorm_Scaling_Softmax,level2/88_Gemm_GroupNorm_Swish_Multiply_Swish,level2/94_Gemm_BiasAdd_Hardtanh_Mish_GroupNorm,level2/95_Matmul_Add_Swish_Tanh_GELU_Hardtanh,level2/97_Matmul_BatchNorm_BiasAdd_Divide_Swish,level2/98_Matmul_AvgPool_GELU_Scale_Max,level2/55_Matmul_MaxPool_Sum_Scale,level2/66_Matmul_Dropout_Softmax,level2/68_Matmul_Min_Subtract,level2/28_BMM_InstanceNorm_Sum_ResidualAdd_Multiply
mkdir -p "$OUT/l2gemm" /tmp/ws_l2gemm
if [ -f .kb/runs_3x.sqlite ]; then mkdir -p /tmp/ws_l2gemm/.kernelstitch && cp .kb/runs_3x.sqlite /tmp/ws_l2gemm/.kernelstitch/runs.sqlite && echo resuming; fi
(CUDA_VISIBLE_DEVICES=1,2,3 timeout --foreground -s INT -k 15 $((560 - (SECONDS - start))) kernelstitch bench \
  .kb/kernelbench --out "$OUT/l2gemm" --workspace /tmp/ws_l2gemm --jobs 3 --build-jobs 12 --time-limit 240 \
  --timing-budget 1 --only "$L2" >"$OUT/l2gemm/console.log" 2>&1; echo "bench exit $? at $((SECONDS - start)) s") & b=$!
CUDA_VISIBLE_DEVICES=0 python bench/microbench/split_tf32.py 2>&1 | tee "$OUT/split_tf32.jsonl"
echo "microbench done at $((SECONDS - start)) s"
T="python -P -m pytest -q -rfE -p no:cacheprovider -m gpu"
CUDA_VISIBLE_DEVICES=0 timeout -s INT 200 $T -n 4 tests/test_codegen_gpu.py tests/test_search_gpu.py -s -k "gemm or search or variant" \
  >"$OUT/tests_gemm.log" 2>&1
echo "gemm tests exit $? at $((SECONDS - start)) s"; grep -E "passed|failed|FAILED|split_err|Error" "$OUT/tests_gemm.log" | tail -12
CUDA_VISIBLE_DEVICES=0 timeout -s INT $((540 - (SECONDS - start))) $T -n 6 --dist loadgroup tests/test_verifier_gpu.py >"$OUT/tests_verifier.log" 2>&1
echo "verifier tests exit $? at $((SECONDS - start)) s"; grep -E "passed|failed|FAILED" "$OUT/tests_verifier.log" | tail -8
wait $b
cp /tmp/ws_l2gemm/.kernelstitch/runs.sqlite "$OUT/runs.sqlite" 2>/dev/null
grep -E "^- (correct|geomean)" "$OUT/l2gemm/results.md" 2>/dev/null
python - "$OUT/l2gemm/results.json" <<'P' 2>/dev/null
import json, sys
for p in json.load(open(sys.argv[1]))["problems"]:
    d = p.get("delivered") or {}
    print(p["problem"][7:40].ljust(33), p["status"], p.get("speedup_vs_eager"), p.get("speedup_vs_compiled"),
          "variants", {k: round(v, 3) if isinstance(v, float) else v for k, v in (p.get("variants_ms") or {}).items()},
          "|", str(p.get("reasons"))[:200], str(p.get("notes"))[:300])
P
echo "script used $((SECONDS - start)) s"
