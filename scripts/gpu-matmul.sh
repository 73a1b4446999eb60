#!/usr/bin/env bash
# Core's generated matmul (zyx/graph/matmul.py) on the lent H200, in one call (carry .whl):
# its CUDA tests (every GPU variant against numpy in float64, the tensor-core ops), its
# OpenCL tests on NVIDIA's OpenCL, then benchmarks/matmul_bench.py on CUDA (cuDNN off) with
# every variant's kernels timed (the issue 20 goals: f32 4096^3 true fp32, bf16 8192^3, bf16
# 64 x 512^3) and on NVIDIA's OpenCL. Logs and matmul_bench_<machine>_{cuda,opencl}.json under $OUT
# (`python benchmarks/report.py --add` takes them in). The steps' limits add up to 570 s,
# within one call's 600.
source scripts/gpu-steps.sh || exit 1
export TAIL=16 ZYX_BENCH_VIA="bash scripts/gpu-matmul.sh"  # the command the results name
nvidia=$(python3 -c "import pyopencl as cl; print(next(i for i, p in enumerate(cl.get_platforms()) if 'NVIDIA' in p.name))")
step matmul-tests-cuda 150 python3 -m pytest tests/cuda/test_cuda_matmul.py tests/cuda/test_cuda_mma.py \
  tests/core/test_matmul_mma.py -q -rf --tb=short -p no:cacheprovider
ZYX_OPENCL__PLATFORM_IDS="[$nvidia]" step matmul-tests-opencl 90 \
  python3 -m pytest tests/opencl/test_opencl_matmul.py -q -rf --tb=short -p no:cacheprovider
ZYX_CUDA__CUDNN=false step matmul-bench-cuda 270 python3 benchmarks/matmul_bench.py --device cuda --variants
ZYX_OPENCL__PLATFORM_IDS="[$nvidia]" step matmul-bench-opencl 60 \
  python3 benchmarks/matmul_bench.py --device opencl --case f32:4096
