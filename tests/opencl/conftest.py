"""Fixtures of zyx-opencl's tests: every OpenCL device of this machine, opened directly.

Device tests run once per device (PoCL in CI; NVIDIA's OpenCL and PoCL where there is an
NVIDIA GPU, ``scripts/gpu-check.sh``). Where pyopencl or every platform is missing they
skip with the probe's reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest
from opencl_support import DEVICES, PROBE, open_all

from zyx.backend import Buffer

if TYPE_CHECKING:
    from zyx_opencl.device import OpenCLDevice


@pytest.fixture(scope="session")
def all_devices() -> list[OpenCLDevice]:
    if not DEVICES:
        pytest.skip(f"no OpenCL device: {PROBE.reason}")
    return open_all()


@pytest.fixture(params=range(max(DEVICES, 1)), ids=lambda i: f"opencl:{i}")
def device(request: pytest.FixtureRequest, all_devices: list[OpenCLDevice]) -> OpenCLDevice:
    """Each OpenCL device in turn, with the default 8 queues and a window of 100."""
    if request.param >= len(all_devices):
        pytest.skip(f"{len(all_devices)} of {DEVICES} OpenCL devices open (zyx.dev says why)")
    dev: OpenCLDevice = all_devices[request.param]
    return dev


@pytest.fixture
def nvidia(all_devices: list[OpenCLDevice]) -> OpenCLDevice:
    """The first device of NVIDIA's OpenCL platform."""
    for dev in all_devices:
        if "NVIDIA" in dev.cl_device.platform.name:
            return dev
    pytest.skip("no NVIDIA OpenCL platform (see scripts/gpu-prelude.sh)")


@pytest.fixture
def alloc(device: OpenCLDevice) -> Iterator[Callable[[int], Buffer]]:
    """Allocate on ``device``'s pool; after the test every reference left is released and
    the device synchronized."""
    bufs: list[Buffer] = []

    def allocate(nbytes: int) -> Buffer:
        buf = device.pool.allocate(nbytes)
        bufs.append(buf)
        return buf

    yield allocate
    for buf in bufs:
        while buf.refcount > 0:
            device.pool.release(buf)
    device.synchronize()
