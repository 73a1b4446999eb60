#!/usr/bin/env bash
# The array front end on the lent H200 (carry .whl): its test files on CUDA and on NVIDIA's
# OpenCL (PoCL left out), file by file so that one slow file cannot hide the others, where
# the time of one small op goes on CUDA, and the benchmarks of the front end, matmul,
# reductions and the launch path. STEPS picks and orders them (default: all, in this order):
#   STEPS="cuda-tests small-op cuda-bench" bash scripts/gpu-arrays.sh
# Logs and results under $OUT; each step's last lines and time on stdout.
source scripts/gpu-steps.sh || exit 1
nvidia=$(python3 -c "import pyopencl as cl; print(next(i for i, p in enumerate(cl.get_platforms()) if 'NVIDIA' in p.name))")
arrays=(tests/core/test_array_*.py tests/core/test_claims.py tests/core/test_matmul.py)
# Each file of the array tests on the devices of one backend (marker $1), at most $2 s each.
tests() { for file in "${arrays[@]}"; do
  step "$1-$(basename "$file" .py)" "$2" python3 -m pytest "$file" -m "$1" -q -rf --tb=short -p no:cacheprovider
done; }
for name in ${STEPS:-cuda-tests opencl-tests small-op frontend-bench matmul-bench reduce-bench jit-bench cuda-bench opencl-bench}; do
  case $name in
    cuda-tests) tests cuda "${FILE_LIMIT:-60}" ;;
    opencl-tests) ZYX_OPENCL__PLATFORM_IDS="[$nvidia]" tests opencl "${FILE_LIMIT:-60}" ;;
    small-op) step small-op 60 python3 benchmarks/small_op_profile.py --device cuda ;;
    frontend-bench) step frontend-bench 150 python3 benchmarks/frontend_bench.py --device cuda ;;
    matmul-bench) step matmul-bench 150 python3 benchmarks/matmul_bench.py --device cuda ;;
    reduce-bench) step reduce-bench 300 python3 benchmarks/reduce_bench.py --device cuda ;;
    jit-bench) step jit-bench 150 python3 benchmarks/jit_bench.py --device cuda --repeats 500 ;;
    cuda-bench) step cuda-bench 150 python3 benchmarks/cuda_bench.py ;;
    opencl-bench) step opencl-bench 150 python3 benchmarks/opencl_bench.py --platform NVIDIA --out "$OUT"
      mkdir -p "$OUT/python"
      ZYX_NATIVE=0 step opencl-bench-python 120 python3 benchmarks/opencl_bench.py --platform NVIDIA \
        --size-mib 64 --out "$OUT/python" ;;
    *) echo "unknown step $name" ;;
  esac
done
