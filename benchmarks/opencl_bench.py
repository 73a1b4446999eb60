"""zyx-opencl side by side with raw pyopencl, in one run on one OpenCL device.

    python benchmarks/opencl_bench.py --platform NVIDIA          # full size, on the GPU
    python benchmarks/opencl_bench.py --platform 0 --size-mib 64 # small, on PoCL

Writes ``opencl_bench_<machine>_<platform>.json`` (``benchmarks/results.py``; ``-python``
after the platform with ``ZYX_NATIVE=0``) to ``--out`` (default ``$OUT``, else the current
folder) and prints the table.

1. Elementwise add, f32, 3 buffers of ``--size-mib`` (two read, one written): IR kernels
   (work-items adding 1 to 8 elements ``local`` apart) through ``Device.launch_timed`` vs
   the same OpenCL C source built with the same options and enqueued by raw pyopencl.
   Both timed by OpenCL event profiling of one launch; TB/s counts bytes read + written.
2. Host overhead of one launch of an empty kernel: the host time of a burst of
   ``--launches`` launches, per launch, drained (untimed) between bursts; and the same up
   to the end of the drain (the launched work done). zyx's ratios to the raw args-preset
   call are also given as the median over rounds of each round's ratio (a round runs
   every runner once, within a fraction of a second: the ratio cancels a shared machine's
   drift between rounds), and likewise to the idiomatic call, which like
   ``Device.launch`` passes the arguments with the launch. Raw pyopencl:
   ``enqueue_nd_range_kernel`` with the arguments set once, on one queue without and with
   a ``clFlush`` per 100 commands (zyx's window), and round 8 queues with a ``clFlush`` of
   each per 100 (zyx's schedule of this kernel, in native calls alone); and the idiomatic
   ``kernel(queue, ...)`` call that sets the arguments each time. zyx: ``Device.launch``
   with the window of 100
   (8 queues: the kernel's one buffer is only read, so the launches go round the queues,
   least-loaded first), the same with 1 queue, and with a window of 1 (each command
   enqueued and flushed at once). ``--gate on|off`` sets ``opencl.gate`` (default: the
   device's own), in a process of its own: on NVIDIA's OpenCL a gated device slows every
   other enqueue of the process.
3. Throughput of ``--launches`` small independent kernels (add of ``--small`` elements
   into 64 rotating outputs): wall time of launching all and synchronizing, 8 queues vs 1.

Every number is the median of ``--repeats`` runs (``--rounds`` for the launch bursts) after
warm-up, on random data. Math mode: the seed's build options (``-cl-finite-math-only
-cl-no-signed-zeros -cl-mad-enable``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyopencl as cl
import results
from kernels import strided_add

from zyx.dtypes import DType
from zyx.ir import Kernel, KernelBuilder
from zyx_opencl.compiler import BUILD_OPTIONS
from zyx_opencl.config import OpenCLSection
from zyx_opencl.device import OpenCLDevice, open_devices

Row = dict[str, Any]
ADD_VARIANTS = [(1, 256), (4, 256), (8, 256), (4, 512), (4, 1024)]
"""(elements per work-item, work-items per group) of the add kernels."""


def median_of(run: Callable[[], float], repeats: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        run()
    return statistics.median(run() for _ in range(repeats))


# ---- kernels --------------------------------------------------------------------------------


def empty_kernel() -> Kernel:
    kb = KernelBuilder("empty")
    kb.param(DType.F32)
    return kb.build()


# ---- 1. bandwidth ---------------------------------------------------------------------------


def bandwidth(dev: OpenCLDevice, size_mib: int, repeats: int) -> list[Row]:
    pool = dev.pool
    n = size_mib * (1 << 20) // 4
    rng = np.random.default_rng(0)
    bufs = [pool.allocate(4 * n) for _ in range(3)]
    x, y = (rng.random(n, dtype=np.float32) for _ in range(2))
    pool.write(bufs[0], x)
    pool.write(bufs[1], y)
    rows = []
    for per_item, local in ADD_VARIANTS:
        if local <= dev.info.max_local_threads:
            variant = f"{per_item}/item x {local}"
            zyx_s, raw_s = add_seconds(dev, strided_add(per_item, local), bufs, n, repeats)
            check_sum(dev, bufs[2], x, y)
            for label, seconds in (("zyx Device.launch_timed", zyx_s), ("raw pyopencl", raw_s)):
                rate = 3 * 4 * n / seconds / 1e12
                rows.append(results.row(f"add f32 3 x {size_mib} MiB", f"{label}, {variant}",
                                        rate, "TB/s"))  # fmt: skip
    for buf in bufs:
        pool.release(buf)
    dev.synchronize()
    return rows


def add_seconds(
    dev: OpenCLDevice, kernel: Kernel, bufs: list[Any], n: int, repeats: int
) -> tuple[float, float]:
    """Device seconds of one launch of ``kernel``: through zyx, and through raw pyopencl
    with the same source and build options, both by event profiling, interleaved."""
    program = dev.compile(kernel)
    args = [*bufs, n]
    context = dev.pool.context
    source = dev.dialect.render(kernel)
    raw = cl.Kernel(cl.Program(context, source.code).build(list(BUILD_OPTIONS)), source.name)
    raw.set_args(*(buf.handle for buf in bufs), np.int64(n))
    queue = cl.CommandQueue(context, dev.cl_device, cl.command_queue_properties.PROFILING_ENABLE)
    work = program.work(program.inspect(args)[3])
    assert work is not None

    def zyx_once() -> float:
        return dev.launch_timed(program, args) * 1e-9

    def raw_once() -> float:
        event = cl.enqueue_nd_range_kernel(queue, raw, work, program.local_size)
        event.wait()
        return float(event.profile.end - event.profile.start) * 1e-9

    for _ in range(2):  # warm-up
        zyx_once()
        raw_once()
    pairs = [(zyx_once(), raw_once()) for _ in range(repeats)]
    return statistics.median(z for z, _ in pairs), statistics.median(r for _, r in pairs)


def check_sum(dev: OpenCLDevice, c: Any, x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> None:
    """Compare the first and last MiB of ``c`` with ``x + y`` (a full read takes long)."""
    chunk = min(x.size, 1 << 18)
    for start in (0, x.size - chunk):
        out = np.empty(chunk, np.float32)
        dev.pool.read(c, out, 4 * start)
        np.testing.assert_array_equal(out, x[start : start + chunk] + y[start : start + chunk])


# ---- 2. launch overhead ---------------------------------------------------------------------


def launch_overhead(devices: dict[str, OpenCLDevice], launches: int, repeats: int) -> list[Row]:
    """Host µs per launch of an empty kernel, for zyx's devices and raw pyopencl."""
    runners: dict[str, tuple[Callable[[], None], Callable[[], None]]] = {}
    for label, dev in devices.items():
        program = dev.compile(empty_kernel())
        buf = dev.pool.allocate(64)
        runners[label] = (partial_launch(dev, program, [buf]), dev.synchronize)
    dev = next(iter(devices.values()))
    context, cl_device = dev.pool.context, dev.cl_device
    queue = cl.CommandQueue(context, cl_device)
    source = dev.dialect.render(empty_kernel())
    kernel = cl.Kernel(cl.Program(context, source.code).build(list(BUILD_OPTIONS)), source.name)
    handle = cl.Buffer(context, cl.mem_flags.READ_WRITE, 64)
    kernel.set_args(handle)
    enqueue, one = cl.enqueue_nd_range_kernel, (1,)

    def raw() -> None:
        enqueue(queue, kernel, one, one)

    flushes = iter(range(1 << 62))

    def raw_flushed() -> None:
        enqueue(queue, kernel, one, one)
        if next(flushes) % 100 == 99:
            queue.flush()

    queues = [cl.CommandQueue(context, cl_device) for _ in range(8)]
    turns = iter(range(1 << 62))

    def raw_round() -> None:
        turn = next(turns)
        enqueue(queues[turn % 8], kernel, one, one)
        if turn % 100 == 99:
            for each in queues:
                each.flush()

    def finish_all() -> None:
        for each in queues:
            each.finish()

    def idiomatic() -> None:
        kernel(queue, one, one, handle)

    runners["raw enqueue_nd_range_kernel, args preset"] = (raw, queue.finish)
    runners["raw enqueue_nd_range_kernel + clFlush / 100"] = (raw_flushed, queue.finish)
    runners["raw, round 8 queues + clFlush of each / 100"] = (raw_round, finish_all)
    runners["raw kernel(queue, ...), args set each call"] = (idiomatic, queue.finish)

    def burst(launch: Callable[[], None], drain: Callable[[], None]) -> tuple[float, float]:
        """µs per launch: the burst's host time, and with the drain (the work done too)."""
        start = time.perf_counter()
        for _ in range(launches):
            launch()
        enqueued = time.perf_counter()
        drain()
        done = time.perf_counter()
        return (enqueued - start) / launches * 1e6, (done - start) / launches * 1e6

    times: dict[str, list[tuple[float, float]]] = {label: [] for label in runners}
    for launch, drain in runners.values():
        burst(launch, drain)  # warm-up
    for _ in range(repeats):  # interleaved, so drifts of a shared machine hit all alike
        for label, (launch, drain) in runners.items():
            times[label].append(burst(launch, drain))
    # A driver may defer running what is not flushed (PoCL does): the burst's host time
    # then leaves out work that a flushing caller pays during it. The second case counts
    # the burst up to the end of its drain, the same work done for every runner.
    cases = ("empty kernel, host time", "empty kernel, launches until done")
    rows = [
        results.row(case, label, statistics.median(t[which] for t in ts), "µs")
        for which, case in enumerate(cases)
        for label, ts in times.items()
    ]
    # On a shared machine the speed drifts between rounds; a round's runners run within a
    # fraction of a second, so the ratio within each round cancels the drift.
    references = {
        "raw args-preset": times["raw enqueue_nd_range_kernel, args preset"],
        "raw kernel(queue, ...)": times["raw kernel(queue, ...), args set each call"],
    }
    for reference, raw in references.items():
        for which, case in enumerate(cases):
            for label in devices:
                ratios = [zyx[which] / bare[which] for zyx, bare in zip(times[label], raw)]
                ratio_case = f"{case}, to {reference} (median of per-round ratios)"
                rows.append(results.row(ratio_case, label, statistics.median(ratios), "x"))
    return rows


