#!/usr/bin/env bash
# The open measurements of the map kernels' row layout and the front end's C paths, on the
# lent GPU, in one call of about 7 minutes (carry .whl): every variant of bias + relu in f32
# and bf16 (rows against flat), zyx-cudnn's benchmark with the race's log (ZYX_DEBUG=260:
# does the bare plan + generated epilogue now beat the fused plan?), the small op against
# torch, and the replay test of a claimed plan's CUDA graph. Logs and JSON under $OUT.
source scripts/gpu-steps.sh || exit 1
TAIL=4 step kernel-search 90 python3 benchmarks/kernel_search.py cuda --only bias
grep -E "default" "$OUT/kernel-search.log"
TAIL=30 ZYX_DEBUG=260 step cudnn-bench 170 python3 benchmarks/cudnn_bench.py
grep -iE "wins|e_add|race" "$OUT/cudnn-bench.log" | head -30
TAIL=8 step frontend-small 60 python3 benchmarks/frontend_bench.py --only small
TAIL=6 step replay-test 60 python3 -m pytest tests/cudnn/test_cudnn_gpu.py -q -p no:cacheprovider -k replays
