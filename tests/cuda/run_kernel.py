"""A kernel run on a device over numpy arrays, for tests that compare it with the IR
interpreter or numpy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from zyx.backend import Device
from zyx.ir import Kernel


def run_kernel(device: Device, kernel: Kernel, arrays: Sequence[np.ndarray[Any, Any]],
               out: int) -> np.ndarray[Any, Any]:  # fmt: skip
    """``arrays[out]`` as ``kernel`` leaves it, launched once with a buffer per array (each
    written with the array first); the buffers are released, whatever happens."""
    buffers = []
    try:
        for array in arrays:
            buffers.append(device.pool.allocate(array.nbytes))
            device.pool.write(buffers[-1], array)
        device.launch(device.compile(kernel), buffers)
        got = np.empty_like(arrays[out])
        device.pool.read(buffers[out], got)
        return got
    finally:
        for buf in buffers:
            device.pool.release(buf)
