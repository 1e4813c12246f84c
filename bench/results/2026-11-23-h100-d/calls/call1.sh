#!/usr/bin/env bash
# Device call 1: reduction microbench (prebuilt sm_90a binaries), codegen GPU tests, Verifier GPU suite.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
t0=$(date +%s)
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
python -m pip install -q --no-deps .whl/execnet-*.whl .whl/pytest_xdist-*.whl >>"$OUT/install.log" 2>&1 || echo "no xdist"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
python - <<'PY' >"$OUT/mb.jsonl"
import torch, json
x = torch.empty(1 << 28, device="cuda"); y = torch.empty_like(x)
best = 1e9
for _ in range(10):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record(); y.copy_(x); b.record(); b.synchronize(); best = min(best, a.elapsed_time(b))
print(json.dumps({"problem": "memcpy", "ms": best, "bytes": 2 << 30, "gbps": (2 << 30) / best / 1e6}))
PY
for b in .scratch/mb/bin/*; do
  case "$b" in *.log) continue;; esac
  timeout 60 "$b" >>"$OUT/mb.jsonl" 2>&1 || echo "{\"failed\": \"$b\"}" >>"$OUT/mb.jsonl"
done
cat "$OUT/mb.jsonl"
echo "microbench done at $(( $(date +%s) - t0 )) s"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a
timeout 220 python -m pytest -q -x tests/test_codegen_gpu.py >"$OUT/codegen_gpu.log" 2>&1
echo "codegen gpu exit $? at $(( $(date +%s) - t0 )) s"; tail -3 "$OUT/codegen_gpu.log"
left=$(( 540 - ($(date +%s) - t0) ))
KS_VERDICT_DIR="$OUT/verdicts" timeout $left python -m pytest -q -n 4 tests/test_verifier_gpu.py >"$OUT/verifier_gpu.log" 2>&1
echo "verifier gpu exit $? at $(( $(date +%s) - t0 )) s"; tail -15 "$OUT/verifier_gpu.log"
cd "$OUT" && tar czf verdicts.tgz verdicts 2>/dev/null && rm -rf verdicts
