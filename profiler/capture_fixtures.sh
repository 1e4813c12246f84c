#!/usr/bin/env bash
# Re-captures tests/fixtures/profiler/ on a CUDA machine with ncu (the H100 device machine):
#   bash profiler/capture_fixtures.sh [OUT_DIR]
# then copy OUT_DIR's files into tests/fixtures/profiler/.
set -euo pipefail
OUT_DIR="${1:-${OUT:-capture_out}}"
# `python -m pip`: a bare `pip` there belongs to another interpreter than `python`.
python -m pip install -q --no-deps --no-build-isolation -e . >/dev/null
OUT_DIR="$OUT_DIR" PYTHONUNBUFFERED=1 python -m kernelstitch.profiler.capture_fixtures
