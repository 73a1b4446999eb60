"""Helpers of zyx-opencl's tests: what this machine has, opening devices, a kernel, reads.

(Not in conftest.py: test modules import these by a name no other test folder uses.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

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
