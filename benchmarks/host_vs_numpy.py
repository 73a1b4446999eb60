"""The host device side by side with numpy, in one run on this machine.

    python benchmarks/host_vs_numpy.py     # prints the table, updates BENCHMARKS.md

1. Elementwise add, f32, 64 Mi elements (two inputs read, one output written): an IR
   kernel compiled by the host device (groups of 256 work-items, a bounds check) vs
   ``np.add(a, b, out=c)`` and the allocating ``a + b``.
2. Row sums, f32: ``zyx.testing.examples.row_sum`` (one work-item per row, 16 partial sums so
   the compiler vectorizes without reassociating) vs ``np.sum(x, axis=1, out=o)``, on
   8192 x 8192 and on 1 Mi x 64.

zyx runs with OpenMP's default thread count (one per core) and with one thread; numpy's
ufuncs and reductions use one thread. Every number is the median of repeated runs after
warm-up, on random data, with outputs written before timing (no first-touch page faults).
"""

from __future__ import annotations

import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from zyx.backend import Buffer
from zyx.dtypes import DType
from zyx.host.device import HostDevice
from zyx.host.pool import HostPool
from zyx.ir import Kernel, KernelBuilder, ParamKind, ceil_div
from zyx.testing.examples import row_sum

ROOT = Path(__file__).resolve().parents[1]
N = 64 << 20
REPEATS = 15
BASELINES = ("numpy np.add(out=)", "numpy sum(axis=1)")
"""What *vs numpy* divides by: numpy writing into a preallocated output, as zyx does."""
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


def bench_add(devices: dict[str, HostDevice], rng: np.random.Generator) -> list[Row]:
    a, b = rng.standard_normal(N, np.float32), rng.standard_normal(N, np.float32)
    c = np.full(N, np.nan, np.float32)
    runners: dict[str, Callable[[], Any]] = {
        "numpy np.add(out=)": partial(np.add, a, b, out=c),
        "numpy a + b": partial(np.add, a, b),
    }
    outputs = {}
    for label, device in devices.items():
        buffers = on_device(device.pool, a, b, c)
        args: list[Buffer | int] = [*buffers, N]
        runners[label] = partial(device.launch, device.compile(add_kernel()), args)
        outputs[label] = (device, buffers[2])
    rows = [
        Row("add f32, 64 Mi", label, t, 3 * 4 * N) for label, t in median_times(runners).items()
    ]
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


def machine() -> str:
    model = "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        found = re.search(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.M)
        model = found[1] if found else model
    compiler = subprocess.run(["cc", "--version"], capture_output=True, text=True).stdout
    return (
        f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}; "
        f"{compiler.splitlines()[0] if compiler else 'no cc'}; numpy {np.__version__}, "
        f"Python {platform.python_version()}"
    )


def table(rows: list[Row]) -> str:
    lines = ["| case | runner | time | GB/s | vs numpy |", "|---|---|---:|---:|---:|"]
    baseline = {r.case: r.seconds for r in rows if r.runner in BASELINES}
    for r in rows:
        ratio = baseline[r.case] / r.seconds
        lines.append(
            f"| {r.case} | {r.runner} | {r.seconds * 1e3:.2f} ms | {r.gbps:.1f} | {ratio:.2f}x |"
        )
    return "\n".join(lines)


def update_benchmarks_md(section: str) -> None:
    """Replace this benchmark's section of BENCHMARKS.md (or append it)."""
    path = ROOT / "BENCHMARKS.md"
    start, end = "<!-- host_vs_numpy:start -->", "<!-- host_vs_numpy:end -->"
    block = f"{start}\n{section}\n{end}"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if start in text:
        text = re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)


def main() -> None:
    pool = HostPool()
    devices = {"zyx host": HostDevice(pool), "zyx host, 1 thread": HostDevice(pool, threads=1)}
    if next(iter(devices.values())).interpreted:
        sys.exit("no C compiler: the host device would interpret, nothing to measure")
    rng = np.random.default_rng(0)
    rows = bench_add(devices, rng)
    rows += bench_row_sum(devices, rng, 8192, 8192)
    rows += bench_row_sum(devices, rng, 1 << 20, 64)
    date = subprocess.run(["date", "-u"], capture_output=True, text=True).stdout.strip()
    load = os.getloadavg()[0]  # other processes on the machine skew a 2-core run
    section = (
        "## Host device vs numpy (`benchmarks/host_vs_numpy.py`)\n\n"
        f"{date}. {machine()}. Load average at the start: {load:.2f}.\n\n"
        f"Median of {REPEATS} interleaved runs after {WARMUP} warm-ups; GB/s counts the bytes\n"
        "each kernel must read and write; *vs numpy* is numpy's time (in-place\n"
        "`np.add(out=)`, `np.sum(out=)`) over this row's: above 1 is faster than numpy.\n"
        "On this shared 2-core VM, runs minutes apart differ by up to 2x (memory bandwidth\n"
        "and cores are shared with other work): compare rows of one run, not across runs.\n\n"
        + table(rows)
    )
    print(section)
    update_benchmarks_md(section)


if __name__ == "__main__":
    main()
