"""Fixtures of the conformance suite. The device under test comes from ``zyx_device``
(:mod:`zyx.testing.plugin`); everything here is private to the suite."""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import numpy as np
import pytest

from zyx.backend import Device, MemoryPool
from zyx.dtypes import DType, DTypeCapability
from zyx.host.pool import HostPool
from zyx.testing._suite import Allocations, Batches, Require
from zyx.testing.kernels import LOCAL


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
    """Random numbers seeded by the test's module and name: reproducible wherever the suite
    is installed, whatever ran before."""
    seed = f"{request.node.module.__name__}::{request.node.name}"
    return np.random.default_rng(zlib.crc32(seed.encode()))


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


@pytest.fixture
def alloc(pool: MemoryPool) -> Iterator[Allocations]:
    """Allocates from the device's pool; what the test did not release is released after."""
    allocations = Allocations(pool)
    yield allocations
    allocations.release_all()


@pytest.fixture(scope="module")
def batches(zyx_device: Device, local: int) -> Batches:
    return Batches(zyx_device, local)
