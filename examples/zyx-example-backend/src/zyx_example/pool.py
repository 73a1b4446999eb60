"""The example pool: each buffer is a numpy byte array.

``zyx.backend.MemoryPool`` checks every size, offset and buffer before it calls the
underscored methods below, so they may assume their arguments are in range. Work here is
synchronous (a launch has finished when it returns), so a released buffer can be freed at
once and ``synchronize`` has nothing to wait for.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from zyx.backend import Buffer, MemoryPool
from zyx.errors import BackendError, ErrorStatus


class ExamplePool(MemoryPool):
    """``capacity`` bytes of host memory, counted so that running out is an error, not a
    crash, and leaves the pool usable."""

    exact_free_bytes = True  # the pool counts every byte itself; the suite checks the count

    def __init__(self, name: str, capacity: int) -> None:
        self.name = name
        self.capacity = capacity
        self.used = 0

    def free_bytes(self) -> int:
        return self.capacity - self.used

    @staticmethod
    def array(buf: Buffer) -> np.ndarray[Any, np.dtype[np.uint8]]:
        """The buffer's bytes (no copy)."""
        array: np.ndarray[Any, np.dtype[np.uint8]] = buf.handle
        return array

    def _allocate(self, nbytes: int) -> Buffer:
        if nbytes > self.free_bytes():
            raise BackendError(
                ErrorStatus.MEMORY_ALLOCATION,
                f"{self.name}: {nbytes} bytes requested, {self.free_bytes()} free",
            )
        try:
            memory = np.zeros(nbytes, np.uint8)
        except MemoryError as error:
            raise BackendError(
                ErrorStatus.MEMORY_ALLOCATION, f"{self.name}: the system refused {nbytes} bytes"
            ) from error
        self.used += nbytes
        return Buffer(self, nbytes, memory)

    def _free(self, buf: Buffer) -> None:
        self.used -= buf.nbytes
        buf.handle = None

    def _write(self, buf: Buffer, view: memoryview, offset: int) -> None:
        # A copy, made now: the caller may reuse ``data`` as soon as write() returns.
        self.array(buf)[offset : offset + view.nbytes] = np.frombuffer(view, np.uint8)

    def _read(self, buf: Buffer, view: memoryview, offset: int) -> None:
        np.frombuffer(view, np.uint8)[:] = self.array(buf)[offset : offset + view.nbytes]

    def _copy_from(self, src_pool: MemoryPool, src_buf: Buffer, dst_buf: Buffer) -> None:
        if isinstance(src_pool, ExamplePool):
            self.array(dst_buf)[:] = self.array(src_buf)
        else:
            # Any other pool reads straight into this buffer's memory: no staging copy.
            src_pool.read(src_buf, self.array(dst_buf))
