#!/usr/bin/env bash
# The open measurements, in priority order, in one call of about 8 minutes on the lent GPU
# (carry .whl; on an H100 as on an H200: an H200 is what the issues' goals name):
# zyx-cudnn's GPU tests; cudnn_bench with a fresh tuning cache and zyx.tune's log (bias +
# relu's plans, now timed on a normal sample: the plan zyx chose on zeros ran 652-696
# TFLOP/s on an H100 where the frontend's fastest on random data ran 724-727; the bench's
# "cuDNN frontend, fastest plan" row is that reference, first run there); core's
# generated matmul through zyx.matmul with cuDNN off; the front end and the reductions.
# Logs and JSON under $OUT; `python benchmarks/report.py --add $OUT/*.json` takes them in.
source scripts/gpu-steps.sh || exit 1
TAIL=8 step cudnn-tests 120 python3 -m pytest tests/cudnn -q -p no:cacheprovider
TAIL=30 ZYX_CACHE_DIR=$(mktemp -d) ZYX_DEBUG=256 step cudnn-bench 120 \
  python3 benchmarks/cudnn_bench.py
TAIL=30 ZYX_CUDA__CUDNN=false step matmul-bench 150 python3 benchmarks/matmul_bench.py \
  --device cuda --case f32:4096 --case bf16:8192 --case bf16:64:512
TAIL=30 step frontend-bench 80 python3 benchmarks/frontend_bench.py
TAIL=20 step reduce-bench 80 python3 benchmarks/reduce_bench.py --device cuda
