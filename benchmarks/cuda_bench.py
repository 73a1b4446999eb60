"""zyx-cuda side by side with torch, cupy and raw cuda-python, in one run on one GPU.

    python benchmarks/cuda_bench.py            # writes cuda_bench_<machine>.json to $OUT or .

1. Elementwise add, f32, 3 x 1 GiB (two inputs read, one output written): an IR kernel
   through the CUDA C dialect vs torch, cupy (ElementwiseKernel, RawKernel), raw
   cuda-python. Timed with CUDA events around one launch, after warm-up.
2. Host overhead of one launch of an empty kernel (one pointer param): the host-side time
   of a burst of launches, per launch, synchronized before and after each burst, bursts
   interleaved across the cases. zyx's ``Device.launch`` (through its native module, and
   through cuda-python's binding as where the module cannot be built) against raw calls:
   cuda-python's binding, ctypes on the same driver function, cupy, torch.
3. A recording of 100 dependent launches replayed as one CUDA graph, per kernel, vs
   ``torch.cuda.CUDAGraph`` of the same 100 ops; wall time of replays + synchronize.
4. Host to device, 1 GiB from pageable numpy memory via ``pool.write`` (staged), and from
   page-locked memory (torch's ``pin_memory``, seen through numpy: copied in place), vs
   torch from pinned and from pageable memory; wall time until synchronized.
5. With two GPUs: 1 GiB from GPU 0 to GPU 1 via ``copy_from`` vs torch's ``copy_``.

Every number is the median of repeated runs after warm-up, on random data. Math mode:
IEEE f32 (NVRTC without ``--use_fast_math``; FMA contraction on, NVRTC's default).
"""

from __future__ import annotations

import contextlib
import ctypes
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any
from unittest import mock

import numpy as np
import results
from kernels import empty_kernel, strided_add
from timing import per_launch

from zyx.codegen.c import Source
from zyx.dtypes import DType
from zyx.ir import Kernel, KernelBuilder, ParamKind

GIB = 1 << 30
N = GIB // 4
"""f32 elements in 1 GiB."""

Row = dict[str, Any]


def median_of(run: Callable[[], float], repeats: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        run()
    return statistics.median(run() for _ in range(repeats))


# ---- kernels -------------------------------------------------------------------------------


def increment_kernel(n: int) -> Kernel:
    kb = KernelBuilder("increment")
    x = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    i = kb.local(0, n)
    x[i] = x[i] + 1.0
    return kb.build()


RAW_ADD = r"""
extern "C" __global__ void add(const float* a, const float* b, float* c, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" __global__ void empty(float* p) {}
"""


# ---- 1. elementwise ------------------------------------------------------------------------


def elementwise(device: Any, torch: Any, cupy: Any) -> list[Row]:
    from cuda.bindings import driver

    from zyx_cuda.interop import as_array

    pool = device.pool
    a, b, c = (pool.allocate(GIB) for _ in range(3))
    ta, tb, tc = (torch.from_dlpack(as_array(buf, DType.F32, (N,))) for buf in (a, b, c))
    ta.uniform_(-1, 1)
    tb.uniform_(-1, 1)
    expected = ta + tb
    torch.cuda.synchronize()
    rows: list[Row] = []

    def record(implementation: str, seconds: float) -> None:
        rows.append(
            _row("elementwise add f32 3x1GiB", implementation, 3 * GIB / seconds / 1e12, "TB/s")
        )

    for per_thread, local in [(1, 256), (4, 256), (8, 256), (8, 512), (16, 256)]:
        program = device.compile(strided_add(per_thread, local))
        ns = median_of(lambda: float(device.launch_timed(program, [a, b, c, N])), 20)  # noqa: B023
        tc.zero_()
        device.launch(program, [a, b, c, N])
        device.synchronize()
        assert torch.equal(tc, expected), "the IR kernel computed a wrong sum"
        record(f"zyx IR, {per_thread}/thread x {local}", ns / 1e9)
        device.release(program)

    def timed(run: Callable[[], None]) -> float:
        """Median seconds of ``run`` between two CUDA events on the current stream."""

        def once() -> float:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end)) / 1e3

        return median_of(once, 20)

    record("torch.add(out=)", timed(lambda: torch.add(ta, tb, out=tc)))
    ca, cb, cc = (cupy.from_dlpack(t) for t in (ta, tb, tc))
    ew = cupy.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x + y", "bench_add")
    record("cupy ElementwiseKernel", timed(lambda: ew(ca, cb, cc)))
    raw, grid, n = cupy.RawKernel(RAW_ADD, "add"), (N + 255) // 256, cupy.int64(N)
    record("cupy RawKernel", timed(lambda: raw((grid,), (256,), (ca, cb, cc, n))))

    function = _raw_function(device, "add")
    values = (ctypes.c_uint64 * 4)(a.handle, b.handle, c.handle, N)
    params = (ctypes.c_void_p * 4)(*(ctypes.addressof(values) + 8 * i for i in range(4)))
    # The stream that torch's and cupy's kernels and the events use (the legacy default).
    stream, address = (
        driver.CUstream(torch.cuda.current_stream().cuda_stream),
        ctypes.addressof(params),
    )

    def raw_launch() -> None:
        (err,) = driver.cuLaunchKernel(function, grid, 1, 1, 256, 1, 1, 0, stream, address, 0)
        assert not err, err

    record("raw cuda-python cuLaunchKernel", timed(raw_launch))
    for buf in (a, b, c):  # freed once the torch and cupy views of them are gone too
        pool.release(buf)
    device.synchronize()
    return rows


