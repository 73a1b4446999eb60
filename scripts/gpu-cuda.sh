#!/usr/bin/env bash
# zyx-cuda on the lent H200: its tests, the conformance suite against it, the benchmark.
# Run from the repository root on the device machine (carry .whl); logs and results in $OUT.
# A warm machine may hold zyx packages an earlier run installed; pip --target keeps them.
rm -rf /tmp/site/zyx /tmp/site/zyx_* /tmp/site/zyx*.dist-info
source scripts/gpu-prelude.sh || exit 1
set -o pipefail
export ZYX_CACHE_DIR=/tmp/zyx-cache OUT=${OUT:-.}
step() { local name=$1 limit=$2; shift 2; local start=$SECONDS
  timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.log"; echo "== $name: exit ${PIPESTATUS[0]}, $((SECONDS - start)) s"; }
step cuda-tests 150 python3 -m pytest tests/cuda -q -rs -p no:cacheprovider
step cuda-conformance 120 python3 -m pytest --pyargs zyx.testing --zyx-backend cuda -q -p no:cacheprovider
step cuda-bench 150 python3 benchmarks/cuda_bench.py
