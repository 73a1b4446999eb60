#!/usr/bin/env bash
# The array front end on the lent H200, in one call (carry .whl): its test files on CUDA and
# on NVIDIA's OpenCL (PoCL left out), where the time of one small op goes on CUDA, and the
# launch-path benchmarks of issue 22 (CUDA and NVIDIA OpenCL, native and Python paths).
# Logs and results under $OUT. ONLY=tests skips the benchmarks.
rm -rf /tmp/site/zyx /tmp/site/zyx_* /tmp/site/zyx*.dist-info
source scripts/gpu-prelude.sh || exit 1
export ZYX_CACHE_DIR=/tmp/zyx-cache OUT=${OUT:-.}
step() { local name=$1 limit=$2; shift 2; local start=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1; local status=$?
  tail -n 4 "$OUT/$name.log"; echo "== $name: exit $status, $((SECONDS - start)) s"; }
nvidia=$(python3 -c "import pyopencl as cl; print(next(i for i, p in enumerate(cl.get_platforms()) if 'NVIDIA' in p.name))")
arrays=(tests/core/test_array_*.py tests/core/test_claims.py)
step arrays-cuda 200 python3 -m pytest "${arrays[@]}" -m cuda -q -rf --tb=short -p no:cacheprovider
ZYX_OPENCL__PLATFORM_IDS="[$nvidia]" step arrays-opencl 200 \
  python3 -m pytest "${arrays[@]}" tests/opencl/test_opencl_array_runtime.py -m opencl -q -rf --tb=short -p no:cacheprovider
step small-op 60 python3 benchmarks/small_op_profile.py --device cuda
[ "$ONLY" = tests ] && exit 0
step cuda-bench 150 python3 benchmarks/cuda_bench.py
step opencl-bench 150 python3 benchmarks/opencl_bench.py --platform NVIDIA --out "$OUT"
mkdir -p "$OUT/python"
ZYX_NATIVE=0 step opencl-bench-python 120 python3 benchmarks/opencl_bench.py --platform NVIDIA --size-mib 64 --out "$OUT/python"
