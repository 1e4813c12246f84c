#!/usr/bin/env bash
# Third call (nvidia-h100-x1, carry .ab): SqueezeNet's default program before / after the
# 4-channel channels-last pooling kernel and the 4-outputs-a-thread cat kernel, on one GPU in one
# process (bench/program_ab.py), then the pooling and cat kernels' GPU tests.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
source scripts/ks_site.sh
ks_site /tmp/site_here "$PWD"
P=.ab/18_SqueezeNet/18_SqueezeNet.py
V=.ab/18_SqueezeNet/.kernelstitch/18_SqueezeNet/Model/variants
PYTHONPATH=/tmp/site_here timeout 240 python -P bench/program_ab.py $P before=$V/default/model_new.py \
  after=$V/default_new/model_new.py --out "$OUT/squeezenet_ab.json" | grep -v "^  \"top" | head -60
echo "a/b done at $SECONDS s"
PYTHONPATH=/tmp/site_here timeout $((540 - SECONDS)) python -P -m pytest -q -rfE -p no:cacheprovider -m gpu \
  tests/test_pool_gpu.py tests/test_cat_gpu.py -k "not kernelbench and not module and not fire and not conv" \
  >"$OUT/tests.log" 2>&1
echo "tests exit $? at $SECONDS s"; grep -E "passed|failed|FAILED|Error" "$OUT/tests.log" | tail -15
echo "script used $SECONDS s"
