"""zyx's own host time per ``Device.launch``, with the native launch stubbed out. No GPU.

    python benchmarks/launch_overhead.py                 # both backends
    python benchmarks/launch_overhead.py --backend cuda  # or opencl, or host

Writes ``launch_overhead_<machine>_<backend>.json`` (``_python`` after it with
``ZYX_NATIVE=0``) to ``$OUT`` or the current folder, and prints the table.

What a launch costs beyond the native enqueue is zyx's Python: argument checks, stream or
queue choice, hazard bookkeeping, argument packing. This isolates it on any machine:

- CUDA: every ``cuda.bindings.driver`` call zyx-cuda makes is replaced, before zyx_cuda
  is imported, by a stub that returns success (``tests/cuda/stub_driver.py``; its
  ``cuLaunchKernel`` is a C function that does nothing), so a ``CudaDevice`` opens without
  a GPU. NVRTC compiles for real (sm_90).
- OpenCL: a real device (PoCL here), with the kernel enqueue replaced by a stub that
  succeeds (zyx-opencl's native ``enqueue`` and its ``Enqueuer``'s
  ``clEnqueueNDRangeKernel``, or pyopencl's ``enqueue_nd_range_kernel`` with
  ``ZYX_NATIVE=0``); setting kernel arguments, markers and flushes stay real.
- host: nothing stubbed (its launch is the C function's ctypes call, on one thread); the
  "stub alone" row is that call of the empty kernel's function, the arguments preset.

Each case is the host time of a burst of ``--launches`` launches, per launch, median of
``--repeats`` bursts (the device synchronized, untimed, between bursts). The stub's own
cost (calling it alone in the same loop) is reported too: zyx's overhead is the
difference. Cases: an empty kernel of one written buffer, and ``c = a + b`` of two read
buffers, one written buffer and an int scalar, once with the same arguments every time
and once rotating over 64 outputs (the throughput test's pattern, spread over streams).
Every launch takes its device's lock (``MemoryPool.lock``): the native path in C, the
Python path with ``with``, whose cost alone is the "device lock alone" row.

``--clock thread`` times the launching thread's CPU time instead of wall time: on a
machine that other processes load, wall time varies by tens of percent between runs, the
thread's own time much less (it leaves out the time the thread waits to be scheduled).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "cuda"))  # stub_driver
import results  # noqa: E402
from kernels import empty_kernel, strided_add  # noqa: E402
from timing import per_launch  # noqa: E402

STUBBED = {
    "cuda (driver stubbed)": "CUDA: every driver call stubbed (tests/cuda/stub_driver.py)",
    "opencl (enqueue stubbed)": "OpenCL: the first platform's kernel enqueue stubbed",
    "host (not stubbed, one thread)": "host: not stubbed",
}
"""What stands in for each backend's driver."""
CLOCK = time.perf_counter
"""The clock of every burst (``--clock``)."""


