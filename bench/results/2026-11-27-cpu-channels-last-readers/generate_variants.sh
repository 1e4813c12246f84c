#!/bin/bash
# generate (no verify) one problem with the installed branch code; copy every variant's kernel files
f=$1; b=$(basename $f .py); d=$WORK/$b; rm -rf $d; mkdir -p $d; cp $f $d/
cd $d && KERNELSTITCH_CPU_NVCC=0 timeout 300 /work/main/.venv/bin/kernelstitch generate $b.py --no-verify --variants 6 >log.txt 2>&1 || echo "$b generate failed"
mkdir -p $OUT_KERNELS
for v in .kernelstitch/$b/Model/variants/*/kernels/*.cu; do
  [ -f "$v" ] || continue
  h=$(sha1sum $v | cut -c1-12); cp $v $OUT_KERNELS/${b%%_*}_$h.cu
done
