#!/usr/bin/env bash
# The open measurements, in priority order, in one call of about 9 minutes on the lent GPU
# (carry .whl; on an H100 as on an H200: an H200 is what the issues' goals name):
# zyx-cudnn's GPU tests (the replayed plans now launched in C: their first GPU run),
# cudnn_bench (the host time of a cached 256^3 claim, bias + relu's race), core's generated
# matmul through zyx.matmul with cuDNN off (f32 4096^3, bf16 8192^3, 64 x 512^3: measured
# only kernel by kernel on 2026-12-07), the front end and the reductions. Logs and JSON
# under $OUT; `python benchmarks/report.py --add $OUT/*.json` takes the results in.
source scripts/gpu-steps.sh || exit 1
TAIL=8 step cudnn-tests 120 python3 -m pytest tests/cudnn -q -p no:cacheprovider
TAIL=30 step cudnn-bench 90 python3 benchmarks/cudnn_bench.py
TAIL=30 ZYX_CUDA__CUDNN=false step matmul-bench 150 python3 benchmarks/matmul_bench.py \
  --device cuda --case f32:4096 --case bf16:8192 --case bf16:64:512
TAIL=30 step frontend-bench 80 python3 benchmarks/frontend_bench.py
TAIL=20 step reduce-bench 80 python3 benchmarks/reduce_bench.py --device cuda
