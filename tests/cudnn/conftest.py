"""Fixtures of the cuDNN tests. GPU tests skip, with the reason, where no GPU or no cuDNN
works; the matcher's and the quarantine's tests need neither."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest

from zyx.errors import BackendError


def gpu_problem() -> str | None:
    """Why no CUDA GPU with cuDNN can be used here, or ``None`` when one can."""
    from zyx_cudnn.library import status

    try:
        from zyx_cuda.driver import initialize

        if initialize() == 0:
            return "the NVIDIA driver sees no GPU"
    except BackendError as error:
        return f"no usable CUDA GPU: {error}"
    found = status()
    return None if found.available else f"no usable cuDNN: {found.reason}"


@pytest.fixture(scope="session")
def cuda() -> Any:
    """zyx's ``cuda:0``, where a GPU and cuDNN work; else the test skips with the reason."""
    problem = gpu_problem()
    if problem:
        pytest.skip(problem)
    import zyx

    return zyx.device("cuda")


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """Random numbers seeded by the test's id."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
