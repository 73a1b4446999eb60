"""Fixtures of zyx-opencl's tests: every OpenCL device of this machine, opened directly.

Device tests run once per device (PoCL in CI; NVIDIA's OpenCL and PoCL on the GPU
machine). Where pyopencl or every platform is missing they skip with the probe's reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from zyx.backend import Buffer
from zyx.dtypes import DType
from zyx.ir import Kernel, KernelBuilder, ParamKind, ceil_div
from zyx_opencl.config import OpenCLSection
from zyx_opencl.plugin import probe

if TYPE_CHECKING:
    from zyx_opencl.device import OpenCLDevice

PROBE = probe()
DEVICES = PROBE.devices if PROBE.available else 0


def open_all(**fields: Any) -> list[OpenCLDevice]:
    """Every OpenCL device, opened with the section ``fields`` (new contexts each call)."""
    from zyx_opencl.device import open_devices

    return open_devices(OpenCLSection.model_validate(fields))


@pytest.fixture(scope="session")
def all_devices() -> list[OpenCLDevice]:
    if not DEVICES:
        pytest.skip(f"no OpenCL device: {PROBE.reason}")
    return open_all()


@pytest.fixture(params=range(max(DEVICES, 1)), ids=lambda i: f"opencl:{i}")
def device(request: pytest.FixtureRequest, all_devices: list[OpenCLDevice]) -> OpenCLDevice:
    """Each OpenCL device in turn, with the default 8 queues and a window of 100."""
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


def add_kernel(dtype: DType = DType.F32, local: int = 64) -> Kernel:
    """``c[i] = a[i] + b[i]`` for ``i < n``."""
    kb = KernelBuilder("add")
    a, b = kb.param(dtype), kb.param(dtype)
    c = kb.param(dtype, ParamKind.GLOBAL_MUT)
    n = kb.variable(DType.I64)
    i = kb.group(0, ceil_div(n, local)) * local + kb.local(0, local)
    with kb.if_(i < n):
        c[i] = a[i] + b[i]
    return kb.build()


def read(device: OpenCLDevice, buf: Buffer, dtype: DType = DType.F32) -> np.ndarray[Any, Any]:
    """The whole of ``buf`` as an array of ``dtype``."""
    out = np.empty(buf.nbytes // dtype.itemsize, dtype.numpy)
    device.pool.read(buf, out)
    return out
