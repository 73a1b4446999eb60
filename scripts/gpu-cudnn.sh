#!/usr/bin/env bash
# zyx-cudnn on the lent H200, in one call (carry .whl: it holds nvidia-cudnn-frontend; cuDNN
# 9.19 is the machine's): zyx doctor (the cudnn backend, its frontend and libcudnn),
# tests/cudnn (its GPU tests: each plan against numpy float64, the race through zyx), then
# benchmarks/cudnn_bench.py with zyx.sched and zyx.tune at DEBUG (ZYX_DEBUG=260: what cuDNN
# refused and why, every candidate plan's build and run time). Within 8 minutes; logs and
# cudnn_bench_<machine>.json under $OUT. ONLY=tests skips the benchmark.
source scripts/gpu-steps.sh || exit 1
step doctor 60 python3 -m zyx doctor
step cudnn-tests 210 python3 -m pytest tests/cudnn -q -rs --tb=short -p no:cacheprovider --durations=15
[ "$ONLY" = tests ] && exit 0
ZYX_DEBUG=260 step cudnn-bench 190 python3 benchmarks/cudnn_bench.py
grep -E "^\|" "$OUT/cudnn-bench.log"
