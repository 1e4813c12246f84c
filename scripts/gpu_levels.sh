#!/usr/bin/env bash
# Issue 28: whole KernelBench levels on every GPU of one machine, resumed across device calls.
# One call (a 4-GPU kind, carry .kb/kernelbench) runs `kernelstitch bench --jobs <GPUs>` until
# LIMIT seconds, then stops it with SIGINT (finished problems are saved); the next call passes
# the last results.json back (copied into the tree: untracked files travel) with RESUME, and the
# bench takes those problems from it instead of running them again.  Every call must run the same
# commit: a result is reused only for the same compiler sources, settings and GPU model.
#   OUT=$OUT LEVELS="1 2 3" [RESUME=path/results.json] [LIMIT=560] bash scripts/gpu_levels.sh
# Merge the calls' results.json at the end with `kernelstitch bench-merge`.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT/bench"
LIMIT=${LIMIT:-560}
start=$SECONDS
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a} PYTHONUNBUFFERED=1
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
gpus=$(python -c "import torch; print(torch.cuda.device_count())")
resume=()
if [ -n "${RESUME:-}" ]; then resume=(--resume-from "$RESUME"); fi
# shellcheck disable=SC2086  # LEVELS is a list
timeout --foreground -s INT -k 20 $((LIMIT - (SECONDS - start))) kernelstitch bench .kb/kernelbench \
  --levels $LEVELS --out "$OUT/bench" --workspace /tmp/ws_levels --jobs "$gpus" --build-jobs 16 \
  --time-limit 240 --timing-budget 1 "${resume[@]}" >"$OUT/bench/console.log" 2>&1
echo "bench exit $? on $gpus GPUs at $((SECONDS - start)) s"
rm -f "$OUT"/bench/*.png
grep -E "^- (correct|geomean)" "$OUT/bench/results.md" 2>/dev/null
python - "$OUT/bench/results.json" <<'P' 2>/dev/null
import json, sys
problems = json.load(open(sys.argv[1]))["problems"]
done = [p for p in problems if p["status"] not in ("cancelled",)]
print(f"{len(done)} of {len(problems)} problems finished (reused: {sum(bool(p.get('reused')) for p in problems)})")
P
