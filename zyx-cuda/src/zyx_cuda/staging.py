"""Host↔device copies through pinned staging memory, chunked and spread over threads.

The DMA engines move pinned memory at full speed (about 55 GB/s host to device on the
H200) but pageable memory at a fraction (4.1 GB/s), and one core's ``memcpy`` into pinned
memory is slower still than the DMA. So a large copy is cut into chunks; worker threads
each take a free pinned slot, ``memmove`` their chunk into it (ctypes drops the GIL for
that), and enqueue its DMA; the next chunk is filled while earlier ones are in flight. A
slot's event says when its DMA finished and the slot may be filled again.

Copies below ``DIRECT_BYTES`` skip staging: the driver copies small pageable sources
into its own staging before ``cuMemcpyHtoDAsync`` returns, which is cheaper than a hop
through the pool.

The pinned slots are allocated on the first large copy and kept for the life of the
process.
"""

from __future__ import annotations

import ctypes
import os
import queue
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from cuda.bindings import driver

from zyx.errors import ErrorStatus
from zyx_cuda.context import Context
from zyx_cuda.errors import check

DIRECT_BYTES = 1 << 18
SLOT_BYTES = 8 << 20
THREADS = max(1, min(8, os.cpu_count() or 1))


def address(view: memoryview) -> int:
    """The address of a contiguous memoryview's first byte (read-only views too)."""
    return int(np.frombuffer(view, dtype=np.uint8).ctypes.data) if view.nbytes else 0


class _Slot:
    """One pinned chunk and the event of the last DMA that used it."""

    def __init__(self, nbytes: int) -> None:
        self.ptr = check(
            ErrorStatus.MEMORY_ALLOCATION, "cuMemHostAlloc", driver.cuMemHostAlloc(nbytes, 0)
        )
        self.event = check(
            ErrorStatus.INITIALIZATION,
            "cuEventCreate",
            driver.cuEventCreate(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING),
        )
        self.used = False

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
        self._slots: queue.SimpleQueue[_Slot] | None = None
        self._workers: ThreadPoolExecutor | None = None

    def upload(self, dst: int, src: memoryview, stream: Any) -> None:
        """Enqueue a copy of host ``src`` to device address ``dst`` on ``stream``. Returns
        once ``src`` may be reused; the DMA may still be in flight."""
        status = ErrorStatus.MEMORY_COPY_H2P
        if src.nbytes <= DIRECT_BYTES:
            check(
                status,
                "cuMemcpyHtoDAsync",
                driver.cuMemcpyHtoDAsync(dst, address(src), src.nbytes, stream),
            )
            return
        base = address(src)

        def chunk(slot: _Slot, offset: int, size: int) -> None:
            slot.wait()
            ctypes.memmove(slot.ptr, base + offset, size)
            check(
                status,
                "cuMemcpyHtoDAsync",
                driver.cuMemcpyHtoDAsync(dst + offset, slot.ptr, size, stream),
            )
            slot.record(stream, status)

        self._run(chunk, src.nbytes)

    def download(self, dst: memoryview, src: int, stream: Any) -> None:
        """Copy device address ``src`` into host ``dst`` on ``stream``; returns when done."""
        status = ErrorStatus.MEMORY_COPY_P2H
        if dst.nbytes <= DIRECT_BYTES:
            check(
                status,
                "cuMemcpyDtoHAsync",
                driver.cuMemcpyDtoHAsync(address(dst), src, dst.nbytes, stream),
            )
            check(
                ErrorStatus.KERNEL_SYNC, "cuStreamSynchronize", driver.cuStreamSynchronize(stream)
            )
            return
        base = address(dst)

        def chunk(slot: _Slot, offset: int, size: int) -> None:
            check(
                status,
                "cuMemcpyDtoHAsync",
                driver.cuMemcpyDtoHAsync(slot.ptr, src + offset, size, stream),
            )
            slot.record(stream, status)
            slot.wait()
            ctypes.memmove(base + offset, slot.ptr, size)

        self._run(chunk, dst.nbytes)

    def _run(self, chunk: Any, nbytes: int) -> None:
        """Call ``chunk(slot, offset, size)`` for every chunk of ``nbytes``, on the workers."""
        slots, workers = self._ready()
        context = self.context

        def task(offset: int, size: int) -> None:
            context.activate()
            slot = slots.get()
            try:
                chunk(slot, offset, size)
            finally:
                slots.put(slot)

        step = self.slot_bytes
        futures = [
            workers.submit(task, offset, min(step, nbytes - offset))
            for offset in range(0, nbytes, step)
        ]
        errors = [f.exception() for f in futures]
        for error in errors:
            if error is not None:
                raise error

    def _ready(self) -> tuple[queue.SimpleQueue[_Slot], ThreadPoolExecutor]:
        if self._slots is None or self._workers is None:
            slots: queue.SimpleQueue[_Slot] = queue.SimpleQueue()
            # Twice the threads: each thread fills one slot while the DMA drains another.
            for _ in range(2 * self.threads):
                slots.put(_Slot(self.slot_bytes))
            self._slots = slots
            self._workers = ThreadPoolExecutor(self.threads, thread_name_prefix="zyx-cuda-staging")
        return self._slots, self._workers