def _raw_function(device: Any, name: str) -> Any:
    """``name`` from ``RAW_ADD``, compiled by zyx's NVRTC path, loaded with the driver."""
    from cuda.bindings import driver

    image = device.compiler.compile(Source("raw", RAW_ADD, "raw-cuda"))
    device.context.activate()
    _, module = driver.cuModuleLoadData(image.data)
    _, function = driver.cuModuleGetFunction(module, name.encode())
    return function


# ---- 2. launch overhead --------------------------------------------------------------------


def launch_overhead(device: Any, torch: Any, cupy: Any) -> list[Row]:
    from cuda.bindings import driver

    import zyx_cuda.native

    burst = 500
    pool = device.pool
    buf = pool.allocate(256)
    cases: dict[str, Callable[[], float]] = {}

    def record(implementation: str, launch: Callable[[], None], sync: Callable[[], None]) -> None:
        cases[implementation] = partial(per_launch, launch, sync, burst)

    program, args = device.compile(empty_kernel()), [buf]
    has_launcher = zyx_cuda.native.launcher_type() is not None
    native = "native Launcher" if has_launcher else "no native module"
    record(
        f"zyx Device.launch ({native})", lambda: device.launch(program, args), device.synchronize
    )
    slower = {
        # Without the Launcher: the Python path (KernelProgram.schedule) around the native call.
        "zyx Device.launch (Python path, native call)": ["zyx_cuda.program.launcher_type"],
        # The path taken where the native module cannot be built (ZYX_NATIVE=0): the Python
        # path through cuda-python's binding.
        "zyx Device.launch (Python path) through cuda-python": [
            "zyx_cuda.program.launcher_type",
            "zyx_cuda.program.launch_function",
        ],
    }
    programs = [program]
    for implementation, turned_off in slower.items():
        with contextlib.ExitStack() as patches:
            for name in turned_off:
                patches.enter_context(mock.patch(name, lambda: None))
            programs.append(device.compile(empty_kernel()))
        record(implementation, partial(device.launch, programs[-1], args), device.synchronize)

    function = _raw_function(device, "empty")
    _, stream = driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)
    ptr = buf.handle
    value = ctypes.c_uint64(ptr)
    params = (ctypes.c_void_p * 1)(ctypes.addressof(value))
    address, launch = ctypes.addressof(params), driver.cuLaunchKernel
    by_types = ((ptr,), (ctypes.c_void_p,))
    sync = torch.cuda.synchronize
    record(
        "raw cuda-python, args as (values, types)",
        lambda: launch(function, 1, 1, 1, 1, 1, 1, 0, stream, by_types, 0),
        sync,
    )
    record(
        "raw cuda-python, prepared void** address",
        lambda: launch(function, 1, 1, 1, 1, 1, 1, 0, stream, address, 0),
        sync,
    )
    # ctypes on the driver function cuda-python calls, no argtypes: pointers as c_void_p,
    # 32-bit values as ints.
    pfn = int(driver.cuGetProcAddress(b"cuLaunchKernel", 12000, 0)[1])
    released = ctypes.CFUNCTYPE(ctypes.c_int)(pfn)  # releases the GIL during the call
    void = ctypes.c_void_p
    prebuilt = (void(int(function)), 1, 1, 1, 1, 1, 1, 0, void(int(stream)), void(address), None)

    def checked(call: Any, arguments: tuple[Any, ...]) -> Callable[[], None]:
        assert call(*arguments) == 0
        return lambda: call(*arguments)

    record("raw ctypes, prebuilt args (GIL released)", checked(released, prebuilt), sync)
    cbuf, raw = cupy.zeros(64, cupy.float32), cupy.RawKernel(RAW_ADD, "empty")
    record("cupy RawKernel", lambda: raw((1,), (1,), (cbuf,)), sync)
    t = torch.zeros(1, device="cuda")
    record("torch add_ (1 element)", lambda: t.add_(1.0), sync)
    # Bursts interleaved across the cases, so a slow spell of the host hits them all.
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(3):
        for run in cases.values():
            run()
    for _ in range(30):
        for name, run in cases.items():
            times[name].append(run())
    pool.release(buf)
    for compiled in programs:
        device.release(compiled)
    bench = "empty kernel launch, host"
    return [_row(bench, name, statistics.median(ts), "µs") for name, ts in times.items()]


