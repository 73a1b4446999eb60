#!/usr/bin/env bash
# The open measurements, in priority order, in one call of about 9 minutes on the lent GPU
# (carry .whl; on an H100 as on an H200: an H200 is what the issues' goals name). None of
# these have run on a GPU since 52fd50c:
# zyx-cuda's library tests (the claim-replay test that failed on the GPU before 6129a71);
# the front end's C run and allocator (runner.c, allocator.c) under the real driver;
# cudnn_bench with a fresh tuning cache (its host-time rows: zyx.realize(x @ y) against
# torch.mm, the gap these C paths aim at); zyx-cudnn's and zyx-cuda's GPU tests; the
# front end (a + b to the host, ten ops: the same C paths).
# Logs and JSON under $OUT; `python benchmarks/report.py --add $OUT/*.json` takes them in.
source scripts/gpu-steps.sh || exit 1
TAIL=15 step library-tests 100 python3 -m pytest tests/cuda/test_cuda_library.py -q -p no:cacheprovider
TAIL=8 step native-tests 40 python3 -m pytest tests/core/test_runner.py tests/core/test_allocator.py \
  -q -p no:cacheprovider
TAIL=30 ZYX_CACHE_DIR=$(mktemp -d) step cudnn-bench 200 python3 benchmarks/cudnn_bench.py
TAIL=8 step cudnn-tests 120 python3 -m pytest tests/cudnn -q -p no:cacheprovider
TAIL=30 step frontend-bench 80 python3 benchmarks/frontend_bench.py
