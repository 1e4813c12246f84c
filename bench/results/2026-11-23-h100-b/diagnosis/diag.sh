#!/usr/bin/env bash
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
( python -P .scratch/segv.py >"$OUT/segv.log" 2>&1; echo "segv rc=$?" >>"$OUT/segv.log";
  if ! grep -q "^dim raised" "$OUT/segv.log"; then
    timeout 120 cuda-gdb -batch -ex run -ex bt --args python -P .scratch/segv.py >>"$OUT/segv.log" 2>&1; fi ) &
mkdir -p /tmp/p && cp examples/layernorm_residual.py examples/mlp.py /tmp/p/ && cd /tmp/p
for f in layernorm_residual mlp; do kernelstitch generate $f.py --no-verify >/dev/null 2>&1; echo "gen $f rc=$?"; done
t=$(date +%s); kernelstitch verify layernorm_residual.py .kernelstitch/layernorm_residual/Model/model_new.py --json >"$OUT/ln1.json" 2>"$OUT/ln1.err"; echo "ln1 rc=$? $(( $(date +%s)-t ))s"
t=$(date +%s); kernelstitch verify layernorm_residual.py .kernelstitch/layernorm_residual/Model/model_new.py --json >"$OUT/ln2.json" 2>"$OUT/ln2.err"; echo "ln2 rc=$? $(( $(date +%s)-t ))s"
wait
t=$(date +%s); kernelstitch verify mlp.py .kernelstitch/mlp/Model/model_new.py --json >"$OUT/mlp.json" 2>"$OUT/mlp.err"; echo "mlp rc=$? $(( $(date +%s)-t ))s"
cat "$OUT/segv.log" | tail -30
