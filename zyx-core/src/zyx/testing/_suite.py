"""The objects the suite's fixtures hand out, which the test modules also annotate with.

Imports pytest: unlike :mod:`~zyx.testing.kernels`, :mod:`~zyx.testing.numerics` and
:mod:`~zyx.testing.harness`, this module is only for the suite itself.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

import numpy as np
import pytest

from zyx.backend import Buffer, Device, MemoryPool
from zyx.dtypes import DType, DTypeCapability
from zyx.testing.harness import Outcome, run_elementwise
from zyx.testing.kernels import Elementwise

Require = Callable[[DType, DTypeCapability], None]
"""``require(dtype, capability)`` skips the test unless the device claims it."""

ELEMENTS = 777
"""Elements of an elementwise batch: not a power of two, several groups, the last partial."""


class Allocations:
    """Allocates from one pool; ``release_all`` drops every reference still held."""

    def __init__(self, pool: MemoryPool) -> None:
        self.pool = pool
        self.buffers: list[Buffer] = []

    def __call__(self, nbytes: int) -> Buffer:
        buf = self.pool.allocate(nbytes)
        self.buffers.append(buf)
        return buf

    def release_all(self) -> None:
        for buf in self.buffers:
            while buf.refcount > 0:
                self.pool.release(buf)


CRASHES = "ZYX_CONFORMANCE_CRASHES"
"""A folder where a batch leaves a mark while it runs (``zyx conformance`` sets it): a mark
left behind is a batch that crashed the test process, whose other tests then fail at once
in the next process instead of crashing it again."""


class Batches:
    """Elementwise batches of a module: each runs once, on first use, and hands out the
    outcome of one part per test. A batch that failed fails each of its tests alike, and so
    does one that crashed an earlier test process (``CRASHES``)."""

    def __init__(self, device: Device, local: int) -> None:
        self.device = device
        self.local = local
        self.done: dict[str, dict[str, Outcome]] = {}
        self.failed: dict[str, tuple[Exception, TracebackType | None]] = {}

    def outcome(self, batch: str, parts: Sequence[Elementwise], part: Elementwise) -> Outcome:
        """``part``'s outcome in ``batch``; skips when the device does not claim its needs."""
        info = self.device.info
        missing = [f"{c.name} for {d}" for d, c in part.needs if not info.supports(d, c)]
        if missing:
            pytest.skip(f"{self.device.name} does not claim {', '.join(missing)}")
        if batch not in self.done and batch not in self.failed:
            mark = Path(os.environ[CRASHES], f"batch {batch}") if CRASHES in os.environ else None
            if mark is not None and mark.exists():
                pytest.fail(f"batch {batch} crashed the test process in an earlier test")
            rng = np.random.default_rng(zlib.crc32(batch.encode()))
            supported = [p for p in parts if p.supported(info)]
            if mark is not None:
                mark.touch()
            try:
                self.done[batch] = run_elementwise(
                    self.device, batch, supported, ELEMENTS, rng, self.local
                )
            except Exception as error:
                self.failed[batch] = (error, error.__traceback__)
            if mark is not None:
                mark.unlink()
        if batch in self.failed:
            failure, traceback = self.failed[batch]
            raise failure.with_traceback(traceback)
        return self.done[batch][part.name]
