#!/usr/bin/env bash
# One lent multi-GPU call (carry .kb/kernelbench, and .kb/runs.sqlite to resume): whole KernelBench
# levels with `kernelstitch bench --jobs <GPUs>` (issues 22 and 28), optionally with GPU tests on
# GPU 0 first.  Every call of one measurement must run the same commit (the run store reuses a
# problem only for the same compiler sources): give SRC=tarball (`git archive TAG agents
# kernelstitch profiler server pyproject.toml scripts`) to run a tagged commit from any checkout.
#   OUT=$OUT LEVELS="2" [TESTS="tests/a.py tests/b.py"] [TESTS_K="pytest -k expression"] [SRC=levelsrc.tar] [LIMIT=585] \
#     [KS_TIME_LIMIT=240] [BENCH_ARGS="--rerun"] [ONLY_FILE=bench/lists/x.txt] \
#     bash scripts/gpu_tests_and_levels.sh
# ONLY_FILE: one problem a line (level2/6_Conv3d_..., as --only takes them), the bench's --only.
# GPU0_AFTER: a command run on GPU 0 (after the tests, with TESTS; $OUT/c is what comes back), e.g.
#   GPU0_AFTER="python bench/kernel_breakdown.py .kb/kernelbench/level2/25_....py --out $OUT/c/bd.json"
# With TESTS or GPU0_AFTER, GPU 0 runs them and the bench gets the other GPUs; on a one-GPU machine
# they run first (TEST_LIMIT, AFTER_LIMIT: their seconds) and the bench after them.  No LEVELS: no bench.
# Everything comes back as one archive, calls.tgz (at most 8 files come back from a call); copy
# its runs.sqlite to .kb/runs.sqlite here before the next call.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT/c"
LIMIT=${LIMIT:-585}
start=$SECONDS
here=$PWD
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
only=()  # read here: SRC changes the folder
if [ -n "${ONLY_FILE:-}" ]; then only=(--only "$(paste -sd, "$ONLY_FILE")"); fi
if [ -n "${SRC:-}" ]; then  # the measured commit's sources, with this tree's problems and store
  mkdir -p /tmp/lv && tar -xf "$SRC" -C /tmp/lv && ln -sfn "$here/.kb" /tmp/lv/.kb && cd /tmp/lv || exit 2
fi
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
jobs=$gpus
# One GPU: the tests and the measurement run first, then the bench on the same card (timings
# never share it).  Several: GPU 0 runs them while the bench has the others.
serial=0
if [ -n "${TESTS:-}${GPU0_AFTER:-}" ] && [ "$gpus" -lt 2 ]; then
  serial=1
  # the bench needs its share of the call: by default the tests and the measurement a third each
  if [ -n "${LEVELS:-}" ]; then TEST_LIMIT=${TEST_LIMIT:-$((LIMIT / 3))} AFTER_LIMIT=${AFTER_LIMIT:-$((LIMIT / 3))}; fi
fi
if [ -n "${TESTS:-}${GPU0_AFTER:-}" ]; then  # GPU 0 for tests and/or a measurement, the bench on the rest
  source scripts/ks_site.sh
  ks_site /tmp/site_here "$PWD"
  (if [ -n "${TESTS:-}" ]; then
     # shellcheck disable=SC2086  # TESTS is pytest's argument list
     PYTHONPATH=/tmp/site_here CUDA_VISIBLE_DEVICES=0 timeout -s INT "${TEST_LIMIT:-$((LIMIT - 60))}" \
       python -P -m pytest -q -rfE -p no:cacheprovider -m gpu --durations=8 $TESTS ${TESTS_K:+-k "$TESTS_K"} >"$OUT/c/tests.log" 2>&1
     echo "tests exit $? at $((SECONDS - start)) s"; grep -E "passed|failed|FAILED|Error" "$OUT/c/tests.log" | tail -12
   fi
   if [ -n "${GPU0_AFTER:-}" ]; then  # then a measurement on GPU 0 (its output: gpu0_after.log)
     # shellcheck disable=SC2086  # GPU0_AFTER is a command line
     PYTHONPATH=/tmp/site_here CUDA_VISIBLE_DEVICES=0 OUT="$OUT" timeout "${AFTER_LIMIT:-$((LIMIT - 30 - (SECONDS - start)))}" \
       $GPU0_AFTER >"$OUT/c/gpu0_after.log" 2>&1
     echo "GPU0_AFTER exit $? at $((SECONDS - start)) s"; tail -4 "$OUT/c/gpu0_after.log"
   fi) &
  if [ "$serial" = 1 ]; then
    wait
  else
    export CUDA_VISIBLE_DEVICES
    CUDA_VISIBLE_DEVICES=$(seq -s, 1 $((gpus - 1)))
    jobs=$((gpus - 1))
  fi
fi
if [ -z "${LEVELS:-}" ]; then echo "no LEVELS: no bench this call"; else
# shellcheck disable=SC2086  # LEVELS and BENCH_ARGS are lists
KS_TIME_LIMIT=${KS_TIME_LIMIT:-240} OUT="$OUT/c" bash scripts/device_bench.sh $((LIMIT - (SECONDS - start))) \
  .kb/kernelbench --levels $LEVELS --jobs "$jobs" --timing-budget 1 ${only[@]+"${only[@]}"} ${BENCH_ARGS:-}
fi
wait
rm -f "$OUT"/c/bench/*.png
git -C "$here" rev-parse HEAD >"$OUT/c/tree_head.txt" 2>/dev/null
(cd "$OUT" && tar czf calls.tgz c && rm -rf c)
echo "script used $((SECONDS - start)) s"
