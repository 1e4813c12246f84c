#!/usr/bin/env bash
# Second 4 x H100 call (eighteenth session): the branch with the candidates' CUDA source split
# into units compiled at once (2a1d520) against main (mainsrc.tar), the same machine, the level-3
# CNNs that timed out in callB on the branch; and the build of ResNet18's candidate alone, split
# (MAX_JOBS=8) and as one unit (MAX_JOBS=1), with ninja's per-target seconds.
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
start=$SECONDS
export TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
D=bench/results/2026-11-27-h100x4-nhwc-ab
source scripts/ks_site.sh  # (bench/results/2026-11-27-h100x4-nhwc-ab/ks_site.sh when it ran; moved after)
mkdir -p /tmp/m && tar -xf mainsrc.tar -C /tmp/m
ks_site /tmp/site_b "$PWD"; ks_site /tmp/site_m /tmp/m
L3=level3
LIST="$L3/9_ResNet18,$L3/22_EfficientNetB0,$L3/26_ShuffleNet,$L3/10_ResNet101,$L3/18_SqueezeNet,$L3/20_MobileNetV2"
bench() {  # side GPUS
  mkdir -p "$OUT/bench_$1" /tmp/ws_$1
  PYTHONPATH=/tmp/site_$1 CUDA_VISIBLE_DEVICES=$2 \
    timeout --foreground -s INT -k 15 $((410 - (SECONDS - start))) python -m kernelstitch bench \
    .kb/kernelbench --out "$OUT/bench_$1" --workspace /tmp/ws_$1 --jobs 2 --build-jobs 12 --time-limit 240 \
    --timing-budget 1 --only "$LIST" >"$OUT/bench_$1/console.log" 2>&1
  echo "bench $1 exit $? at $((SECONDS - start)) s"
}
(bench b 0,1) & pb=$!
(bench m 2,3) & pm=$!
for j in 8 1; do
  PYTHONPATH=/tmp/site_b MAX_JOBS=$j CUDA_VISIBLE_DEVICES=0 timeout 200 python $D/build_steps.py \
    .kb/kernelbench/level3/9_ResNet18.py /tmp/steps_$j 2>&1 | grep -v Warning | tail -2
done
echo "build steps done at $((SECONDS - start)) s"
wait $pb $pm
for s in b m; do
  rm -f "$OUT"/bench_$s/*.png
  echo "== side $s"; grep -E "^- (correct|geomean)" "$OUT/bench_$s/results.md" 2>/dev/null
  python - "$OUT/bench_$s/results.json" <<'P' 2>/dev/null
import json, sys
for p in json.load(open(sys.argv[1]))["problems"]:
    v = p.get("variants_ms") or {}
    st = {k: round(x) for k, x in (p.get("prepare_stage_s") or {}).items() if x and x > 3}
    print(p["problem"][:32].ljust(32), p["status"], p.get("speedup_vs_eager") and round(p["speedup_vs_eager"], 2),
          p.get("speedup_vs_compiled") and round(p["speedup_vs_compiled"], 2), p.get("delivered"), st,
          round(p.get("measure_s") or 0), {k: round(x, 3) for k, x in v.items() if isinstance(x, float)})
P
done
echo "script used $((SECONDS - start)) s"
