#!/usr/bin/env bash
# zyx.jit on the lent H200 (carry .whl): tests/core/test_jit.py on CUDA and on NVIDIA's
# OpenCL, then benchmarks/jit_bench.py on both (issue 20's goals: a replayed kernel
# <= 1.5 us, the 20-op program <= 30 us). One device call:
#   bash scripts/gpu-jit.sh
# Logs and results (jit_bench_<machine>_cuda.json, jit_bench_<machine>_opencl.json) under
# $OUT; each step's last lines and time on stdout.
source scripts/gpu-steps.sh || exit 1
export TAIL=22
nvidia=$(python3 -c "import pyopencl as cl; print(next(i for i, p in enumerate(cl.get_platforms()) if 'NVIDIA' in p.name))")
pytest=(python3 -m pytest tests/core/test_jit.py -q -rf --tb=short -p no:cacheprovider)
step cuda-jit-tests 120 "${pytest[@]}" -m cuda
ZYX_OPENCL__PLATFORM_IDS="[$nvidia]" step opencl-jit-tests 120 "${pytest[@]}" -m opencl
step cuda-jit-bench 200 python3 benchmarks/jit_bench.py --device cuda
ZYX_OPENCL__PLATFORM_IDS="[$nvidia]" step opencl-jit-bench 150 python3 benchmarks/jit_bench.py --device opencl
