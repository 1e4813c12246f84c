#!/usr/bin/env bash
# The twenty-sixth session's kernel measurements on GPU 0 (GPU0_AFTER="bash bench/lists/s26-after.sh"):
# the pools' row form against the one-position form (branch pool-cl4-rows), then the persistent
# recurrent kernel against cuDNN on KernelBench's recurrent layers.  Outputs under $OUT/c.
set -u
python bench/pool_row_timing.py --out "$OUT/c/pool_row.json"; echo "pool_row_timing exit $?"
python bench/recurrent_timing.py --out "$OUT/c/recurrent.json"; echo "recurrent_timing exit $?"
