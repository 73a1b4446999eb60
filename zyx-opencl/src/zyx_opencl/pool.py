"""The memory of one OpenCL device: buffers, copies, and an exact count of bytes in use.

Every copy is a command of the device's scheduler, ordered against launches by the
buffers it touches. Writes stage the caller's bytes, so the caller may reuse them at once.
Copies from a host buffer read its memory in place and keep its array until the copy
completed (``zyx.staging``). Copies from any other pool (another OpenCL device, a file, a
third party's) read it into a fresh host array and upload that: one staging copy in all.

Free bytes are ``CL_DEVICE_GLOBAL_MEM_SIZE`` (on a CPU, at most what this process's memory
limits leave: ``memory_capacity``) minus the bytes of live buffers and of released buffers
whose work is still running. Drivers may allocate lazily (PoCL does, at a buffer's first
use, and segfaults where the process cannot back it): zyx's count catches
oversubscription at ``allocate``, and a driver's own failure later surfaces at the next
sync point as ``MemoryAllocation``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import partial
from typing import Any

import pyopencl as cl

from zyx.backend import Buffer, MemoryPool
from zyx.errors import BackendError, ErrorStatus
from zyx.host.limits import usable_memory
from zyx.native import new_lock
from zyx.staging import staged
from zyx_opencl.native import native
from zyx_opencl.scheduler import Action, Command, Scheduler

_log = logging.getLogger("zyx.mem")


class Copy(Command):
    """One ``cl.enqueue_copy`` from ``src`` to ``dst`` (cl.Buffers or host arrays)."""

    __slots__ = ("status", "done", "dst", "src", "options")

    def __init__(
        self,
        status: ErrorStatus,
        reads: Sequence[Buffer],
        writes: Sequence[Buffer],
        dst: Any,
        src: Any,
        done: Action | None = None,
        **options: Any,
    ) -> None:
        self.status = status
        self.reads = reads
        self.writes = writes
        self.done = done
        self.dst = dst
        self.src = src
        self.options = options

    def enqueue(self, queue: cl.CommandQueue, wait_for: list[cl.Event] | None) -> cl.Event:
        return cl.enqueue_copy(queue, self.dst, self.src, wait_for=wait_for, **self.options)

    def __repr__(self) -> str:
        return f"<copy {self.status.value}>"


def _keep() -> None:
    """The ``done`` of an upload: nothing left to do. Its event, which holds the host bytes,
    stays with the scheduler (as the mark of its point) until seen complete: dropping a
    pending pyopencl host-copy event would block until it completes."""


def memory_capacity(device: cl.Device) -> int:
    """The bytes a pool of ``device`` hands out: ``CL_DEVICE_GLOBAL_MEM_SIZE``, and on a CPU
    no more than this process's limits leave (``zyx.host.limits.usable_memory``): PoCL
    allocates a buffer at its first use, and segfaults where that fails."""
    total: int = device.global_mem_size
    return usable_memory(total) if device.type & cl.device_type.CPU else total


class OpenCLPool(MemoryPool):
    """Buffers of one OpenCL device, in the context its ``Scheduler``'s queues share."""

    exact_free_bytes = True

    def __init__(
        self, name: str, context: cl.Context, device: cl.Device, scheduler: Scheduler
    ) -> None:
        self.name = name
        self.lock = new_lock(native())  # which the native Enqueuer takes in C
        self.context = context
        self.capacity: int = memory_capacity(device)
        self.max_allocation: int = device.max_mem_alloc_size
        self.scheduler = scheduler
        self._used = 0

    def free_bytes(self) -> int:
        return self.capacity - self._used

    def synchronize(self) -> None:
        with self.lock:
            self.scheduler.synchronize()

    def _allocate(self, nbytes: int) -> Buffer:
        if nbytes > self.max_allocation:
            raise BackendError(
                ErrorStatus.MEMORY_ALLOCATION,
                f"{self.name}: {nbytes} bytes exceed the largest single allocation, "
                f"CL_DEVICE_MAX_MEM_ALLOC_SIZE = {self.max_allocation}",
            )
        if nbytes > self.free_bytes():
            self.scheduler.reclaim()  # memory released but still in use becomes free
        if nbytes > self.free_bytes():
            raise BackendError(
                ErrorStatus.MEMORY_ALLOCATION,
                f"{self.name}: {nbytes} bytes requested, {self.free_bytes()} of "
                f"{self.capacity} free",
            )
        try:
            handle = cl.Buffer(self.context, cl.mem_flags.READ_WRITE, nbytes)
        except cl.Error as error:
            raise BackendError(
                ErrorStatus.MEMORY_ALLOCATION, f"{self.name}: {nbytes} bytes: {error}"
            ) from error
        self._used += nbytes
        if _log.isEnabledFor(logging.DEBUG):
            _log.debug("%s: allocated %d bytes, %d in use", self.name, nbytes, self._used)
        return Buffer(self, nbytes, handle)

    def _free(self, buf: Buffer) -> None:
        # buf.handle stays: commands still in the window resolve it when they are enqueued.
        self.scheduler.free_after_window(buf, partial(self._release, buf.handle, buf.nbytes))

    def _release(self, handle: cl.Buffer, nbytes: int) -> None:
        handle.release()
        self._used -= nbytes
        if _log.isEnabledFor(logging.DEBUG):
            _log.debug("%s: freed %d bytes, %d in use", self.name, nbytes, self._used)

    def _write(self, buf: Buffer, view: memoryview, offset: int) -> None:
        if view.nbytes:
            self._upload(buf, bytes(view), offset, _keep)

    def _read(self, buf: Buffer, view: memoryview, offset: int) -> None:
        if not view.nbytes:
            self.scheduler.flush()
            self.scheduler.raise_pending()
            return
        read = Copy(
            ErrorStatus.MEMORY_COPY_P2H, reads=(buf,), writes=(), dst=view, src=buf.handle,
            src_offset=offset, is_blocking=False,
        )  # fmt: skip
        self.scheduler.run(read)

    def _copy_from(self, src_pool: MemoryPool, src_buf: Buffer, dst_buf: Buffer) -> None:
        if src_pool is self:
            copy = Copy(
                ErrorStatus.MEMORY_COPY_P2P, reads=(src_buf,), writes=(dst_buf,),
                dst=dst_buf.handle, src=src_buf.handle, byte_count=src_buf.nbytes,
            )  # fmt: skip
            self.scheduler.submit(copy)
        else:
            self._upload(dst_buf, staged(src_pool, src_buf), 0, _keep)

    def _upload(self, buf: Buffer, host: Any, offset: int, done: Action) -> None:
        upload = Copy(
            ErrorStatus.MEMORY_COPY_H2P, reads=(), writes=(buf,), dst=buf.handle, src=host,
            done=done, dst_offset=offset, is_blocking=False,
        )  # fmt: skip
        self.scheduler.submit(upload)
