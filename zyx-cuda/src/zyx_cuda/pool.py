"""Device memory of one GPU: ``cuMemAlloc`` buffers, scheduled on the device's streams.

``Buffer.handle`` is the device address (an int). Every copy is a command on the device's
streams like a kernel, so hazards between copies and launches become stream waits.

Accounting: ``free_bytes`` is the ``cuMemGetInfo`` free memory at open minus the bytes
this pool holds (requested sizes, not the driver's rounded-up pages); other processes'
allocations after open are not seen. A released buffer still counts until it is actually
freed.

Freeing: ``release`` never blocks. The buffer's last uses on each stream (the tracker's
``last_uses``) get an event, and ``cuMemFree`` runs once they all completed, at a later
allocation, read or synchronize. Out of memory first waits for those deferred frees, then
retries once; if it still fails it raises MemoryAllocation and the pool stays usable.

Reads: where zyx-cuda's native module is built, a read of up to ``DIRECT_BYTES`` runs
whole in C (native.c's ``Reader``: the stream's choice and books, the DMA and its wait), as
the Python layers around a few KiB's DMA cost more host time than the driver's calls;
``_read_python`` is its specification, and takes whatever it refuses.

Copies are logged on ``zyx.launch`` (``ZYX_DEBUG=32``), with the stream each ran on. Each
checks the logger, unlike a launch (``zyx_cuda.program``): beside a copy's driver calls
that check costs nothing measurable, and a logger turned on later is seen at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from cuda.bindings import driver

from zyx.backend import Buffer, MemoryPool, byte_view
from zyx.errors import ErrorStatus
from zyx.native import new_lock, read_layout
from zyx.staging import staged
from zyx_cuda.context import Context
from zyx_cuda.errors import CudaError, check, cuda_error, is_out_of_memory
from zyx_cuda.native import native, reader_type
from zyx_cuda.staging import BOUNCE_BYTES, DIRECT_BYTES, Staging
from zyx_cuda.streams import Streams

_log = logging.getLogger("zyx.mem")
_copy_log = logging.getLogger("zyx.launch")


class CudaPool(MemoryPool):
    """The memory of one CUDA device."""

    exact_free_bytes = True

    def __init__(self, name: str, context: Context, streams: Streams) -> None:
        self.name = name
        self.lock = new_lock(native())  # which the native Launcher takes in C
        self.context = context
        self.streams = streams
        self.staging = Staging(context)
        context.activate()
        free, _ = check(ErrorStatus.DEVICE_QUERY, "cuMemGetInfo", driver.cuMemGetInfo())
        self._capacity = int(free)
        self._held = 0
        self._owners: dict[Buffer, Callable[[], None]] = {}
        self._reader: Any = None

    def free_bytes(self) -> int:
        with self.lock:
            self.context.activate()
            self.streams.collect()
            return self._capacity - self._held

    # ---- allocation ---------------------------------------------------------------------

    def _allocate(self, nbytes: int) -> Buffer:
        self.context.activate()
        self.streams.collect()
        try:
            ptr = _mem_alloc(nbytes)
        except CudaError as error:
            if not is_out_of_memory(error):
                raise
            _log.debug(
                "%s: out of memory for %d bytes; waiting for deferred frees", self.name, nbytes
            )
            self.streams.synchronize()
            try:
                ptr = _mem_alloc(nbytes)
            except CudaError as again:
                raise CudaError(
                    ErrorStatus.MEMORY_ALLOCATION,
                    f"{self.name}: {again.context}; {nbytes} bytes asked, "
                    f"{self._capacity - self._held} free by account",
                    again.result,
                ) from again
        self._held += nbytes
        _log.debug("%s: allocated %d bytes at %#x", self.name, nbytes, ptr)
        return Buffer(self, nbytes, ptr)

    def adopt(self, ptr: int, nbytes: int, owner: Callable[[], None]) -> Buffer:
        """A buffer over memory this pool does not own (an imported tensor's). When it is
        freed, ``owner()`` is called instead of ``cuMemFree``, after the work using it."""
        buf = Buffer(self, nbytes, ptr)
        with self.lock:
            self._owners[buf] = owner
        return buf

    def _free(self, buf: Buffer) -> None:
        self.context.activate()
        self.streams.after(self.streams.tracker.forget(buf).values(), lambda: self._dispose(buf))

    def _dispose(self, buf: Buffer) -> None:
        owner = self._owners.pop(buf, None)
        if owner is not None:
            owner()
        else:
            check(ErrorStatus.MEMORY_DEALLOCATION, "cuMemFree", driver.cuMemFree(buf.handle))
            self._held -= buf.nbytes
            _log.debug("%s: freed %d bytes at %#x", self.name, buf.nbytes, buf.handle)
        buf.handle = None

    # ---- copies -------------------------------------------------------------------------

    def _write(self, buf: Buffer, view: memoryview, offset: int) -> None:
        self.context.activate()
        streams, target = self.streams, (buf,)
        queue = streams.select((), target)
        self.staging.upload(buf.handle + offset, view, streams.handles[queue])
        streams.commit(queue, (), target)
        if _copy_log.isEnabledFor(logging.DEBUG):
            _log_copy(self.name, f"write to {buf.handle + offset:#x}", view.nbytes, queue)

    def _read(self, buf: Buffer, view: memoryview, offset: int) -> None:
        reader = self._reader
        if reader is None:
            reader = self._reader = self._new_reader()
        queue = reader.read(buf, view, offset) if reader else -1
        if queue < 0:
            queue = self._read_python(buf, view, offset)
        if _copy_log.isEnabledFor(logging.DEBUG):
            _log_copy(self.name, f"read from {buf.handle + offset:#x}", view.nbytes, queue)

    def _read_python(self, buf: Buffer, view: memoryview, offset: int) -> int:
        """The read in Python, and the specification of native.c's ``Reader``, which runs
        the steady state of small reads in C; returns the stream it ran on."""
        self.context.activate()
        streams, source = self.streams, (buf,)
        queue = streams.select(source, ())
        streams.commit(queue, source, ())
        self.staging.download(view, buf.handle + offset, streams.handles[queue])
        streams.done(queue)
        streams.collect()
        return queue

    def _new_reader(self) -> Any:
        """zyx-cuda's native ``Reader`` of this pool, or ``False`` without the native module.
        Made at the first read, with the bounce buffer it lands small reads in."""
        reader = reader_type()
        if reader is None:
            return False
        self.context.activate()
        streams = self.streams
        layout = read_layout(self, streams, streams.addresses)
        bounce = self.staging.bounce()
        return reader(
            layout, streams, _read_failure, self.context.address, bounce, BOUNCE_BYTES, DIRECT_BYTES
        )

    def _copy_from(self, src_pool: MemoryPool, src_buf: Buffer, dst_buf: Buffer) -> None:
        if src_pool is self:
            self._copy_device(src_buf, dst_buf)
        elif isinstance(src_pool, CudaPool):
            self._copy_peer(src_pool, src_buf, dst_buf)
        else:  # host memory in place, any other pool's through a host array
            self._write(dst_buf, byte_view(staged(src_pool, src_buf)), 0)

    def _copy_device(self, src: Buffer, dst: Buffer) -> None:
        self.context.activate()
        streams = self.streams
        queue = streams.select((src,), (dst,))
        check(
            ErrorStatus.MEMORY_COPY_P2P,
            "cuMemcpyDtoDAsync",
            driver.cuMemcpyDtoDAsync(dst.handle, src.handle, src.nbytes, streams.handles[queue]),
        )
        streams.commit(queue, (src,), (dst,))
        if _copy_log.isEnabledFor(logging.DEBUG):
            copy = f"copy {src.handle:#x} to {dst.handle:#x}"
            _log_copy(self.name, copy, src.nbytes, queue)

    def _copy_peer(self, src_pool: CudaPool, src: Buffer, dst: Buffer) -> None:
        """Copy from another GPU on one of this device's streams, over the direct link
        where the hardware has one (``Context.reach``), else staged by the driver."""
        self.context.reach(src_pool.context)
        streams = self.streams
        queue = streams.select((), (dst,))
        stream = streams.handles[queue]
        src_pool.context.activate()
        src_pool.streams.order_before(stream, src_pool.streams.tracker.last_uses(src).values())
        self.context.activate()
        check(
            ErrorStatus.MEMORY_COPY_P2P,
            "cuMemcpyPeerAsync",
            driver.cuMemcpyPeerAsync(
                dst.handle,
                self.context.handle,
                src.handle,
                src_pool.context.handle,
                src.nbytes,
                stream,
            ),
        )
        streams.commit(queue, (), (dst,))
        # The source device must not overwrite or free ``src`` before the copy has read it.
        # An event must be recorded in its stream's context: this one's, waited on there.
        done = streams.mark(queue, streams.issued[queue])
        src_pool.context.activate()
        src_pool.streams.order_after_event(done, reads=(src,))
        self.context.activate()
        if _copy_log.isEnabledFor(logging.DEBUG):
            copy = f"copy {src_pool.name} {src.handle:#x} to {dst.handle:#x}"
            _log_copy(self.name, copy, src.nbytes, queue)

    def synchronize(self) -> None:
        with self.lock:
            self.context.activate()
            self.streams.synchronize()


def _log_copy(pool: str, what: str, nbytes: int, queue: int) -> None:
    _copy_log.debug("%s: %s, %d bytes, on stream %d", pool, what, nbytes, queue)


def _read_failure(result: int, call: str) -> CudaError:
    """The error of a native read's failed driver ``call``."""
    return cuda_error(ErrorStatus.MEMORY_COPY_P2H, call, result)


def _mem_alloc(nbytes: int) -> int:
    return int(check(ErrorStatus.MEMORY_ALLOCATION, "cuMemAlloc", driver.cuMemAlloc(nbytes)))
