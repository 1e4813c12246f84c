#!/bin/bash
f=$1; nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -Xptxas -v -cubin -o /dev/null $f > ${f%.cu}.log 2>&1; echo "$f rc=$? spills=$(grep -cE ' [1-9][0-9]* bytes spill' ${f%.cu}.log) kernels=$(grep -c 'Compiling entry' ${f%.cu}.log)"
