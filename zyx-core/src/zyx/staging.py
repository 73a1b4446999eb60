"""Host memory that other pools copy from and to in place, and staging through host memory.

A pool whose buffers are host memory says so by subclassing ``HostMemory`` (the host pool
does): its buffers' handles are numpy byte arrays, which another pool's copy reads or
writes directly, with no staging copy. A copy still running after it returns keeps the
array, not the buffer: a ``release`` meanwhile frees nothing the copy uses, and the copy
never takes the host pool's lock when it completes (what a pool runs under its lock takes
no other pool's lock: ``MemoryPool.lock``). Any other pool's bytes are staged through a
fresh host array (``staged``).

Backends use this module rather than the host backend's (``zyx.host``).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from zyx.backend import Buffer, MemoryPool
from zyx.errors import BackendError, ErrorStatus

HostBytes = np.ndarray[Any, np.dtype[np.uint8]]
"""The bytes of a buffer in host memory, as a writable ``uint8`` array."""


def address(memory: memoryview | HostBytes) -> int:
    """The address of the first byte of contiguous host memory (a memoryview or a numpy
    array; read-only too), 0 where it has none. Through ctypes where writable: on every
    copy and host launch, and numpy's ``.ctypes.data`` costs several times as much."""
    view = memory if isinstance(memory, memoryview) else memory.data
    if not view.nbytes:
        return 0
    if view.readonly:
        return int(np.frombuffer(view, dtype=np.uint8).ctypes.data)
    return ctypes.addressof(ctypes.c_char.from_buffer(view))


class HostMemory(MemoryPool):
    """A pool whose buffers are host memory: each ``Buffer.handle`` is a ``HostBytes``
    array of exactly the buffer's bytes."""

    @staticmethod
    def array(buf: Buffer) -> HostBytes:
        """The bytes of a live buffer of a ``HostMemory`` pool (no copy)."""
        if not isinstance(buf.pool, HostMemory) or buf.refcount <= 0:
            raise BackendError(
                ErrorStatus.INCORRECT_KERNEL_ARG, f"{buf!r} is not a live host buffer"
            )
        array: HostBytes = buf.handle
        return array


def host_bytes(pool: MemoryPool, buf: Buffer) -> HostBytes | None:
    """``buf``'s bytes in place where ``pool`` keeps host memory, else ``None``."""
    return HostMemory.array(buf) if isinstance(pool, HostMemory) else None


def staged(pool: MemoryPool, buf: Buffer) -> HostBytes:
    """All of ``buf``'s bytes in host memory: in place where ``pool`` keeps host memory,
    else a fresh array that ``pool.read`` filled."""
    in_place = host_bytes(pool, buf)
    if in_place is not None:
        return in_place
    staging: HostBytes = np.empty(buf.nbytes, dtype=np.uint8)
    pool.read(buf, staging)
    return staging