# ---- 3. graph replay -----------------------------------------------------------------------


def graph_replay(device: Any, torch: Any) -> list[Row]:
    launches, replays, n = 100, 20, 1024
    pool = device.pool
    x = pool.allocate(4 * n)
    pool.write(x, np.zeros(n, np.float32))
    program = device.compile(increment_kernel(n))
    rec = device.record()
    for _ in range(launches):
        rec.launch(program, [x])
    rows: list[Row] = []

    def record(implementation: str, replay: Callable[[], None], sync: Callable[[], None]) -> None:
        def per_kernel() -> float:
            sync()
            start = time.perf_counter()
            for _ in range(replays):
                replay()
            sync()
            return (time.perf_counter() - start) / (replays * launches) * 1e6

        bench = "100-launch sequence, per kernel"
        rows.append(_row(bench, implementation, median_of(per_kernel, 20), "µs"))

    def eager() -> None:
        for _ in range(launches):
            device.launch(program, [x])

    record("zyx recording (CUDA graph)", rec.replay, device.synchronize)
    record("zyx Device.launch x100 (no graph)", eager, device.synchronize)
    out = np.empty(n, np.float32)
    pool.read(x, out)
    assert np.all(out == out[0]) and out[0] > 0

    t = torch.zeros(n, device="cuda")
    side = torch.cuda.Stream()  # warm-up on a side stream, as torch's docs prescribe
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            t.add_(1.0)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(launches):
            t.add_(1.0)
    record("torch.cuda.CUDAGraph", graph.replay, torch.cuda.synchronize)
    pool.release(x)
    device.release(program)
    return rows


# ---- 4. host to device ---------------------------------------------------------------------


