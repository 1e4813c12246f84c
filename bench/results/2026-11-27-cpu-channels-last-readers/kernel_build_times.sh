#!/bin/bash
# $1 label; generate 85 and 91 with the installed code, time nvcc -c of each kernel file
for p in 85_Conv2d_GroupNorm_Scale_MaxPool_Clamp 91_ConvTranspose2d_Softmax_BiasAdd_Scaling_Sigmoid 52_Conv2d_Activation_BatchNorm; do
  d=/tmp/bt/$1/$p; rm -rf $d; mkdir -p $d; cp /work/main/.kb/kernelbench/level2/$p.py $d/
  (cd $d && KERNELSTITCH_CPU_NVCC=0 /work/main/.venv/bin/kernelstitch generate $p.py --no-verify --no-search >/dev/null 2>&1)
  for f in $d/.kernelstitch/$p/Model/kernels/*.cu; do
    s=$(date +%s.%N); nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -c -Xcompiler -fPIC -o /tmp/bt_x.o $f 2>/dev/null; e=$(date +%s.%N)
    echo "$1 $p $(basename $f) $(echo "$e - $s" | bc)"
  done
done