def partial_launch(dev: OpenCLDevice, program: Any, args: list[Any]) -> Callable[[], None]:
    launch = dev.launch
    return lambda: launch(program, args)


# ---- 3. throughput --------------------------------------------------------------------------


def throughput(
    devices: dict[str, OpenCLDevice], launches: int, small: int, repeats: int
) -> list[Row]:
    case = f"{launches} x add of {small} f32, 64 outputs"
    return [
        results.row(
            case, label, launches / small_kernels(dev, launches, small, repeats), "kernels/s"
        )
        for label, dev in devices.items()
    ]


def small_kernels(dev: OpenCLDevice, launches: int, small: int, repeats: int) -> float:
    """Wall seconds to launch ``launches`` independent adds and synchronize."""
    rng = np.random.default_rng(1)
    pool = dev.pool
    program = dev.compile(strided_add(1, 256))
    a, b = pool.allocate(4 * small), pool.allocate(4 * small)
    pool.write(a, rng.random(small, dtype=np.float32))
    pool.write(b, rng.random(small, dtype=np.float32))
    outs = [pool.allocate(4 * small) for _ in range(64)]

    def run() -> float:
        start = time.perf_counter()
        for j in range(launches):
            dev.launch(program, [a, b, outs[j % 64], small])
        dev.synchronize()
        return time.perf_counter() - start

    seconds = median_of(run, repeats, warmup=1)
    for buf in (a, b, *outs):
        pool.release(buf)
    dev.synchronize()
    return seconds


