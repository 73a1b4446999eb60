"""The host memory pool: buffers are numpy byte arrays.

Buffers it allocates are 64-byte aligned, so kernels compiled for the host may use aligned
vector loads (a buffer over imported memory, ``adopt``, is only as aligned as that), and
zero-filled (``calloc``: pages are committed only when first touched).

The pool keeps an exact count of the bytes it handed out against a capacity, physical RAM
by default: an allocation over it raises ``MemoryAllocation`` instead of letting the
operating system kill the process, and leaves the pool usable. Memory returns to the
allocator when the last reference to its array goes; work that runs after its call
returned (a host launch in another thread, another pool's copy) holds the array
(``zyx.staging``) until it is done, so a ``release`` during it cannot free memory that is
still in use.
"""

from __future__ import annotations

import logging
import os
import sys
import weakref

import numpy as np
import numpy.typing as npt

from zyx.backend import Buffer, MemoryPool
from zyx.errors import BackendError, ErrorStatus
from zyx.host.limits import usable_memory
from zyx.staging import HostMemory

_log = logging.getLogger("zyx.mem")

ALIGNMENT = 64
"""Byte alignment of every buffer: a cache line, and AVX-512's vector width."""


def physical_memory() -> int:
    """Bytes of RAM, or ``sys.maxsize`` where the platform cannot say (numpy's own
    ``MemoryError`` is then the only limit)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return sys.maxsize


class HostPool(HostMemory):
    """Memory of the host, numpy-backed. ``capacity`` (bytes) defaults to physical RAM, or
    less where the process's limits leave less (``zyx.host.limits.usable_memory``)."""

    name = "host"
    exact_free_bytes = True

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = usable_memory(physical_memory()) if capacity is None else capacity
        self._used = 0
        self._adopted: weakref.WeakSet[Buffer] = weakref.WeakSet()
        """Buffers over memory the pool does not own (``adopt``): not counted in ``_used``."""

    def free_bytes(self) -> int:
        return self.capacity - self._used

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
        if _log.isEnabledFor(logging.DEBUG):
            _log.debug("host: allocated %d bytes at %#x", nbytes, raw.ctypes.data + start)
        return Buffer(self, nbytes, raw[start : start + nbytes])

    def adopt(self, memory: npt.NDArray[np.uint8]) -> Buffer:
        """A buffer over host memory this pool does not own (an imported array's bytes: a
        C-contiguous 1-D ``uint8`` array), no copy. The buffer holds ``memory``, and so
        whatever owns it, until it is freed. It does not count against ``capacity``, it is
        only as aligned as ``memory`` is, and it is read-only where ``memory`` is."""
        plain = isinstance(memory, np.ndarray) and memory.dtype == np.uint8 and memory.ndim == 1
        if not plain or not memory.flags.c_contiguous or memory.nbytes == 0:
            raise BackendError(
                ErrorStatus.INCORRECT_KERNEL_ARG,
                f"host: adopt takes a non-empty, contiguous 1-D uint8 array, got {memory!r:.80}",
            )
        buf = Buffer(self, memory.nbytes, memory)
        with self.lock:
            self._adopted.add(buf)
        return buf

    def _free(self, buf: Buffer) -> None:
        if buf in self._adopted:
            self._adopted.discard(buf)
        else:
            self._used -= buf.nbytes
            if _log.isEnabledFor(logging.DEBUG):
                _log.debug("host: freed %d bytes at %#x", buf.nbytes, buf.handle.ctypes.data)
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
