"""Fixtures of the conformance suite. The device under test comes from ``zyx_device``
(:mod:`zyx.testing.plugin`); everything here is private to the suite."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pytest

from zyx.backend import Buffer, Device, MemoryPool
from zyx.dtypes import DType, DTypeCapability
from zyx.host.pool import HostPool
from zyx.testing.harness import Outcome, run_elementwise
from zyx.testing.kernels import LOCAL, Elementwise

Require = Callable[[DType, DTypeCapability], None]

ELEMENTS = 777
"""Elements of an elementwise batch: not a power of two, several groups, the last partial."""


@pytest.fixture
def device(zyx_device: Device) -> Device:
    return zyx_device


@pytest.fixture
def pool(zyx_device: Device) -> MemoryPool:
    return zyx_device.pool


@pytest.fixture
def host_pool() -> HostPool:
    """A host pool of its own: a pool other than the device's, also on the host backend."""
    return HostPool()


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """Random numbers seeded by the test's id: reproducible, whatever runs before."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture(scope="session")
def local(zyx_device: Device) -> int:
    """Work-items per group for 1-D kernels: ``LOCAL``, or less where the device allows less."""
    limit = min(zyx_device.info.max_local_threads, zyx_device.info.max_local_work_dims[0])
    return min(LOCAL, 1 << (limit.bit_length() - 1))


@pytest.fixture
def require(zyx_device: Device) -> Require:
    """``require(dtype, capability)`` skips the test unless the device claims it."""

    def check(dtype: DType, capability: DTypeCapability) -> None:
        if not zyx_device.info.supports(dtype, capability):
            pytest.skip(f"{zyx_device.name} does not claim {capability.name} for {dtype}")

    return check


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


@pytest.fixture
def alloc(pool: MemoryPool) -> Iterator[Allocations]:
    """Allocates from the device's pool; what the test did not release is released after."""
    allocations = Allocations(pool)
    yield allocations
    allocations.release_all()


class Batches:
    """Elementwise batches of a module: each runs once, on first use, and hands out the
    outcome of one part per test. A batch that failed fails each of its tests alike."""

    def __init__(self, device: Device, local: int) -> None:
        self.device = device
        self.local = local
        self.done: dict[str, dict[str, Outcome] | Exception] = {}

    def outcome(self, batch: str, parts: Sequence[Elementwise], part: Elementwise) -> Outcome:
        """``part``'s outcome in ``batch``; skips when the device does not claim its needs."""
        info = self.device.info
        missing = [f"{c.name} for {d}" for d, c in part.needs if not info.supports(d, c)]
        if missing:
            pytest.skip(f"{self.device.name} does not claim {', '.join(missing)}")
        if batch not in self.done:
            rng = np.random.default_rng(zlib.crc32(batch.encode()))
            supported = [p for p in parts if p.supported(self.device.info)]
            try:
                self.done[batch] = run_elementwise(
                    self.device, batch, supported, ELEMENTS, rng, self.local
                )
            except Exception as error:
                self.done[batch] = error
        done = self.done[batch]
        if isinstance(done, Exception):
            raise done
        return done[part.name]


@pytest.fixture(scope="module")
def batches(zyx_device: Device, local: int) -> Batches:
    return Batches(zyx_device, local)
