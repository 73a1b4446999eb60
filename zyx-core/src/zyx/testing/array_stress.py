"""The array front end from several threads at once (DESIGN.md, "Threads"): what the
front end's thread tests run on each device (``tests/core``, ``tests/opencl``).

Each thread, for some rounds, builds an array program of its own on data of its own
(an elementwise chain, a row reduction through a reversed view, a realization of several
results at once, a round trip through a second device where one is given) and realizes
it; some rounds read arrays made before the threads started: a realized one, and lazy
ones over it that the first thread to reach them realizes while others build on them.
Every result is compared with numpy in float64. The threads switch often
(``sys.setswitchinterval``). Every program runs once before the threads start, so that
the time bound is about the threads, not the compiler (a reduction takes PoCL 7 to 12 s
to compile: one is enough here). A run says what went wrong: wrong results, exceptions,
threads still running at the deadline (a hang), and the bytes the device's pool lost once
every array is gone and ``zyx.empty_cache()`` ran.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import zyx
from zyx.backend import Device
from zyx.dtypes import DType
from zyx.tensor import Tensor
from zyx.testing.numerics import assert_close

Array = np.ndarray[Any, Any]


@dataclass
class Report:
    """What a run saw. ``ok`` where nothing went wrong."""

    threads: int
    checked: list[int] = field(default_factory=list)
    """Results compared with numpy, per thread."""
    wrong: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """Exceptions the threads raised, with their tracebacks."""
    hung: list[str] = field(default_factory=list)
    lost_bytes: int = 0
    """The pool's ``free_bytes`` before the run less after it (every array gone, the cache
    emptied); 0 where the pool's count is not exact."""
    seconds: float = 0.0
    """How long the threads ran (not the warm-up)."""

    @property
    def ok(self) -> bool:
        return not (self.wrong or self.errors or self.hung or self.lost_bytes)

    def __str__(self) -> str:
        parts = [
            f"{self.threads} threads, {sum(self.checked)} results checked in {self.seconds:.1f} s"
        ]
        parts += [f"wrong: {w}" for w in self.wrong[:5]]
        parts += [f"error: {e}" for e in self.errors[:3]]
        parts += [f"hung: {', '.join(self.hung)}"] if self.hung else []
        parts += [f"{self.lost_bytes} bytes lost by the pool"] if self.lost_bytes else []
        return "\n".join(parts)


class _Shared:
    """Arrays made before the threads start, and their values in float64."""

    def __init__(self, device: Device, values: Array) -> None:
        ref = values.astype(np.float64)
        self.base = zyx.asarray(values, device=device)
        self.lazy = zyx.exp(self.base[::2, ::-1]) * 0.5
        """Unrealized: the first thread to read it realizes it."""
        self.view = zyx.matrix_transpose(self.base)[1:, ::3]
        """An unrealized view: never a buffer of its own unless a thread realizes it."""
        self.refs = {
            "base": ref,
            "lazy": np.exp(ref[::2, ::-1]) * 0.5,
            "view": ref.T[1:, ::3],
        }


Results = list[tuple[Tensor, Array]]
"""What a program computed, each with its value computed by numpy in float64."""
Program = Callable[[np.random.Generator, Device, "Device | None", _Shared], Results]


def _data(rng: np.random.Generator, device: Device) -> tuple[Tensor, Array]:
    m, n = (int(v) for v in rng.integers(3, 40, 2))
    values = rng.standard_normal((m, n)).astype(np.float32)
    return zyx.asarray(values, device=device), values.astype(np.float64)


def _chain(rng: np.random.Generator, device: Device, other: Device | None, s: _Shared) -> Results:
    x, ref = _data(rng, device)
    c = float(rng.integers(1, 5))
    got = zyx.tanh(zyx.multiply(x, 0.5) + c) - zyx.abs(x)
    return [(got, np.tanh(ref * 0.5 + c) - np.abs(ref))]


def _rows(rng: np.random.Generator, device: Device, other: Device | None, s: _Shared) -> Results:
    x, ref = _data(rng, device)
    flipped = x[:, ::-1]
    return [(zyx.sum(zyx.multiply(flipped, flipped), axis=1), (ref * ref).sum(axis=1))]


