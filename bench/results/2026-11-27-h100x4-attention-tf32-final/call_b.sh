#!/usr/bin/env bash
# Call B (eleventh session, 4 x H100): the GPU tests, one GPU each (stress cases + precision;
# attention; verifier), beside the softmax problems under the stress-case verifier on GPU 3;
# then the attention set under tf32 on GPUs 0-2 (the GPT block on the final tiling).
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
start=$SECONDS
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
T="python -P -m pytest -q -rfE -p no:cacheprovider -m gpu"
run_tests() {  # GPU, log name, pytest arguments...
  local gpu=$1 log=$OUT/$2.log; shift 2
  CUDA_VISIBLE_DEVICES=$gpu timeout -s INT 250 $T "$@" >"$log" 2>&1
  echo "exit $? at $((SECONDS - start)) s" >>"$log"
}
run_tests 0 tests_stress_precision -n 4 tests/test_stress_cases_gpu.py tests/test_precision_gpu.py & t0=$!
run_tests 1 tests_attention -n 8 --dist loadgroup tests/test_attention_gpu.py & t1=$!
run_tests 2 tests_verifier -n 6 tests/test_verifier_gpu.py & t2=$!
mkdir -p "$OUT/softmax" "$OUT/tf32"
(CUDA_VISIBLE_DEVICES=3 timeout --foreground -s INT -k 15 $((570 - (SECONDS - start))) kernelstitch bench \
  .kb/kernelbench --out "$OUT/softmax" --workspace /tmp/ws_softmax --build-jobs 8 --time-limit 200 \
  --timing-budget 1 --only level2/6_Conv3d_Softmax_MaxPool_MaxPool level2/24_Conv3d_Min_Softmax \
  level2/84_Gemm_BatchNorm_Scaling_Softmax level2/91_ConvTranspose2d_Softmax_BiasAdd_Scaling_Sigmoid \
  level3/50_ReLUSelfAttention level3/31_VisionAttention level2/18_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp \
  >"$OUT/softmax/console.log" 2>&1; echo "softmax bench exit $? at $((SECONDS - start)) s") & b=$!
wait $t0 $t1 $t2
for f in tests_stress_precision tests_attention tests_verifier; do
  echo "== $f"; grep -E "passed|failed|FAILED|ERROR|^exit" "$OUT/$f.log" | tail -12
done
CUDA_VISIBLE_DEVICES=0,1,2 timeout --foreground -s INT -k 15 $((575 - (SECONDS - start))) kernelstitch bench \
  .kb/attn --out "$OUT/tf32" --workspace /tmp/ws_tf32 --jobs 3 --build-jobs 10 --time-limit 250 \
  --timing-budget 1 --precision tf32 >"$OUT/tf32/console.log" 2>&1
echo "tf32 bench exit $? at $((SECONDS - start)) s"
wait $b
for d in softmax tf32; do
  echo "== $d"; grep -E "^- (correct|geomean)|^\| " "$OUT/$d/results.md" 2>/dev/null | head -14
done
echo "script used $((SECONDS - start)) s"
