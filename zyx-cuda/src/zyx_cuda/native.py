"""zyx-cuda's native module (``native.c``, built by ``zyx.native``), or ``None``.

``launch`` calls the driver's ``cuLaunchKernel`` with plain ints, below cuda-python's
binding, which builds conversion objects for its eleven arguments (0.6 µs less per
``Device.launch`` on the H200 machine). Without a C compiler or Python's headers (or with
``ZYX_NATIVE=0``) zyx-cuda calls cuda-python instead: the same results, a little slower.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib import resources
from types import ModuleType
from typing import cast

from cuda.bindings import driver

from zyx import native as zyx_native
from zyx.errors import ErrorStatus
from zyx_cuda.errors import check

_CUDA_VERSION = 12000
"""The ``cuLaunchKernel`` ABI asked of ``cuGetProcAddress``: unchanged since CUDA 4."""


@cache
def native() -> ModuleType | None:
    """The loaded module, or ``None``. Its ``launch`` needs ``launcher``'s binding."""
    source = resources.files("zyx_cuda").joinpath("native.c").read_text()
    return zyx_native.load("_zyx_cuda_native", source)


@cache
def launcher() -> Callable[..., int] | None:
    """The module's ``launch``, bound to the driver's ``cuLaunchKernel``, or ``None``."""
    module = native()
    if module is None:
        return None
    found = driver.cuGetProcAddress(b"cuLaunchKernel", _CUDA_VERSION, 0)
    module.bind(int(check(ErrorStatus.INITIALIZATION, "cuGetProcAddress", found[:2])))
    return cast("Callable[..., int]", module.launch)