def measure(
    cases: dict[str, tuple[Callable[[], None], Callable[[], None]]], launches: int, repeats: int
) -> dict[str, float]:
    """Median µs per launch of each case, bursts interleaved across cases."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for run, drain in cases.values():
        per_launch(run, drain, launches, CLOCK)  # warm-up
    for _ in range(repeats):
        for name, (run, drain) in cases.items():
            times[name].append(per_launch(run, drain, launches, CLOCK))
    return {name: statistics.median(ts) for name, ts in times.items()}


def launch_cases(
    device: Any, add: Any, empty: Any, stub: Callable[[], None]
) -> dict[str, tuple[Callable[[], None], Callable[[], None]]]:
    pool = device.pool
    a, b, c = (pool.allocate(4096) for _ in range(3))
    outs = [pool.allocate(4096) for _ in range(64)]
    launch, sync = device.launch, device.synchronize
    empty_args, add_args = [c], [a, b, c, 1024]
    rotating = iter(range(1 << 62))

    def add_rotating() -> None:
        launch(add, [a, b, outs[next(rotating) % 64], 1024])

    lock = pool.lock

    def locked() -> None:
        with lock:
            pass

    return {
        "stub alone": (stub, sync),
        f"device lock alone ({type(lock).__name__}, with)": (locked, sync),
        "empty kernel, 1 buffer": (lambda: launch(empty, empty_args), sync),
        "add a + b -> c, n (same args)": (lambda: launch(add, add_args), sync),
        "add a + b -> 64 rotating outputs": (add_rotating, sync),
    }


# ---- CUDA, driver stubbed -------------------------------------------------------------------


def cuda(launches: int, repeats: int) -> dict[str, float]:
    from stub_driver import install

    install()
    from cuda.bindings import driver

    from zyx_cuda.device import CudaDevice
    from zyx_cuda.native import launch_function

    fast = launch_function()

    def stub() -> None:  # the stand-in through the same call zyx makes
        if fast is not None:
            fast(1, 1, 1, 1, 1, 1, 1, 0, 0, 0)
        else:
            driver.cuLaunchKernel(1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 0)

    device = CudaDevice(0)
    add, empty = device.compile(strided_add(1, 256)), device.compile(empty_kernel())
    return measure(launch_cases(device, add, empty, stub), launches, repeats)


# ---- OpenCL, enqueue stubbed ----------------------------------------------------------------


def opencl(launches: int, repeats: int, platform: str) -> dict[str, float]:
    from unittest import mock

    import pyopencl as cl
    from opencl_bench import pick
    from stub_driver import stand_ins

    from zyx_opencl.native import enqueue_function, entry_point, native

    device = pick(platform, 0)
    module = native()
    if enqueue_function() is not None and module is not None:  # the native enqueue, stubbed

        def stub(*args: Any) -> int:
            return 0

        # The Enqueuer's clEnqueueNDRangeKernel: a C function that returns CL_SUCCESS.
        module.bind(stand_ins().address(b"success"), entry_point("clSetKernelArg"))
        with mock.patch("zyx_opencl.program.enqueue_function", lambda: stub):
            add, empty = device.compile(strided_add(1, 256)), device.compile(empty_kernel())
        return measure(
            launch_cases(device, add, empty, lambda: stub(1, 1, 1, 1, 1, 1, 1, 1, None)),
            launches,
            repeats,
        )
    # pyopencl's enqueue, stubbed (the generated code looks it up in the module).
    add, empty = device.compile(strided_add(1, 256)), device.compile(empty_kernel())
    queue = device.scheduler.queues[0]
    event = cl.enqueue_marker(queue)
    event.wait()

    def enqueue(*args: Any, **kwargs: Any) -> Any:
        return event

    cl.enqueue_nd_range_kernel = enqueue
    kernel, one = empty.kernel, (1,)
    return measure(
        launch_cases(device, add, empty, lambda: enqueue(queue, kernel, one, one, None, None)),
        launches,
        repeats,
    )


# ---- host, nothing stubbed -------------------------------------------------------------------


def host(launches: int, repeats: int) -> dict[str, float]:
    from zyx.host.device import CompiledProgram, HostDevice
    from zyx.host.pool import HostPool

    device = HostDevice(HostPool(), threads=1)
    add, empty = device.compile(strided_add(1, 256)), device.compile(empty_kernel())
    if not isinstance(empty, CompiledProgram):
        raise SystemExit("the host has no C compiler here: its kernels are interpreted")
    buf = device.pool.allocate(4)
    device.launch(empty, [buf])  # binds the argument array the stub calls with
    function, argv = empty._function, empty._argv
    assert function is not None

    def stub() -> None:
        function(argv, 1)

    return measure(launch_cases(device, add, empty, stub), launches, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("cuda", "opencl", "host", "all"), default="all")
    parser.add_argument("--platform", default="0", help="OpenCL platform index or name part")
    parser.add_argument("--launches", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--clock", choices=("wall", "thread"), default="wall")
    args = parser.parse_args()
    global CLOCK
    CLOCK = time.thread_time if args.clock == "thread" else time.perf_counter
    measured: dict[str, dict[str, float]] = {}
    path = "Python" if os.environ.get("ZYX_NATIVE") == "0" else "native"
    if args.backend in ("cuda", "all"):
        measured["cuda (driver stubbed)"] = cuda(args.launches, args.repeats)
    if args.backend in ("opencl", "all"):
        measured["opencl (enqueue stubbed)"] = opencl(args.launches, args.repeats, args.platform)
    if args.backend in ("host", "all"):
        measured["host (not stubbed, one thread)"] = host(args.launches, args.repeats)
    print(f"| backend ({path} path) | case | µs per launch | zyx overhead (− stub) |")
    print("|---|---|---:|---:|")
    rows = []
    for backend, times in measured.items():
        stub = times["stub alone"]
        for case, us in times.items():
            extra = "" if case == "stub alone" or "lock" in case else f"{us - stub:.2f}"
            print(f"| {backend} | {case} | {us:.2f} | {extra} |")
            who = case if case == "stub alone" or "lock" in case else "zyx Device.launch"
            rows.append(results.row(f"{backend}: {case}", f"{who}, {path} path", us, "µs"))
    env = results.environment(
        results.cpu(), "; ".join(STUBBED[name] for name in measured),
        {"numpy": results.version("numpy"), "pyopencl": results.version("pyopencl"),
         "cuda-bindings": results.version("cuda-bindings")},
        "not applicable: empty and add kernels, nothing computed is timed",
        f"median of {args.repeats} bursts of {args.launches} launches ({args.clock} clock)",
    )  # fmt: skip
    python = "_python" if path == "Python" else ""
    results.write("launch_overhead", f"{results.machine()}_{args.backend}{python}", rows, env)


if __name__ == "__main__":
    main()
