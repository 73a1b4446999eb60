"""Helpers of zyx-opencl's tests: what this machine has, opening devices, a kernel, reads.

(Not in conftest.py: test modules import these by a name no other test folder uses.)
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from zyx.backend import Buffer
from zyx.dtypes import DType
from zyx.errors import BackendError
from zyx.ir import Kernel, KernelBuilder, ParamKind, ceil_div
from zyx_opencl.config import OpenCLSection
from zyx_opencl.plugin import probe

if TYPE_CHECKING:
    from zyx_opencl.device import OpenCLDevice

PROBE = probe()
DEVICES = PROBE.devices if PROBE.available else 0


def open_all(**fields: Any) -> list[OpenCLDevice]:
    """Every OpenCL device, opened with the section ``fields`` (new contexts each call);
    the test skips where no driver here builds a kernel (``device.SMOKE``)."""
    from zyx_opencl.device import UNBUILDABLE, open_devices

    try:
        return open_devices(OpenCLSection.model_validate(fields))
    except BackendError as error:
        if UNBUILDABLE not in error.context:
            raise
        pytest.skip(f"no OpenCL device opens: {error}")


@cache
def _opened() -> int:
    return len(open_all())


def skip_unless_one_opens() -> None:
    """Skip where no OpenCL driver here builds a kernel (``zyx_opencl.device.SMOKE``), for
    tests that build through pyopencl or open devices in a child process."""
    _opened()


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
