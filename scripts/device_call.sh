#!/usr/bin/env bash
# One device call: optional GPU tests first (TESTS=1), then the bench for what is left of CALL_S.
set -u
start=$SECONDS
export PYTHONUNBUFFERED=1 MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a
python -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
python -c "import inspect, torch.utils.cpp_extension as c; print('no_implicit_headers supported:', 'no_implicit_headers' in inspect.signature(c.load_inline).parameters)"
if [ "${TESTS:-0}" = 1 ]; then
  mkdir -p /tmp/tl
  KS_VERDICT_DIR=/tmp/tl/verdicts timeout 240 python -P -m pytest -q -p no:cacheprovider -m gpu tests/test_verifier_gpu.py -n 4 -k "not 6_gib and not too_large" --durations=5 >/tmp/tl/verifier_small.log 2>&1; echo "small: $(tail -1 /tmp/tl/verifier_small.log)"
  KS_VERDICT_DIR=/tmp/tl/verdicts timeout 200 python -P -m pytest -q -p no:cacheprovider -m gpu tests/test_verifier_gpu.py -k "6_gib or too_large" --durations=10 >/tmp/tl/verifier_large.log 2>&1; echo "large: $(tail -1 /tmp/tl/verifier_large.log)"
  grep -h "FAILED\|Error" /tmp/tl/*.log | head -20
  (cd /tmp/tl && tar czf "$OUT/tests.tgz" .)
fi
left=$(( ${CALL_S:-585} - (SECONDS - start) ))
KS_TIME_LIMIT=${KS_TIME_LIMIT:-300} scripts/device_bench.sh "$left" "$@"
