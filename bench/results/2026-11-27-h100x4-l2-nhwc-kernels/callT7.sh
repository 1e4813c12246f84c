#!/usr/bin/env bash
# Call 7 (fifteenth session, 1 x H100): ncu of the channels-last and NCHW elementwise kernels on
# level2/52's and 93's chains ([64, 128, 126, 126]): why the NHWC one runs at 0.99 TB/s.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
start=$SECONDS
python -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || tail -5 "$OUT/install.log"
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
timeout 100 python scripts/_nhwc_ab.py ncu >/dev/null 2>&1; echo "build exit $? at $((SECONDS - start)) s"
timeout 200 ncu --profile-from-start off --set full -k regex:"ab52|ab93" -o "$OUT/ab" python scripts/_nhwc_ab.py ncu >"$OUT/ncu.log" 2>&1
echo "ncu exit $? at $((SECONDS - start)) s"; tail -3 "$OUT/ncu.log"
ncu --import "$OUT/ab.ncu-rep" --page details >"$OUT/ab_details.txt" 2>&1
ncu --import "$OUT/ab.ncu-rep" --page raw --csv --metrics smsp__pcsamp_warps_issue_stalled_barrier,smsp__pcsamp_warps_issue_stalled_long_scoreboard,smsp__pcsamp_warps_issue_stalled_short_scoreboard,smsp__pcsamp_warps_issue_stalled_math_pipe_throttle,smsp__pcsamp_warps_issue_stalled_mio_throttle,smsp__pcsamp_warps_issue_stalled_lg_throttle,smsp__pcsamp_warps_issue_stalled_wait,smsp__pcsamp_warps_issue_stalled_selected,smsp__pcsamp_warps_issue_stalled_not_selected,smsp__pcsamp_warps_issue_stalled_no_instructions,smsp__pcsamp_warps_issue_stalled_dispatch_stall,smsp__pcsamp_warps_issue_stalled_drain,smsp__pcsamp_warps_issue_stalled_membar,smsp__pcsamp_warps_issue_stalled_tex_throttle >"$OUT/ab_stalls.csv" 2>&1
rm -f "$OUT/ab.ncu-rep"
grep -E "^  [a-z_].*\(|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Executed Ipc A|Issue Slots Busy|Executed Instructions  |Waves Per SM|Warp Cycles Per Issued|Theoretical Occ|L1/TEX Hit|Est. Speedup" "$OUT/ab_details.txt" | head -80
cat "$OUT/ab_stalls.csv" | head -8
echo "script used $((SECONDS - start)) s"