# ---- report ---------------------------------------------------------------------------------


def environment(dev: OpenCLDevice) -> dict[str, str]:
    hardware, driver = results.describe(dev)
    versions = {"pyopencl": cl.VERSION_TEXT, "numpy": np.__version__}
    return results.environment(hardware, driver, versions, f"{' '.join(BUILD_OPTIONS)}, f32")


def machine(dev: OpenCLDevice) -> str:
    """This machine, the platform, and whether zyx's native modules ran."""
    name = dev.cl_device.platform.name
    platform = "pocl" if "portable" in name.lower() else results.slug(name.split()[0])
    python = "-python" if os.environ.get("ZYX_NATIVE") == "0" else ""
    return f"{results.machine()}_{platform}{python}"


def pick(platform_arg: str, device_index: int, **fields: Any) -> OpenCLDevice:
    """The device ``device_index`` of the platform named by index or name substring."""
    platforms = cl.get_platforms()
    matches = [
        i
        for i, p in enumerate(platforms)
        if platform_arg == str(i) or platform_arg.lower() in p.name.lower()
    ]
    if not matches:
        names = ", ".join(f"{i}: {p.name}" for i, p in enumerate(platforms))
        raise SystemExit(f"no platform {platform_arg!r}; there are {names}")
    section = OpenCLSection(platform_ids=[matches[0]], **fields)
    return open_devices(section)[device_index]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--platform", default="0", help="platform index or name substring")
    parser.add_argument("--device", type=int, default=0, help="device index in the platform")
    parser.add_argument("--size-mib", type=int, default=1024, help="MiB per add buffer")
    parser.add_argument("--launches", type=int, default=10_000)
    parser.add_argument("--small", type=int, default=1 << 14, help="elements per small kernel")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=31, help="rounds of launch bursts")
    parser.add_argument("--gate", choices=("on", "off", "auto"), default="auto")
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args()

    def device(**fields: Any) -> OpenCLDevice:
        gate = {"on": True, "off": False}.get(args.gate)
        return pick(args.platform, args.device, gate=gate, **fields)

    dev = device()
    gate = f"gate {'on' if dev.scheduler.gated else 'off'}"
    rows = bandwidth(dev, args.size_mib, args.repeats)
    rows += launch_overhead(
        {
            f"zyx Device.launch, window 100 ({gate})": dev,
            "zyx Device.launch, window 100, 1 queue": device(queues=1),
            "zyx Device.launch, window 1": device(window=1),
        },
        args.launches,
        args.rounds,
    )
    rows += throughput(
        {f"zyx, 8 queues ({gate})": dev, "zyx, 1 queue": device(queues=1)},
        args.launches,
        args.small,
        args.repeats,
    )
    print(results.table(rows))
    results.write("opencl_bench", machine(dev), rows, environment(dev), args.out)


if __name__ == "__main__":
    main()
