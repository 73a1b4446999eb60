#!/usr/bin/env bash
# Everything the lent H200 proves, in one call (carry .whl): zyx-cuda's and zyx-opencl's
# tests (the thread stress tests among them), the conformance suite on cuda, NVIDIA OpenCL and
# host (its threads area too; and through `zyx conformance`), `zyx check` on every device, the
# ulp margins of single ops, two minutes of the differential fuzzer on CUDA and NVIDIA OpenCL,
# both benchmarks (OpenCL's on NVIDIA, through the native and the Python launch path, and on
# PoCL), zyx's own time per launch with the driver stubbed (both paths), and NVIDIA OpenCL's
# launch schedules in a C loop. Run from the repository root on the device machine.
# Logs go into $OUT/gpu-logs.tar.gz, benchmark results to $OUT/**/*.json (one per benchmark and
# platform); `python benchmarks/report.py --add <them>` takes them into BENCHMARKS.md.
# ONLY=cuda skips the OpenCL steps.
# A warm machine may hold zyx packages an earlier run installed; pip --target keeps them.
rm -rf /tmp/site/zyx /tmp/site/zyx_* /tmp/site/zyx*.dist-info
source scripts/gpu-prelude.sh || exit 1
set -o pipefail
export ZYX_CACHE_DIR=/tmp/zyx-cache OUT=${OUT:-.}
export ZYX_BENCH_VIA="bash scripts/gpu-check.sh"  # the command the results files name (benchmarks/results.py)
logs=/tmp/gpu-logs && mkdir -p "$logs"
step() { local name=$1 limit=$2; shift 2; local start=$SECONDS
  timeout "$limit" "$@" >"$logs/$name.log" 2>&1; local status=$?
  tail -n 3 "$logs/$name.log"; echo "== $name: exit $status, $((SECONDS - start)) s"; }
nvidia=$(python3 -c "import pyopencl as cl; print(next(i for i, p in enumerate(cl.get_platforms()) if 'NVIDIA' in p.name))")
step devices 60 python3 -m zyx devices
step native 120 python3 -c "import logging; logging.basicConfig(level=logging.DEBUG); from zyx_cuda.native import launch_function; print('native launch:', launch_function())"
step doctor 60 python3 -m zyx doctor --explain
step cuda-tests 150 python3 -m pytest tests/cuda -q -rs -p no:cacheprovider
step cuda-conformance 120 python3 -m pytest --pyargs zyx.testing --zyx-backend cuda -q -p no:cacheprovider
[ "$ONLY" = cuda ] || step opencl-tests 150 python3 -m pytest tests/opencl -q -rs -p no:cacheprovider
[ "$ONLY" = cuda ] || ZYX_OPENCL__PLATFORM_IDS="[$nvidia]" step opencl-conformance 120 \
  python3 -m pytest --pyargs zyx.testing --zyx-backend opencl -q -p no:cacheprovider
step host-conformance 120 python3 -m pytest --pyargs zyx.testing --zyx-backend host -q -p no:cacheprovider
step check 120 python3 -m zyx check
step cuda-cli 150 python3 -m zyx conformance cuda
step cuda-ulps 120 python3 benchmarks/ulp_margins.py cuda
[ "$ONLY" = cuda ] || ZYX_OPENCL__PLATFORM_IDS="[$nvidia]" step opencl-ulps 120 \
  python3 benchmarks/ulp_margins.py opencl
fuzzed=cuda,opencl; [ "$ONLY" = cuda ] && fuzzed=cuda
ZYX_OPENCL__PLATFORM_IDS="[$nvidia]" step fuzz 200 python3 tests/fuzz/fuzz.py --devices $fuzzed --seconds 120
step cuda-bench 150 python3 benchmarks/cuda_bench.py
[ "$ONLY" = cuda ] || step opencl-bench 150 python3 benchmarks/opencl_bench.py --platform NVIDIA --out "$OUT"
# The Python launch path (where the native module is not built) beside raw pyopencl.
[ "$ONLY" = cuda ] || { mkdir -p "$OUT/python"; ZYX_NATIVE=0 step opencl-bench-python 150 \
  python3 benchmarks/opencl_bench.py --platform NVIDIA --size-mib 64 --out "$OUT/python"; }
# zyx's own time per launch on this CPU, both paths, the native call stubbed (and the lock).
step launch-overhead 90 python3 benchmarks/launch_overhead.py --backend cuda
ZYX_NATIVE=0 step launch-overhead-python 90 python3 benchmarks/launch_overhead.py --backend cuda
# PoCL 5.0 on the machine's CPU: where GPU.md's raw pyopencl launch figure (40 µs) was taken.
[ "$ONLY" = cuda ] || { mkdir -p "$OUT/pocl"; step pocl-bench 150 python3 benchmarks/opencl_bench.py \
  --platform Portable --size-mib 64 --out "$OUT/pocl"; }
[ "$ONLY" = cuda ] || step opencl-c-loop 120 python3 benchmarks/opencl_c_loop.py --platform NVIDIA --repeats 9
tar -czf "$OUT/gpu-logs.tar.gz" -C "$logs" .
