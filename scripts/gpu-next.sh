#!/usr/bin/env bash
# The open measurements, in one call of about 8 minutes on the lent GPU (carry .whl): the
# goal figures of issues 19-21, which name an H200. On 12-07 an H100 SXM ran them all at
# edb0c82 (BENCHMARKS.md); the H200 rows are from 12-04 (a782f75), before the pipelined
# tensor-core matmul, the reduction and softmax layouts and the cuDNN plan search.
# Logs and JSON under $OUT; `python benchmarks/report.py --add $OUT/*.json` takes them in.
source scripts/gpu-steps.sh || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || echo "not an H200: these are no goal figures"
TAIL=30 step frontend-bench 110 python3 benchmarks/frontend_bench.py --device cuda
TAIL=30 step reduce-bench 80 python3 benchmarks/reduce_bench.py --device cuda
TAIL=30 ZYX_CUDA__CUDNN=false step matmul-bench 120 python3 benchmarks/matmul_bench.py --device cuda
TAIL=30 ZYX_CACHE_DIR=$(mktemp -d) step cudnn-bench 120 python3 benchmarks/cudnn_bench.py
TAIL=30 step jit-bench 60 python3 benchmarks/jit_bench.py --device cuda
