"""Fixtures of the CUDA tests. GPU tests skip, with the driver's reason, where none works."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pytest

from zyx.errors import BackendError

if TYPE_CHECKING:
    from zyx_cuda.device import CudaDevice


def driver_problem() -> str | None:
    """Why no GPU can be used here, or ``None`` when one can."""
    try:
        from zyx_cuda.driver import initialize

        return None if initialize() > 0 else "the NVIDIA driver sees no GPU"
    except BackendError as error:
        return str(error)


@pytest.fixture(scope="session")
def gpu() -> None:
    """Skips the test unless a CUDA GPU works here."""
    problem = driver_problem()
    if problem:
        pytest.skip(f"no usable CUDA GPU: {problem}")


@pytest.fixture(scope="session")
def no_gpu() -> None:
    """Skips the test where a CUDA GPU works (it tests life without one)."""
    if driver_problem() is None:
        pytest.skip("a working NVIDIA driver is present")


@pytest.fixture(scope="session")
def device(gpu: None) -> Iterator[CudaDevice]:
    """``cuda:0`` with the default 8 streams."""
    from zyx_cuda.device import CudaDevice

    dev = CudaDevice(0, queues=8)
    yield dev
    dev.synchronize()


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """Random numbers seeded by the test's id."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
