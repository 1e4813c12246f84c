# call 2's GPU-0 measurement (main 315288e): per-kernel times of eager / torch.compile / ours (default plan)
KB=.kb/kernelbench/level2
python bench/kernel_breakdown.py $KB/25_Conv2d_Min_Tanh_Tanh.py $KB/35_Conv2d_Subtract_HardSwish_MaxPool_Mish.py \
  $KB/67_Conv2d_GELU_GlobalAvgPool.py $KB/54_Conv2d_Multiply_LeakyReLU_GELU.py $KB/32_Conv2d_Scaling_Min.py \
  --out "$OUT/c/breakdown.json" --calls 10 --top 8
