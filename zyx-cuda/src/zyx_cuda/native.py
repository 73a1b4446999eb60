"""zyx-cuda's native module (``native.c``, built by ``zyx.native``), or ``None``.

``launch`` calls the driver's ``cuLaunchKernel`` with plain ints, below cuda-python's
binding, which builds conversion objects for its eleven arguments
(benchmarks/cuda_bench.py's empty-launch rows time both). ``Launcher`` runs a program's
whole launch in C when it repeats an earlier one (``zyx_cuda.program``), ``Replayer`` a
replaying library call's replay of its graph (``zyx_cuda.library``). ``upload`` and
``download`` run a staging lane's share of a large copy without the GIL, ``read`` a small
copy whole (``zyx_cuda.staging``), ``Reader`` a pool's small read with its stream's
bookkeeping (``zyx_cuda.pool``). Without a C compiler or Python's headers (or with
``ZYX_NATIVE=0``) zyx-cuda calls cuda-python and runs the lanes in Python instead: the
same results, slower.
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
"""The ABI asked of ``cuGetProcAddress``: these calls' signatures are those of CUDA 12 and
13 (``cuMemcpy*`` resolve to their ``_v2`` entry points)."""


@cache
def native() -> ModuleType | None:
    """The loaded module, or ``None``. Its launch calls need ``_launch_module``'s binding."""
    source = resources.files("zyx_cuda").joinpath("native.c").read_text()
    return zyx_native.load("_zyx_cuda_native", source, prelude=("tracker",))


@cache
def _launch_module() -> ModuleType | None:
    """The module with ``launch``, ``Launcher`` and ``Replayer`` bound to the driver's
    ``cuLaunchKernel``, ``cuCtxGetCurrent`` and ``cuGraphLaunch``, or ``None``."""
    module = native()
    if module is not None:
        module.bind(*(_entry(name) for name in _LAUNCH_CALLS))
    return module


_LAUNCH_CALLS = (b"cuLaunchKernel", b"cuCtxGetCurrent", b"cuGraphLaunch")


def launch_function() -> Callable[..., int] | None:
    """The module's ``launch`` (``cuLaunchKernel`` with plain ints), or ``None``."""
    module = _launch_module()
    return None if module is None else cast("Callable[..., int]", module.launch)


def current_function() -> Callable[[], int] | None:
    """The module's ``current`` (``cuCtxGetCurrent``: the calling thread's current context,
    as an int), or ``None``."""
    module = _launch_module()
    return None if module is None else cast("Callable[[], int]", module.current)


def reader_type() -> type | None:
    """The module's ``Reader`` type (a pool's small read, in C where nothing is unusual), or
    ``None``; bound for launches (its context check) and copies."""
    module = _launch_module()
    return None if module is None or copier() is None else cast(type, module.Reader)


def launcher_type() -> type | None:
    """The module's ``Launcher`` type (a program's launch, in C where it repeats an earlier
    one), or ``None``."""
    module = _launch_module()
    return None if module is None else cast(type, module.Launcher)


def replayer_type() -> type | None:
    """The module's ``Replayer`` type (a replaying library call's launch, in C where it
    replays the graph of the last one), or ``None``."""
    module = _launch_module()
    return None if module is None else cast(type, module.Replayer)


@cache
def copier() -> ModuleType | None:
    """The module with its copies (``upload``, ``download``, ``read``) bound to the
    driver's copy, event and stream calls, or ``None``."""
    module = native()
    if module is None:
        return None
    module.bind_copies(*(_entry(name) for name in _COPY_CALLS))
    return module


_COPY_CALLS = (
    b"cuMemcpyHtoDAsync",
    b"cuMemcpyDtoHAsync",
    b"cuEventRecord",
    b"cuEventSynchronize",
    b"cuStreamSynchronize",
)


def _entry(name: bytes) -> int:
    """The driver's entry point ``name`` (its current version, as cuda-python calls it)."""
    found = driver.cuGetProcAddress(name, _CUDA_VERSION, 0)
    return int(check(ErrorStatus.INITIALIZATION, "cuGetProcAddress", found[:2]))
