# call C (1 x H100): level-3 problems the fixes since call B change: 19 (batch-dynamic capture),
# 30 (cat of two chains of one tensor); then CNNs not rerun in call B.
KS_TIME_LIMIT=280 bash scripts/device_bench.sh 545 .kb/kernelbench --levels 3 --jobs 1 --timing-budget 1 \
  --only 19_MobileNetV1,30_SwinTransformerV2,26_ShuffleNet,23_EfficientNetB1,10_ResNet101 2>&1 | tail -12
