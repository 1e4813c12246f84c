#!/usr/bin/env bash
# Bench call B: all 18 examples; the 9 of call A are reused from the carried run store.
set -u
KS_TIME_LIMIT=300 bash scripts/device_bench.sh 550
