#!/usr/bin/env bash
# Call C (eleventh session, 4 x H100): the stress-case GPU tests after the nan_or_inf fix and the
# verifier's GPU tests (GPUs 0, 1), beside the softmax / attention / group-norm problems under the
# stress-case verifier and the out-of-line strided offset (GPUs 2, 3, a fresh store); then GPUs 0
# and 1 resume level 2 for issue 28 from .kb/runs.sqlite.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
start=$SECONDS
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
T="python -P -m pytest -q -rfE -p no:cacheprovider -m gpu"
run_tests() {  # GPU, log name, pytest arguments...
  local gpu=$1 log=$OUT/$2.log; shift 2
  CUDA_VISIBLE_DEVICES=$gpu timeout -s INT 240 $T "$@" >"$log" 2>&1
  echo "exit $? at $((SECONDS - start)) s" >>"$log"
}
run_tests 0 tests_stress_precision -n 4 tests/test_stress_cases_gpu.py tests/test_precision_gpu.py & t0=$!
run_tests 1 tests_verifier -n 6 --dist loadgroup tests/test_verifier_gpu.py & t1=$!
mkdir -p "$OUT/stress"
(CUDA_VISIBLE_DEVICES=2,3 timeout --foreground -s INT -k 15 $((560 - (SECONDS - start))) kernelstitch bench \
  .kb/kernelbench --out "$OUT/stress" --workspace /tmp/ws_stress --jobs 2 --build-jobs 12 --time-limit 240 \
  --timing-budget 1 --only level2/6_Conv3d_Softmax_MaxPool_MaxPool,level2/84_Gemm_BatchNorm_Scaling_Softmax,level2/91_ConvTranspose2d_Softmax_BiasAdd_Scaling_Sigmoid,level2/19_ConvTranspose2d_GELU_GroupNorm,level2/37_Matmul_Swish_Sum_GroupNorm,level3/50_ReLUSelfAttention,level3/31_VisionAttention \
  >"$OUT/stress/console.log" 2>&1; echo "stress bench exit $? at $((SECONDS - start)) s") & b=$!
wait $t0 $t1
for f in tests_stress_precision tests_verifier; do
  echo "== $f"; grep -E "passed|failed|FAILED|^exit" "$OUT/$f.log" | tail -8
done
CUDA_VISIBLE_DEVICES=0,1 KS_TIME_LIMIT=240 bash scripts/device_bench.sh $((575 - (SECONDS - start))) .kb/kernelbench \
  --levels 2 --jobs 2
wait $b
echo "== stress"; grep -E "^- (correct|geomean)|^\| (level|all)" "$OUT/stress/results.md" 2>/dev/null | head -14
python - "$OUT/stress/results.json" <<'P' 2>/dev/null
import json, sys
for p in json.load(open(sys.argv[1]))["problems"]:
    print(p["problem"][:44].ljust(44), p["status"], p.get("speedup_vs_eager"), p.get("speedup_vs_compiled"),
          "build", (p.get("prepare_stage_s") or {}).get("build"), "|", str(p.get("reasons"))[:300])
P
echo "script used $((SECONDS - start)) s"
