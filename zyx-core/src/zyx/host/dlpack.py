"""The host device's DLPack exchange (``Device.dlpack_*``), through numpy.

numpy reads and writes every DLPack capsule version, so zyx builds none itself: it only
keeps the references right. An export is numpy's capsule over a view of the buffer's
bytes, whose base holds one reference to the buffer until the consumer lets go of the
capsule's memory. An import is numpy's array over the producer's memory, held by the
buffer that ``HostPool.adopt`` makes over its bytes, until that buffer is freed.
"""

from __future__ import annotations

import sys
from math import prod
from typing import Any

import numpy as np

from zyx.backend import Buffer
from zyx.dtypes import DType
from zyx.host.pool import HostPool

CPU = (1, 0)
"""DLPack's ``(kDLCPU, 0)``: host memory."""


class _Reference:
    """One reference to a host buffer, for as long as numpy arrays over its bytes live:
    they keep this object as their base (it lends them the bytes' array interface)."""

    def __init__(self, pool: HostPool, buf: Buffer) -> None:
        pool.retain(buf)
        self.pool, self.buf = pool, buf
        self.__array_interface__ = buf.handle.__array_interface__

    def __del__(self) -> None:
        if not sys.is_finalizing():
            self.pool.release(self.buf)


def export(
    pool: HostPool,
    buf: Buffer,
    dtype: DType,
    shape: tuple[int, ...],
    stream: Any,
    max_version: tuple[int, int] | None,
) -> Any:
    """numpy's capsule over ``buf`` as a ``dtype`` array of ``shape``, read-only where the
    capsule can say so (DLPack 1.0 and later): zyx never changes a realized buffer, and a
    consumer writing to it would change a zyx array's value behind zyx's back."""
    if stream is not None:
        raise ValueError(f"host: DLPack's stream is None on the CPU (it has none), got {stream!r}")
    view = np.asarray(_Reference(pool, buf)).view(dtype.numpy)[: prod(shape)].reshape(shape)
    if max_version is not None and tuple(max_version) >= (1, 0):
        view.flags.writeable = False
    try:
        return view.__dlpack__(stream=stream, max_version=max_version)
    except BufferError as error:
        raise BufferError(f"host: numpy cannot export a {dtype} array by DLPack: {error}") from None


def adopt(pool: HostPool, producer: Any) -> tuple[Buffer, DType, tuple[int, ...]]:
    """A buffer over the memory of a DLPack producer in host memory, no copy; ``BufferError``
    where zyx cannot use it in place: not C-contiguous, misaligned for its dtype, empty,
    or of a dtype zyx lacks."""
    try:
        array = np.from_dlpack(producer)
    except (BufferError, RuntimeError, TypeError) as error:
        raise BufferError(f"host: numpy cannot import {type(producer).__name__}: {error}") from None
    try:
        dtype = DType.from_numpy(array.dtype)
    except TypeError:
        raise BufferError(f"host: zyx has no dtype for DLPack data of {array.dtype}") from None
    if not (array.flags.c_contiguous and array.flags.aligned and array.size):
        raise BufferError(
            f"host: the {array.dtype}{list(array.shape)} producer's memory is not a non-empty, "
            f"C-contiguous, aligned block (strides in bytes: {array.strides}); it needs a copy"
        )
    return pool.adopt(array.reshape(-1).view(np.uint8)), dtype, tuple(array.shape)
