"""The host device side by side with numpy, in one run on this machine.

    python benchmarks/host_vs_numpy.py [--small]   # writes host_vs_numpy_<machine>.json
                                                   # to $OUT or .

1. Elementwise add, f32, 64 Mi elements (16 Mi with ``--small``; two inputs read, one
   output written): an IR
   kernel compiled by the host device (groups of 256 work-items, a bounds check) vs
   ``np.add(a, b, out=c)`` and the allocating ``a + b``.
2. Row sums, f32: ``zyx.testing.examples.row_sum`` (one work-item per row, 16 partial sums so
   the compiler vectorizes without reassociating) vs ``np.sum(x, axis=1, out=o)``, on
   8192 x 8192 and on 1 Mi x 64 (a quarter of the rows with ``--small``).

zyx runs with OpenMP's default thread count (one per core) and with one thread; numpy's
ufuncs and reductions use one thread. Every number is the median of repeated runs after
warm-up, on random data, with outputs written before timing (no first-touch page faults).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import results

from zyx.backend import Buffer
from zyx.dtypes import DType
from zyx.host.device import HostDevice
from zyx.host.pool import HostPool
from zyx.ir import Kernel, KernelBuilder, ParamKind, ceil_div
from zyx.testing.examples import row_sum

N = 64 << 20
REPEATS = 15
WARMUP = 3


@dataclass(frozen=True)
class Row:
    case: str
    runner: str
    seconds: float
    nbytes: int

    @property
    def gbps(self) -> float:
        return self.nbytes / self.seconds / 1e9


def median_times(runners: dict[str, Callable[[], Any]]) -> dict[str, float]:
    """Each runner's median time. Runs interleave (one of each per round), so a burst of
    load from another process on the machine hits every runner alike."""
    for _ in range(WARMUP):
        for run in runners.values():
            run()
    times: dict[str, list[float]] = {label: [] for label in runners}
    for _ in range(REPEATS):
        for label, run in runners.items():
            start = time.perf_counter()
            run()
            times[label].append(time.perf_counter() - start)
    return {label: statistics.median(t) for label, t in times.items()}


def add_kernel(local: int = 256) -> Kernel:
    kb = KernelBuilder("add")
    a, b = kb.param(DType.F32), kb.param(DType.F32)
    c = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    n = kb.variable()
    i = kb.group(0, ceil_div(n, local)) * local + kb.local(0, local)
    with kb.if_(i < n):
        c[i] = a[i] + b[i]
    return kb.build()


def on_device(pool: HostPool, *arrays: np.ndarray[Any, Any]) -> list[Buffer]:
    buffers = []
    for array in arrays:
        buf = pool.allocate(array.nbytes)
        pool.write(buf, array)
        buffers.append(buf)
    return buffers


def bench_add(devices: dict[str, HostDevice], rng: np.random.Generator, n: int) -> list[Row]:
    a, b = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
    c = np.full(n, np.nan, np.float32)
    runners: dict[str, Callable[[], Any]] = {
        "numpy np.add(out=)": partial(np.add, a, b, out=c),
        "numpy a + b": partial(np.add, a, b),
    }
    outputs = {}
    for label, device in devices.items():
        buffers = on_device(device.pool, a, b, c)
        args: list[Buffer | int] = [*buffers, n]
        runners[label] = partial(device.launch, device.compile(add_kernel()), args)
        outputs[label] = (device, buffers[2])
    case = f"add f32, {n >> 20} Mi"
    rows = [Row(case, label, t, 3 * 4 * n) for label, t in median_times(runners).items()]
    for device, buf in outputs.values():
        out = np.empty_like(c)
        device.pool.read(buf, out)
        assert np.array_equal(out, a + b), "the host device's sum is wrong"
    return rows


def bench_row_sum(
    devices: dict[str, HostDevice], rng: np.random.Generator, rows: int, cols: int
) -> list[Row]:
    x = rng.standard_normal((rows, cols), np.float32)
    out = np.full(rows, np.nan, np.float32)
    runners: dict[str, Callable[[], Any]] = {"numpy sum(axis=1)": partial(np.sum, x, 1, out=out)}
    kernel = row_sum(rows, cols, lanes=16).kernel
    outputs = {}
    for label, device in devices.items():
        buffers = on_device(device.pool, x.ravel(), out)
        runners[label] = partial(device.launch, device.compile(kernel), buffers)
        outputs[label] = (device, buffers[1])
    case, nbytes = f"row sum f32, {rows} x {cols}", 4 * (rows * cols + rows)
    result = [Row(case, label, t, nbytes) for label, t in median_times(runners).items()]
    reference = x.astype(np.float64).sum(axis=1)
    for device, buf in outputs.values():
        got = np.empty_like(out)
        device.pool.read(buf, got)
        error = np.linalg.norm(got - reference) / np.linalg.norm(reference)
        assert error < 1e-5, f"the host device's row sums are off by {error:.2g}"
    return result


def schema_rows(rows: list[Row]) -> list[results.Row]:
    """GB/s of each row (its time as a note)."""
    return [results.row(r.case, r.runner, r.gbps, "GB/s", f"{r.seconds * 1e3:.2f} ms")
            for r in rows]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="a quarter of the sizes")
    args = parser.parse_args()
    scale = 4 if args.small else 1
    pool = HostPool()
    devices = {"zyx host": HostDevice(pool), "zyx host, 1 thread": HostDevice(pool, threads=1)}
    device = next(iter(devices.values()))
    if device.interpreted:
        sys.exit("no C compiler: the host device would interpret, nothing to measure")
    rng = np.random.default_rng(0)
    rows = bench_add(devices, rng, N // scale)
    side = 4096 if args.small else 8192
    rows += bench_row_sum(devices, rng, side, side)
    rows += bench_row_sum(devices, rng, (1 << 20) // scale, 64)
    out = schema_rows(rows)
    print(results.table(out))
    hardware, driver = results.describe(device)
    chain = device.toolchain
    flags = " ".join(chain.flags) if chain else ""
    env = results.environment(
        hardware,
        driver,
        {"numpy": np.__version__},
        f"IEEE f32: cc {flags} (no fast math)",
        f"median of {REPEATS} interleaved runs after {WARMUP} warm-ups, numpy's ufuncs on one "
        "thread; a shared VM's runs minutes apart can differ by 2x: compare rows of one run",
    )
    results.write("host_vs_numpy", results.machine(), out, env)


if __name__ == "__main__":
    main()
