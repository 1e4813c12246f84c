#!/bin/bash
# usage: scan.sh problem.py -> prints variants with swaps back
f=$1; b=$(basename $f .py); d=$WORK/$b; mkdir -p $d; cp $f $d/
cd $d && KERNELSTITCH_CPU_NVCC=0 timeout 300 /work/main/.venv/bin/kernelstitch generate $b.py --no-verify --variants 6 >log.txt 2>&1
for v in .kernelstitch/$b/Model/variants/*/model_new.py; do
  [ -f "$v" ] || continue
  vn=$(basename $(dirname $v))
  ins=$(grep -c "ks_layout_swap(v_[a-z0-9_]*, True)" $v); back=$(grep -o "ks_layout_swap(v_[a-z0-9_]*, False)" $v | tr '\n' ' ')
  [ "$ins" != "0" ] && echo "$b $vn in=$ins back=[$back]"
done
