#!/usr/bin/env bash
# Twenty-seventh session, call 2 (branch pool-channel-vec), on GPU 0: the channels-last pools'
# per-channel prologue operands as one 16-byte load for 4 channels against an offset a channel.
set -u
python bench/pool_channel_operands_timing.py --out "$OUT/c/pool_channel_operands.json"; echo "pool_channel_operands_timing exit $?"