def _together(
    rng: np.random.Generator, device: Device, other: Device | None, s: _Shared
) -> Results:
    """Two results of one plan, sharing a node (``zyx.realize`` of both)."""
    x, ref = _data(rng, device)
    y = zyx.abs(x) + 1.0
    a, b = y * 2.0, zyx.matrix_transpose(y)[::2]
    zyx.realize(a, b)
    yr = np.abs(ref) + 1.0
    return [(a, yr * 2.0), (b, yr.T[::2])]


def _shared(rng: np.random.Generator, device: Device, other: Device | None, s: _Shared) -> Results:
    r = s.refs
    rows, cols = s.lazy.shape
    return [
        (s.lazy + 1.0, r["lazy"] + 1.0),
        (s.view * s.view - 1.0, r["view"] * r["view"] - 1.0),
        (zyx.reshape(s.view, (-1,)) * 2.0, r["view"].reshape(-1) * 2.0),
        (s.lazy[1:] - s.base[: rows - 1, :cols], r["lazy"][1:] - r["base"][: rows - 1, :cols]),
    ]


def _realize_shared(
    rng: np.random.Generator, device: Device, other: Device | None, s: _Shared
) -> Results:
    """The shared lazy arrays themselves, which other threads build on meanwhile."""
    return [(s.lazy, s.refs["lazy"]), (s.view, s.refs["view"])]


def _two_devices(
    rng: np.random.Generator, device: Device, other: Device | None, s: _Shared
) -> Results:
    assert other is not None
    x, ref = _data(rng, device)
    there = zyx.exp(zyx.multiply(x, 0.25)).to_device(other)
    back = zyx.multiply((there + 1.0).to_device(device), x)
    return [(back, (np.exp(ref * 0.25) + 1.0) * ref)]


PROGRAMS: tuple[Program, ...] = (_chain, _rows, _together, _shared, _realize_shared)


def _warm_up(
    programs: tuple[Program, ...], device: Device, other: Device | None, values: Array, seed: int
) -> None:
    """Each program once, so that its kernels are compiled before the clock starts."""
    rng = np.random.default_rng(seed)
    for program in programs:
        for got, _ in program(rng, device, other, _Shared(device, values)):
            got.numpy()


def run(
    device: Device,
    other: Device | None = None,
    *,
    threads: int = 6,
    rounds: int = 20,
    seed: int = 0,
    timeout: float = 20.0,
    switch_interval: float = 1e-6,
) -> Report:
    """Run ``threads`` threads of ``rounds`` rounds each on ``device`` (and copies to and
    from ``other`` where given); give up on the threads ``timeout`` seconds after they
    started."""
    programs = PROGRAMS + ((_two_devices,) if other is not None else ())
    pools = [device.pool] + ([other.pool] if other is not None else [])
    report = Report(threads)

    def free() -> list[int]:
        gc.collect()
        zyx.empty_cache()
        for d in (device, other):
            if d is not None:
                d.synchronize()
        return [p.free_bytes() if p.exact_free_bytes else 0 for p in pools]

    before = free()
    values = np.random.default_rng(seed).standard_normal((24, 17)).astype(np.float32)
    _warm_up(programs, device, other, values, seed)
    shared = _Shared(device, values)

    def worker(index: int) -> None:
        rng = np.random.default_rng([seed, index])
        checked = 0
        try:
            for r in range(rounds):
                program = programs[int(rng.integers(len(programs)))]
                for i, (got, want) in enumerate(program(rng, device, other, shared)):
                    out = got.numpy()
                    try:
                        assert_close(out, want, DType.F32, f"{program.__name__}[{i}]")
                    except AssertionError as error:
                        report.wrong.append(f"thread {index}, round {r}: {error}")
                    checked += 1
        except BaseException:
            report.errors.append(f"thread {index}: {traceback.format_exc()}")
        report.checked.append(checked)

    old = sys.getswitchinterval()
    sys.setswitchinterval(switch_interval)
    start = time.perf_counter()
    try:
        workers = [
            threading.Thread(target=worker, args=(i,), name=f"stress-{i}", daemon=True)
            for i in range(threads)
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join(max(0.0, start + timeout - time.perf_counter()))
    finally:
        sys.setswitchinterval(old)
    report.seconds = time.perf_counter() - start
    report.hung = [w.name for w in workers if w.is_alive()]
    if not report.hung:  # a hung thread still holds arrays
        del shared, workers
        report.lost_bytes = sum(b - a for b, a in zip(before, free()))
    return report
