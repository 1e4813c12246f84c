#!/usr/bin/env bash
# Nsight Compute metrics (DRAM and SM throughput, occupancy, stall reasons) of the built-in
# default plan's kernels for a few KernelBench problems, on a GPU machine: generates each
# problem's candidate (no verification, no search) in a scratch folder, then
# `python -m kernelstitch profile --candidate --backend ncu` (with PYTHONPATH set as
# scripts/ks_site.sh does, so it runs before any install).  One JSON report per problem under $OUT/c.
#   OUT=$OUT bash scripts/ncu_candidates.sh level2/52_Conv2d_Activation_BatchNorm level3/27_RegNet
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT/c"
root=$PWD/.kb/kernelbench
for problem in "$@"; do
  stem=$(basename "$problem")
  work=$(mktemp -d)
  cp "$root/$problem.py" "$work/" || { echo "$problem: no such problem under $root"; continue; }
  (cd "$work" && python -m kernelstitch generate "$stem.py" --no-verify --no-search --no-profile >gen.log 2>&1) \
    || { echo "$problem: generate failed"; tail -5 "$work/gen.log"; continue; }
  candidate=$(find "$work/.kernelstitch" -name model_new.py | head -1)
  # ModelNew's example inputs: the problem's own (a candidate file carries none)
  cat >>"$candidate" <<PY


import functools


@functools.cache  # one execution of the problem file for both functions
def _ks_problem():
    import importlib.util
    spec = importlib.util.spec_from_file_location("ks_problem", "$work/$stem.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def get_inputs_ModelNew():
    return _ks_problem().get_inputs()


def get_init_inputs_ModelNew():
    return _ks_problem().get_init_inputs()
PY
  (cd "$work" && python -m kernelstitch profile "$candidate" --candidate --backend ncu --json-out "$OUT/c/ncu_$stem.json" \
    >"$OUT/c/ncu_$stem.log" 2>&1)
  echo "$problem: profile exit $?"
  rm -rf "$work"
done
