"""Several threads on one device at once: what the suite's threaded test and the backends'
stress tests run (``zyx.backend``: every public method may be called from any thread).

Each thread, for some rounds: allocates buffers, writes random integers, launches a program
all threads share and one it compiled itself (a chain through a buffer it releases while
the second launch may still use it), sometimes copies through another pool, or the result
within the pool, times a launch or synchronizes, reads back, compares exactly with numpy,
and releases everything. Copies between two pools, in both directions at once from
different threads, hold both pools' locks: they must not deadlock.
The threads switch often (``sys.setswitchinterval``). A run ends with the device
synchronized and says what went wrong: wrong results, exceptions, threads still running
past the timeout (a hang), and bytes the pool lost.
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zyx.backend import Buffer, Device, MemoryPool, Program
from zyx.dtypes import DType
from zyx.testing.kernels import LOCAL, axpb

INT = np.int32
"""Integers, so that every result is exact on every device."""
Array = np.ndarray[Any, Any]


@dataclass
class Report:
    """What a run saw. ``ok`` where nothing went wrong."""

    threads: int
    launched: list[int] = field(default_factory=list)
    """Launches per round, as each thread ran them."""
    wrong: list[str] = field(default_factory=list)
    """Results that differ from numpy's: thread, round, first differing element."""
    errors: list[str] = field(default_factory=list)
    """Exceptions the threads raised, with their tracebacks."""
    hung: list[str] = field(default_factory=list)
    """Threads still running when the run gave up on them."""
    lost_bytes: int = 0
    """``free_bytes`` before the run less after it (0 where the pool's count is not exact)."""

    @property
    def launches(self) -> int:
        return sum(self.launched)

    @property
    def ok(self) -> bool:
        return not (self.wrong or self.errors or self.hung or self.lost_bytes)

    def __str__(self) -> str:
        parts = [f"{self.threads} threads, {self.launches} launches"]
        parts += [f"wrong: {w}" for w in self.wrong[:5]]
        parts += [f"error: {e}" for e in self.errors[:3]]
        parts += [f"hung: {', '.join(self.hung)}"] if self.hung else []
        parts += [f"{self.lost_bytes} bytes lost by the pool"] if self.lost_bytes else []
        return "\n".join(parts)


def run(
    device: Device,
    other: MemoryPool | None = None,
    *,
    threads: int = 4,
    rounds: int = 20,
    seed: int = 0,
    timeout: float = 120.0,
    switch_interval: float = 1e-5,
    compare: bool = True,
) -> Report:
    """Run ``threads`` threads of ``rounds`` rounds each on ``device``, copying to and from
    the pool ``other`` too where given; see the module. ``compare=False`` skips the
    comparison of results, for a device that only pretends to compute (a stand-in driver)
    whose locking and bookkeeping are under test."""
    local = min(LOCAL, device.info.max_local_threads, device.info.max_local_work_dims[0])
    shared = device.compile(axpb(DType.I32, local))
    report = Report(threads)
    before = device.pool.free_bytes()
    workers = [
        threading.Thread(
            target=_guarded,
            args=(
                report,
                f"thread {t}",
                device,
                other,
                shared,
                local,
                rounds,
                seed * 1000 + t,
                compare,
            ),
            name=f"zyx-stress-{t}",
            daemon=True,  # a hung one must not keep the process alive
        )
        for t in range(threads)
    ]
    with _switching(switch_interval):
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout)
    report.hung = [worker.name for worker in workers if worker.is_alive()]
    if not report.hung:
        device.release(shared)
        device.synchronize()
        if other is not None:
            other.synchronize()
        if device.pool.exact_free_bytes:
            report.lost_bytes = before - device.pool.free_bytes()
    return report


@contextmanager
def _switching(interval: float) -> Iterator[None]:
    """Threads switch every ``interval`` seconds meanwhile: races show sooner."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(interval)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def _guarded(report: Report, name: str, *args: object) -> None:
    try:
        _work(report, name, *args)  # type: ignore[arg-type]
    except BaseException:  # noqa: BLE001 (reported, as the thread's outcome)
        report.errors.append(f"{name}: {traceback.format_exc()}")


def _work(
    report: Report,
    name: str,
    device: Device,
    other: MemoryPool | None,
    shared: Program,
    local: int,
    rounds: int,
    seed: int,
    compare: bool,
) -> None:
    """One thread's rounds: ``z = (x * a1 + b1) * a2 + b2`` through the shared program and
    the thread's own, for ``n`` random integers."""
    pool, rng = device.pool, np.random.default_rng(seed)
    own = device.compile(axpb(DType.I32, max(1, local // 2)))
    for round_ in range(rounds):
        n = int(rng.integers(1, 4 * local))
        x = rng.integers(-1000, 1000, n, dtype=INT)
        a1, b1, a2, b2 = (int(v) for v in rng.integers(-9, 10, 4))
        bx, by, bz = (pool.allocate(4 * n) for _ in range(3))
        _write(pool, other if round_ % 4 == 1 else None, bx, x)
        device.launch(shared, [bx, by, a1, b1, n])
        pool.release(bx)  # freed once the launch that reads it is done
        if round_ % 6 == 5:  # drains every thread's work, then runs alone
            device.launch_timed(own, [by, bz, a2, b2, n])
        else:
            device.launch(own, [by, bz, a2, b2, n])
        pool.release(by)
        report.launched.append(2)
        got = _read(device, other if round_ % 4 == 2 else None, bz, n, round_)
        want = (x * a1 + b1) * a2 + b2
        if compare and not np.array_equal(got, want):
            at = int(np.argmax(got != want))
            report.wrong.append(f"{name}, round {round_}: [{at}] = {got[at]}, not {want[at]}")
    device.release(own)


def _write(pool: MemoryPool, through: MemoryPool | None, buf: Buffer, x: Array) -> None:
    """``x`` into ``buf``, through a buffer of the pool ``through`` where given."""
    if through is None:
        pool.write(buf, x)
        return
    staging = through.allocate(buf.nbytes)
    through.write(staging, x)
    pool.copy_from(through, staging, buf)
    through.release(staging)


def _read(device: Device, through: MemoryPool | None, buf: Buffer, n: int, round_: int) -> Array:
    """``buf``'s ``n`` integers, read back, through a buffer of the pool ``through`` where
    given; on some rounds through a copy within the pool, or after a synchronize. Releases
    ``buf``."""
    pool, out = device.pool, np.empty(n, INT)
    if through is not None:
        staging = through.allocate(buf.nbytes)
        through.copy_from(pool, buf, staging)
        pool.release(buf)
        through.read(staging, out)
        through.release(staging)
        return out
    if round_ % 5 == 4:
        copy = pool.allocate(4 * n)
        pool.copy_from(pool, buf, copy)
        pool.release(buf)
        buf = copy
    if round_ % 7 == 3:
        device.synchronize()
    pool.read(buf, out)
    pool.release(buf)
    return out
