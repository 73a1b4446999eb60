"""The host memory pool: buffers are numpy byte arrays.

Buffers are 64-byte aligned, so kernels compiled for the host may use aligned vector
loads, and zero-filled (``calloc``: pages are committed only when first touched).

The pool keeps an exact count of the bytes it handed out against a capacity, physical RAM
by default: an allocation over it raises ``MemoryAllocation`` instead of letting the
operating system kill the process, and leaves the pool usable. Memory returns to the
allocator when the last reference to its array goes; a host device that runs work
asynchronously holds the array (``HostPool.array``) until that work is done, so a
``release`` during it cannot free memory that is still in use.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

from zyx.backend import Buffer, MemoryPool
from zyx.errors import BackendError, ErrorStatus

ALIGNMENT = 64
"""Byte alignment of every buffer: a cache line, and AVX-512's vector width."""


def physical_memory() -> int:
    """Bytes of RAM, or ``sys.maxsize`` where the platform cannot say (numpy's own
    ``MemoryError`` is then the only limit)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return sys.maxsize


class HostPool(MemoryPool):
    """Memory of the host, numpy-backed. ``capacity`` (bytes) defaults to physical RAM."""

    name = "host"
    exact_free_bytes = True

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = physical_memory() if capacity is None else capacity
        self._used = 0

    def free_bytes(self) -> int:
        return self.capacity - self._used

    @staticmethod
    def array(buf: Buffer) -> np.ndarray[Any, np.dtype[np.uint8]]:
        """The bytes of a live host buffer as a writable ``uint8`` array (no copy), so other
        pools and the host device can use host memory without staging."""
        if not isinstance(buf.pool, HostPool) or buf.refcount <= 0:
            raise BackendError(
                ErrorStatus.INCORRECT_KERNEL_ARG, f"{buf!r} is not a live host buffer"
            )
        array: np.ndarray[Any, np.dtype[np.uint8]] = buf.handle
        return array

    def _allocate(self, nbytes: int) -> Buffer:
        if nbytes > self.free_bytes():
            raise BackendError(
                ErrorStatus.MEMORY_ALLOCATION,
                f"host: {nbytes} bytes requested, {self.free_bytes()} of {self.capacity} free",
            )
        try:
            raw = np.zeros(nbytes + ALIGNMENT, dtype=np.uint8)
        except MemoryError as error:
            raise BackendError(
                ErrorStatus.MEMORY_ALLOCATION, f"host: the system refused {nbytes} bytes"
            ) from error
        start = -raw.ctypes.data % ALIGNMENT
        self._used += nbytes
        return Buffer(self, nbytes, raw[start : start + nbytes])

    def _free(self, buf: Buffer) -> None:
        self._used -= buf.nbytes
        buf.handle = None

    def _write(self, buf: Buffer, view: memoryview, offset: int) -> None:
        buf.handle[offset : offset + view.nbytes] = np.frombuffer(view, dtype=np.uint8)

    def _read(self, buf: Buffer, view: memoryview, offset: int) -> None:
        np.frombuffer(view, dtype=np.uint8)[:] = buf.handle[offset : offset + view.nbytes]

    def _copy_from(self, src_pool: MemoryPool, src_buf: Buffer, dst_buf: Buffer) -> None:
        if isinstance(src_pool, HostPool):
            dst_buf.handle[:] = src_buf.handle
        else:
            # The source pool reads straight into this buffer's memory: no staging copy.
            src_pool.read(src_buf, dst_buf.handle)
