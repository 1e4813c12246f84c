#!/usr/bin/env bash
# One 4 x H100 call (eighteenth session): branch nhwc-lean-narrow (the working tree) against main
# (mainsrc.tar, `git archive main agents kernelstitch profiler server pyproject.toml`) on the same
# machine: branch bench on GPUs 0-1, main bench on GPUs 2-3, the same problems.  Nothing is
# pip-installed: each side imports its own tree (ks_site.sh).  On GPU 0 (branch) and GPU 2 (main)
# meanwhile: the pooling / cat kept-channels-last GPU tests fixed after PHASE=a, and tf32_diag.py
# on level2/6 and level2/85 (their channels-last variants failed the timing-settings check).
set -u
OUT=${OUT:-/tmp/ks_out}; mkdir -p "$OUT"
start=$SECONDS
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a PYTHONUNBUFFERED=1
D=bench/results/2026-11-27-h100x4-nhwc-ab
source scripts/ks_site.sh  # (bench/results/2026-11-27-h100x4-nhwc-ab/ks_site.sh when it ran; moved after)
mkdir -p /tmp/m && tar -xf mainsrc.tar -C /tmp/m
ks_site /tmp/site_b "$PWD"; ks_site /tmp/site_m /tmp/m
for s in b m; do
  PYTHONPATH=/tmp/site_$s python -c "import kernelstitch, kernelstitch.agents.coder as c; print('$s', kernelstitch.__file__, c.__file__)"
done
PYTHONPATH=/tmp/site_b python -c "import kernelstitch.agents.coder.layout" && echo "branch has layout.py"
PYTHONPATH=/tmp/site_m python -c "import kernelstitch.agents.coder.layout" 2>/dev/null || echo "main has no layout.py (as expected)"
L2=level2; L3=level3
LIST="$L3/10_ResNet101,$L3/9_ResNet18,$L3/20_MobileNetV2,$L3/22_EfficientNetB0,$L3/6_GoogleNetInceptionModule,$L3/18_SqueezeNet,$L2/92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp,$L3/26_ShuffleNet,$L2/67_Conv2d_GELU_GlobalAvgPool,$L3/15_DenseNet121"
bench() {  # side GPUS
  mkdir -p "$OUT/bench_$1" /tmp/ws_$1
  PYTHONPATH=/tmp/site_$1 TORCH_EXTENSIONS_DIR=/tmp/ext_$1 CUDA_VISIBLE_DEVICES=$2 \
    timeout --foreground -s INT -k 15 $((555 - (SECONDS - start))) python -m kernelstitch bench \
    .kb/kernelbench --out "$OUT/bench_$1" --workspace /tmp/ws_$1 --jobs 2 --build-jobs 12 --time-limit 240 \
    --timing-budget 1 --only "$LIST" >"$OUT/bench_$1/console.log" 2>&1
  echo "bench $1 exit $? at $((SECONDS - start)) s"
}
(bench b 0,1) & pb=$!
(bench m 2,3) & pm=$!
diag() {  # side GPU problem variants...
  local side=$1 gpu=$2 stem=$3; shift 3
  local w=/tmp/diag_$side/$stem; mkdir -p $w; cp .kb/kernelbench/level2/$stem.py $w/
  (cd $w && PYTHONPATH=/tmp/site_$side timeout 200 python -m kernelstitch generate $stem.py --no-verify --variants 6 >gen.log 2>&1) || tail -3 $w/gen.log
  PYTHONPATH=/tmp/site_$side TORCH_EXTENSIONS_DIR=/tmp/ext_diag_$side CUDA_VISIBLE_DEVICES=$gpu timeout 300 \
    python $D/tf32_diag.py $w/$stem.py $w/.kernelstitch/$stem/Model "$@" 2>&1 | grep -v Warning | tail -12
}
(diag m 2 6_Conv3d_Softmax_MaxPool_MaxPool default ndhwc >"$OUT/diag_m.txt" 2>&1
 diag m 2 85_Conv2d_GroupNorm_Scale_MaxPool_Clamp nchw default >>"$OUT/diag_m.txt" 2>&1) & pd=$!
(diag b 0 6_Conv3d_Softmax_MaxPool_MaxPool default ndhwc >"$OUT/diag_b.txt" 2>&1
 diag b 0 85_Conv2d_GroupNorm_Scale_MaxPool_Clamp nchw default >>"$OUT/diag_b.txt" 2>&1) & pe=$!
PYTHONPATH=/tmp/site_b CUDA_VISIBLE_DEVICES=0 timeout -s INT 400 python -P -m pytest -q -rfE -p no:cacheprovider -m gpu \
  tests/test_pool_gpu.py tests/test_cat_gpu.py -k "kept" >"$OUT/tests_kept.log" 2>&1
echo "kept tests exit $? at $((SECONDS - start)) s"; grep -E "passed|failed|FAILED|Error" "$OUT/tests_kept.log" | tail -8
wait $pd $pe; echo "== diag main"; cat "$OUT/diag_m.txt"; echo "== diag branch"; cat "$OUT/diag_b.txt"
wait $pb $pm
for s in b m; do
  rm -f "$OUT"/bench_$s/*.png
  echo "== side $s"; grep -E "^- (correct|geomean)" "$OUT/bench_$s/results.md" 2>/dev/null
  python - "$OUT/bench_$s/results.json" <<'P' 2>/dev/null
import json, sys
for p in json.load(open(sys.argv[1]))["problems"]:
    v = p.get("variants_ms") or {}
    print(p["problem"][:40].ljust(40), p["status"], p.get("speedup_vs_eager") and round(p["speedup_vs_eager"], 2),
          p.get("speedup_vs_compiled") and round(p["speedup_vs_compiled"], 2), p.get("delivered"),
          {k: round(x, 3) for k, x in v.items() if isinstance(x, float)}, str(p.get("passed_over") or "")[:200])
P
done
echo "script used $((SECONDS - start)) s"
