"""zyx-opencl's native enqueue (``native.c``, built by ``zyx.native``), or ``None``.

``enqueue`` (``enqueue_function()``) calls ``clEnqueueNDRangeKernel`` with plain ints and
no event out; pyopencl's binding always creates one, at a cost in host time per launch
(benchmarks/opencl_c_loop.py times a launch with and without one). ``Enqueuer``
(``enqueuer_type()``) runs a kernel's submit and enqueue in C where a launch is a plain one
(``zyx_opencl.program``), and ``enqueue_window`` (``window_loop()``) the scheduler's loop
over its window (``zyx_opencl.scheduler``). The entry points are taken from the ICD loader
pyopencl itself loaded (its wheel bundles one), else the system's; the loader dispatches
through the queue's own driver.
Without a C compiler or Python's headers (or with ``ZYX_NATIVE=0``) each of the three is
``None``, and zyx-opencl enqueues through pyopencl and drops the event: the same results,
slower.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from collections.abc import Callable
from functools import cache
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import cast

import pyopencl as cl

from zyx import native as zyx_native

_log = logging.getLogger("zyx.compile")


@cache
def enqueue_function() -> Callable[..., int] | None:
    """The module's ``enqueue`` function (one ``clEnqueueNDRangeKernel``), or ``None``."""
    module = native()
    return None if module is None else cast("Callable[..., int]", module.enqueue)


@cache
def enqueuer_type() -> type | None:
    """The module's ``Enqueuer`` class (a program's submit and enqueue, in C where a launch
    repeats the shape of an earlier one), or ``None``."""
    module = native()
    return None if module is None else cast(type, module.Enqueuer)


@cache
def window_loop() -> Callable[..., None] | None:
    """The module's ``enqueue_window`` (a scheduler's loop over its window), or ``None``."""
    module = native()
    return None if module is None else cast("Callable[..., None]", module.enqueue_window)


@cache
def native() -> ModuleType | None:
    """The module, its calls bound to the loader's ``clEnqueueNDRangeKernel`` and
    ``clSetKernelArg``; or ``None``."""
    source = resources.files("zyx_opencl").joinpath("native.c").read_text()
    module = zyx_native.load("_zyx_opencl_native", source, prelude=("tracker",))
    if module is None or _loader() is None:
        return None
    module.bind(entry_point("clEnqueueNDRangeKernel"), entry_point("clSetKernelArg"))
    return module


def entry_point(name: str) -> int | None:
    """The address of the ICD loader's entry point ``name``, or ``None`` without one."""
    loader = _loader()
    return None if loader is None else ctypes.cast(getattr(loader, name), ctypes.c_void_p).value


@cache
def _loader() -> ctypes.CDLL | None:
    """The OpenCL ICD loader pyopencl uses, else the system's."""
    bundled = sorted((Path(cl.__file__).parent / ".libs").glob("libOpenCL*"))
    path = str(bundled[0]) if bundled else ctypes.util.find_library("OpenCL")
    try:
        if path is None:
            raise OSError("no libOpenCL beside pyopencl or on the library path")
        return ctypes.CDLL(path)
    except OSError as error:
        _log.info("opencl: no ICD loader to call (%s); enqueuing through pyopencl", error)
        return None
