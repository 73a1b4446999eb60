"""Host↔device copies through pinned staging memory, chunked and spread over threads.

The DMA engines move pinned memory at full speed but pageable memory at a fraction, and
one core's ``memcpy`` into pinned memory is slower than the DMA. So a large copy is cut
into chunks that worker threads ("lanes") take in turn, each the next one not yet taken: a
lane on a busy core takes fewer instead of finishing last (chunks dealt round-robin let a
slow lane hold whole copies back). Each lane owns two pinned slots and alternates between
them: it ``memmove``s a chunk into one slot (ctypes drops the GIL for that) and enqueues
its DMA, then fills the other slot while that DMA runs. A slot's event says when its last
DMA finished and the slot may be filled again. The chunk size (``SLOT_BYTES``) and the
number of lanes (``THREADS``) are the best of benchmarks/staging_sweep.py's sweeps on an H200:
beyond a few lanes the host's memory bandwidth, shared by the extra copy and the DMA, is
the limit, not the lane count. Streaming (non-temporal) stores into the slots, page-locking
part of the source in place beside the lanes, and first chunks growing from a fraction of
a slot were tried in such sweeps and gained nothing.

Where zyx-cuda's native module is built, each lane runs in C without the GIL (``native.c``:
``upload``, ``download``; the download also starts a chunk's DMA while the one before is
copied out); else in Python, a GIL handoff per driver call.

Copies below ``DIRECT_BYTES`` skip staging: the driver copies small pageable sources
into its own staging before ``cuMemcpyHtoDAsync`` returns, which is cheaper than a hop
through the lanes. So do copies from and to page-locked host memory (``cuMemHostAlloc``,
``cuMemHostRegister``: torch's ``pin_memory``, cupy's pinned arrays), which the DMA
engines read and write in place, at their full speed; the copy then returns once the DMA
is done, as the host memory may be reused at once.

With the native module, a read up to ``BOUNCE_BYTES`` lands in a page-locked buffer of the
pool's and is copied out from there, as the driver stages a pageable destination itself,
in one call without the GIL (``native.c``'s ``read``, or its ``Reader``, which
``zyx_cuda.pool`` calls instead of ``download``, with this buffer): through cuda-python
the DMA's call and the stream's wait cost more host time than the DMA of a few KiB (4 KiB
on an H100, 2026-12-05: 11.0 us into pageable memory, 8.8 into page-locked and copied
out).

The pinned slots are allocated on the first large copy, the bounce buffer on the first
small read (the pool's first read, where its ``Reader`` is made), and both kept for the
life of the process.
"""

from __future__ import annotations

import ctypes
import itertools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cuda.bindings import driver

from zyx.errors import ErrorStatus
from zyx.staging import address
from zyx_cuda.context import Context
from zyx_cuda.errors import check, cuda_error
from zyx_cuda.native import copier

DIRECT_BYTES = 1 << 18
BOUNCE_BYTES = 1 << 16
_MEMORY_TYPE = driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE
_HOST = int(driver.CUmemorytype.CU_MEMORYTYPE_HOST)
SLOT_BYTES = 4 << 20
THREADS = max(1, min(12, os.cpu_count() or 1))

Chunk = Callable[["_Slot", int, int], None]
"""Copies one chunk, ``(slot, offset, size)``, through ``slot``."""
Lane = Callable[[tuple["_Slot", "_Slot"]], None]
"""Copies the chunks a lane claims through its two slots, until none is left."""


def page_locked(base: int, nbytes: int) -> bool:
    """Whether host memory ``[base, base + nbytes)`` is page-locked, as far as the driver
    knows (its first and last bytes are)."""
    for at in (base, base + nbytes - 1):
        result, kind = driver.cuPointerGetAttribute(_MEMORY_TYPE, at)
        if result or int(kind) != _HOST:
            return False
    return True