def host_to_device(device: Any, torch: Any) -> list[Row]:
    host = torch.rand(N).numpy()  # random, pageable
    pool, buf = device.pool, device.pool.allocate(GIB)
    rows: list[Row] = []

    def record(
        bench: str, implementation: str, copy: Callable[[], None], sync: Callable[[], None]
    ) -> None:
        def gbps() -> float:
            sync()
            start = time.perf_counter()
            copy()
            sync()
            return GIB / (time.perf_counter() - start) / 1e9

        rows.append(_row(bench, implementation, median_of(gbps, 10), "GB/s"))

    h2d, d2h = "host to device 1 GiB", "device to host 1 GiB"
    record(
        h2d,
        f"zyx pool.write (pageable numpy, {pool.staging.threads} lanes)",
        lambda: pool.write(buf, host),
        device.synchronize,
    )
    back = np.empty_like(host)
    pool.read(buf, back)
    assert np.array_equal(back, host)
    record(d2h, "zyx pool.read (pageable numpy)", lambda: pool.read(buf, back), device.synchronize)
    gpu = torch.empty(N, device="cuda")
    pinned, pageable = torch.from_numpy(host).pin_memory(), torch.from_numpy(host)
    locked = pinned.numpy()
    record(
        h2d,
        "zyx pool.write (page-locked numpy)",
        lambda: pool.write(buf, locked),
        device.synchronize,
    )
    record(
        d2h, "zyx pool.read (page-locked numpy)", lambda: pool.read(buf, locked), device.synchronize
    )
    assert np.array_equal(locked, host)
    sync = torch.cuda.synchronize
    record(h2d, "torch copy_ from pinned", lambda: gpu.copy_(pinned, non_blocking=True), sync)
    record(h2d, "torch copy_ from pageable", lambda: gpu.copy_(pageable), sync)
    record(d2h, "torch copy_ to pageable", lambda: pageable.copy_(gpu), sync)
    record(d2h, "torch copy_ to pinned", lambda: pinned.copy_(gpu), sync)  # zyx's page-locked peer
    pool.release(buf)
    return rows


# ---- 5. peer copy --------------------------------------------------------------------------


def peer_copy(device: Any, torch: Any) -> list[Row]:
    """1 GiB from GPU 0 to GPU 1 (none where there is one GPU): zyx ``copy_from`` vs torch."""
    from zyx_cuda.device import CudaDevice

    if torch.cuda.device_count() < 2:
        return []
    other = CudaDevice(1)
    src, dst = device.pool.allocate(GIB), other.pool.allocate(GIB)
    device.pool.write(src, torch.rand(N).numpy())
    link = "direct link" if other.context.reach(device.context) else "staged by the driver"
    bench = "GPU 0 to GPU 1, 1 GiB"

    def zyx() -> float:
        other.synchronize()
        start = time.perf_counter()
        other.pool.copy_from(device.pool, src, dst)
        other.synchronize()
        return GIB / (time.perf_counter() - start) / 1e9

    a, b = torch.rand(N, device="cuda:0"), torch.empty(N, device="cuda:1")

    def peer() -> float:
        torch.cuda.synchronize(0)
        torch.cuda.synchronize(1)
        start = time.perf_counter()
        b.copy_(a)
        torch.cuda.synchronize(1)
        return GIB / (time.perf_counter() - start) / 1e9

    rows = [
        _row(bench, f"zyx pool.copy_from ({link})", median_of(zyx, 10), "GB/s"),
        _row(bench, "torch copy_", median_of(peer, 10), "GB/s"),
    ]
    device.pool.release(src)
    other.pool.release(dst)
    return rows


# ---- report --------------------------------------------------------------------------------


_row = results.row


def environment(device: Any) -> dict[str, str]:
    import cuda.bindings
    import cupy
    import torch

    from zyx_cuda.compiler import nvrtc_version

    found = results.gpus()
    hardware = f"{len(found)} x {found[0].split(',')[0]}; {results.cpu()}" if found else ""
    versions = {
        "cuda-bindings": cuda.bindings.__version__,
        "nvrtc": ".".join(map(str, nvrtc_version())),
        "torch": torch.__version__,
        "cupy": cupy.__version__,
    }
    return results.environment(
        hardware or results.describe(device)[0],
        results.describe(device)[1],
        versions,
        "IEEE f32; NVRTC without --use_fast_math (FMA contraction on)",
        "median of repeated runs after warm-up, CUDA events or synchronize before the clock, "
        "random data",
    )


def main() -> None:
    import cupy
    import torch

    from zyx_cuda.device import CudaDevice

    torch.cuda.init()
    device = CudaDevice(0)
    rows: list[Row] = []
    for section in (
        lambda: elementwise(device, torch, cupy),
        lambda: launch_overhead(device, torch, cupy),
        lambda: graph_replay(device, torch),
        lambda: host_to_device(device, torch),
        lambda: peer_copy(device, torch),
    ):
        new = section()
        rows += new
        print(results.table(new), flush=True)
    results.write("cuda_bench", results.machine(), rows, environment(device))


if __name__ == "__main__":
    main()
