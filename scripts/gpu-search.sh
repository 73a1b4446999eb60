#!/usr/bin/env bash
# Kernel search on the lent H200, in one call (carry .whl): its tests on CUDA and NVIDIA's
# OpenCL (test_search.py, test_tuning.py), then benchmarks/kernel_search.py on both (each
# workload's search as a plan build runs it, and a sweep of every local size: the speed-up
# over the default, the search's seconds). Logs and kernel_search_<machine>.json under $OUT.
source scripts/gpu-steps.sh || exit 1
export TAIL=12
nvidia=$(python3 -c "import pyopencl as cl; print(next(i for i, p in enumerate(cl.get_platforms()) if 'NVIDIA' in p.name))")
tests=(tests/core/test_search.py tests/core/test_tuning.py)
step search-tests-cuda 200 python3 -m pytest "${tests[@]}" -q -rf --tb=short -p no:cacheprovider -k "not opencl"
ZYX_OPENCL__PLATFORM_IDS="[$nvidia]" step search-tests-opencl 200 \
  python3 -m pytest "${tests[@]}" -m opencl -q -rf --tb=short -p no:cacheprovider
ZYX_OPENCL__PLATFORM_IDS="[$nvidia]" step kernel-search 300 \
  bash -c 'cd benchmarks && python3 kernel_search.py cuda opencl'