class _Slot:
    """One pinned chunk and the event of the last DMA that used it."""

    def __init__(self, nbytes: int) -> None:
        self.ptr = check(
            ErrorStatus.MEMORY_ALLOCATION, "cuMemHostAlloc", driver.cuMemHostAlloc(nbytes, 0)
        )
        try:
            self.event = check(
                ErrorStatus.INITIALIZATION,
                "cuEventCreate",
                driver.cuEventCreate(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING),
            )
        except BaseException:
            driver.cuMemFreeHost(self.ptr)
            raise
        self.used = False

    def free(self) -> None:
        """Give the slot back to the driver (it was never used)."""
        driver.cuEventDestroy(self.event)
        driver.cuMemFreeHost(self.ptr)

    def record(self, stream: Any, status: ErrorStatus) -> None:
        check(status, "cuEventRecord", driver.cuEventRecord(self.event, stream))
        self.used = True

    def wait(self) -> None:
        """Block until the slot's last DMA finished."""
        if self.used:
            check(
                ErrorStatus.KERNEL_SYNC, "cuEventSynchronize", driver.cuEventSynchronize(self.event)
            )
            self.used = False


class Staging:
    """Pinned slots and worker threads for one device's host↔device copies."""

    def __init__(
        self, context: Context, *, threads: int = THREADS, slot_bytes: int = SLOT_BYTES
    ) -> None:
        self.context = context
        self.threads = threads
        self.slot_bytes = slot_bytes
        self._lanes: list[tuple[_Slot, _Slot]] = []
        self._workers: ThreadPoolExecutor | None = None
        self._bounce_ptr = 0
        self._native = copier()

    def upload(self, dst: int, src: memoryview, stream: Any) -> None:
        """Enqueue a copy of host ``src`` to device address ``dst`` on ``stream``. Returns
        once ``src`` may be reused; the DMA may still be in flight."""
        status = ErrorStatus.MEMORY_COPY_H2P
        base = address(src)
        locked = bool(src.nbytes) and page_locked(base, src.nbytes)
        if locked or src.nbytes <= DIRECT_BYTES:
            copy = driver.cuMemcpyHtoDAsync(dst, base, src.nbytes, stream)
            check(status, "cuMemcpyHtoDAsync", copy)
            if locked:  # the DMA reads ``src`` in place, later
                _synchronize(stream)
            return
        if self._native is not None:
            upload = self._native.upload
            self._run(self._native_lane(upload, dst, base, src.nbytes, stream, status), src.nbytes)
            return

        def chunk(slot: _Slot, offset: int, size: int) -> None:
            ctypes.memmove(slot.ptr, base + offset, size)
            copy = driver.cuMemcpyHtoDAsync(dst + offset, slot.ptr, size, stream)
            check(status, "cuMemcpyHtoDAsync", copy)
            slot.record(stream, status)

        self._run(self._chunked(chunk, src.nbytes), src.nbytes)

    def download(self, dst: memoryview, src: int, stream: Any) -> None:
        """Copy device address ``src`` into host ``dst`` on ``stream``; returns when done.
        The caller holds the pool's lock (the bounce buffer is the pool's)."""
        nbytes = dst.nbytes
        if nbytes > DIRECT_BYTES and not page_locked(address(dst), nbytes):
            self._download_staged(dst, src, stream)
            return
        if self._native is None:
            copy = driver.cuMemcpyDtoHAsync(address(dst), src, nbytes, stream)
            check(ErrorStatus.MEMORY_COPY_P2H, "cuMemcpyDtoHAsync", copy)
            _synchronize(stream)
            return
        # The native read takes ``dst``'s address itself: ``address`` cost more than it.
        bounce = self.bounce() if nbytes <= BOUNCE_BYTES else 0
        result, what = self._native.read(dst, src, bounce, int(stream))
        if result:
            raise cuda_error(ErrorStatus.MEMORY_COPY_P2H, what, result)

    def _download_staged(self, dst: memoryview, src: int, stream: Any) -> None:
        """``download`` of pageable memory above ``DIRECT_BYTES``, through the lanes."""
        status = ErrorStatus.MEMORY_COPY_P2H
        base = address(dst)
        if self._native is not None:
            download = self._native.download
            self._run(
                self._native_lane(download, src, base, dst.nbytes, stream, status), dst.nbytes
            )
            return

        def chunk(slot: _Slot, offset: int, size: int) -> None:
            copy = driver.cuMemcpyDtoHAsync(slot.ptr, src + offset, size, stream)
            check(status, "cuMemcpyDtoHAsync", copy)
            slot.record(stream, status)
            slot.wait()
            ctypes.memmove(base + offset, slot.ptr, size)

        self._run(self._chunked(chunk, dst.nbytes), dst.nbytes)

    def bounce(self) -> int:
        """The page-locked ``BOUNCE_BYTES`` that small reads land in (allocated on the first)."""
        if not self._bounce_ptr:
            found = driver.cuMemHostAlloc(BOUNCE_BYTES, 0)
            self._bounce_ptr = int(check(ErrorStatus.MEMORY_ALLOCATION, "cuMemHostAlloc", found))
        return self._bounce_ptr

    def _run(self, lane: Lane, nbytes: int) -> None:
        """Run ``lane`` on as many lanes as ``nbytes`` has chunks (up to all of them)."""
        lanes, workers = self._ready()
        count = min(len(lanes), -(-nbytes // self.slot_bytes))
        futures = [workers.submit(self._in_context, lane, lanes[i]) for i in range(count)]
        errors = [future.exception() for future in futures]
        for error in errors:
            if error is not None:
                raise error

    def _in_context(self, lane: Lane, slots: tuple[_Slot, _Slot]) -> None:
        self.context.activate()
        lane(slots)

    def _chunked(self, chunk: Chunk, nbytes: int) -> Lane:
        """A lane that runs ``chunk`` on each chunk it claims, alternating its two slots; it
        claims one once a slot is free, as the native lanes do."""
        claims = itertools.count(0, self.slot_bytes)  # shared; next() holds the GIL

        def lane(slots: tuple[_Slot, _Slot]) -> None:
            for slot in itertools.cycle(slots):
                slot.wait()
                offset = next(claims)
                if offset >= nbytes:
                    return
                chunk(slot, offset, min(self.slot_bytes, nbytes - offset))

        return lane

    def _native_lane(
        self,
        call: Callable[..., tuple[int, str]],
        device: int,
        host: int,
        nbytes: int,
        stream: Any,
        status: ErrorStatus,
    ) -> Lane:
        """A lane run by the native module's ``upload`` or ``download``, without the GIL;
        the copy's lanes claim their chunks from one counter."""
        claims = ctypes.c_size_t(0)

        def lane(slots: tuple[_Slot, _Slot]) -> None:
            first, second = slots
            result, what = call(
                device, host, nbytes, ctypes.addressof(claims), self.slot_bytes,
                first.ptr, int(first.event), second.ptr, int(second.event), int(stream),
            )  # fmt: skip
            if result:
                raise cuda_error(status, what, result)

        return lane

    def _ready(self) -> tuple[list[tuple[_Slot, _Slot]], ThreadPoolExecutor]:
        if self._workers is None:
            slots = _allocate(2 * self.threads, self.slot_bytes)
            self._lanes = list(zip(slots[0::2], slots[1::2]))
            self._workers = ThreadPoolExecutor(self.threads, thread_name_prefix="zyx-cuda-staging")
        return self._lanes, self._workers


def _allocate(count: int, nbytes: int) -> list[_Slot]:
    """``count`` slots; where one cannot be had, the others are freed (pinned memory is
    scarce, and nothing else would free them)."""
    slots: list[_Slot] = []
    try:
        for _ in range(count):
            slots.append(_Slot(nbytes))
    except BaseException:
        for slot in slots:
            slot.free()
        raise
    return slots


def _synchronize(stream: Any) -> None:
    check(ErrorStatus.KERNEL_SYNC, "cuStreamSynchronize", driver.cuStreamSynchronize(stream))
