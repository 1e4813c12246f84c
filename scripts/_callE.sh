# call E (1 x H100): attention GPU tests after the kernel's instruction trims, its time at the
# profiled shapes (before: d32 10.255 ms, d64_relu_tril 1.250 ms), level-3 attention and the GPT block.
set -u
start=$SECONDS
python -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || echo install failed
export MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a
python scripts/_attn_prof.py 2>&1 | tail -2 | tee $OUT/attn_time.txt
timeout -s INT 200 python -P -m pytest -q -rfE -p no:cacheprovider -m gpu -n 8 --dist loadgroup \
  tests/test_attention_gpu.py 2>&1 | grep -v "Warning\|warner\|config_init\|_warn_or_fail\|^$\|^  $" | tail -8 | tee $OUT/gpu_tests.txt
echo "tests done at $((SECONDS-start)) s"
mkdir -p /tmp/l3 /tmp/ex
OUT=/tmp/l3 KS_TIME_LIMIT=170 bash scripts/device_bench.sh $((450-(SECONDS-start))) .kb/kernelbench --levels 3 --timing-budget 1 \
  --only 31_VisionAttention,50_ReLUSelfAttention 2>&1 | tail -6
cp /tmp/l3/bench/results.json $OUT/l3_results.json; cp /tmp/l3/bench/results.md $OUT/l3_results.md; cp /tmp/l3/runs.sqlite $OUT/
OUT=/tmp/ex KS_TIME_LIMIT=140 bash scripts/device_bench.sh $((585-(SECONDS-start))) examples --timing-budget 1 --only gpt_block 2>&1 | tail -6
cp /tmp/ex/bench/results.json $OUT/ex_results.json; cp /tmp/ex/bench/results.md $OUT/ex_results.md; ls $OUT
