# one-off (session 21, call 3): branch dev-s21's pool / row kernels on GPU 0: their GPU tests, then
# per-kernel times of level2/35 (pool into NCHW) and 25 (amin rows) against call 2's breakdown of main
here=$PWD
KB=$here/.kb/kernelbench/level2
mkdir -p /tmp/dev && tar -xf scripts/devsrc.tar -C /tmp/dev
source scripts/ks_site.sh
ks_site /tmp/site_dev /tmp/dev
cd /tmp/dev || exit 2
PYTHONPATH=/tmp/site_dev timeout 240 python -P -m pytest -q -rfE -p no:cacheprovider -m gpu tests/test_pool_gpu.py \
  -k "four_channel or contiguous_output or kept or layouts or prologue" 2>&1 | tail -15
echo "pool tests done at $SECONDS s"
PYTHONPATH=/tmp/site_dev python bench/kernel_breakdown.py $KB/35_Conv2d_Subtract_HardSwish_MaxPool_Mish.py \
  $KB/25_Conv2d_Min_Tanh_Tanh.py $KB/32_Conv2d_Scaling_Min.py --out "$OUT/c/breakdown_dev.json" --calls 10 --top 8
