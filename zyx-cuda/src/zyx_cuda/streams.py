"""A device's CUDA streams, scheduled by ``zyx.streams.Sequencer``.

Commands are named by per-stream sequence numbers, so committing one costs no driver call
and no event. Events are recorded lazily, only when something must wait for a point on a
stream: a cross-stream hazard (``cuStreamWaitEvent``), a deferred free, another device or
an external consumer. Events seen complete are recorded again rather than destroyed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from cuda.bindings import driver

from zyx.backend import Buffer
from zyx.errors import ErrorStatus
from zyx.streams import Sequencer
from zyx_cuda.errors import check, cuda_error

_NOT_READY = driver.CUresult.CUDA_ERROR_NOT_READY
_NO_TIMING = driver.CUevent_flags.CU_EVENT_DISABLE_TIMING
_wait_event = driver.cuStreamWaitEvent


class Streams(Sequencer[Any]):
    """``count`` non-blocking streams and the events recorded on them.

    Every method expects the device's context to be current and its lock held.
    """

    def __init__(self, count: int) -> None:
        super().__init__(count)
        create = driver.cuStreamCreate
        flags = driver.CUstream_flags.CU_STREAM_NON_BLOCKING
        self.handles = [
            check(ErrorStatus.INITIALIZATION, "cuStreamCreate", create(flags)) for _ in range(count)
        ]
        self.addresses = tuple(int(handle) for handle in self.handles)
        """The streams' ``CUstream`` handles as ints, for native calls."""
        self._spare: list[Any] = []

    # ---- the hot path -------------------------------------------------------------------

    def select(self, reads: Sequence[Buffer], writes: Sequence[Buffer]) -> int:
        """The stream for a command that reads ``reads`` and writes ``writes`` (in param
        order), with its cross-stream waits already enqueued (``DependencyTracker.choose``
        says which stream)."""
        tracker = self.tracker
        queue = tracker.choose(reads, writes)
        waits = tracker.waits(queue, reads, writes)
        if waits:
            self.order_before(self.handles[queue], waits)
        return queue

    # ---- events -------------------------------------------------------------------------

    def record(self, queue: int) -> Any:
        return self._record_on(self.handles[queue])

    def settled(self, mark: Any) -> bool:
        (result,) = driver.cuEventQuery(mark)
        if result == _NOT_READY:
            return False
        if result:
            raise cuda_error(ErrorStatus.KERNEL_SYNC, "cuEventQuery", result)
        return True

    def block(self, mark: Any) -> None:
        check(ErrorStatus.KERNEL_SYNC, "cuEventSynchronize", driver.cuEventSynchronize(mark))

    def recycle(self, mark: Any) -> None:
        self._spare.append(mark)

    def _record_on(self, stream: Any) -> Any:
        """A spare event (else a new one) recorded on ``stream``."""
        if self._spare:
            event = self._spare.pop()
        else:
            event = check(
                ErrorStatus.INITIALIZATION, "cuEventCreate", driver.cuEventCreate(_NO_TIMING)
            )
        check(ErrorStatus.KERNEL_LAUNCH, "cuEventRecord", driver.cuEventRecord(event, stream))
        return event

    def events(self) -> int:
        """Events created, spare or held (for leak tests)."""
        return len(self._spare) + self.held()[0]

    # ---- other streams ------------------------------------------------------------------

    def order_before(self, stream: Any, tokens: Iterable[int]) -> None:
        """Make ``stream`` (one of these, another device's, a consumer's) wait for the points
        ``tokens`` name: one wait per source stream."""
        for mark in self.marks(tokens):
            (result,) = _wait_event(stream, mark, 0)
            if result:
                raise cuda_error(ErrorStatus.KERNEL_LAUNCH, "cuStreamWaitEvent", result)

    def order_after(
        self, stream: Any, reads: Iterable[Buffer] = (), writes: Iterable[Buffer] = ()
    ) -> None:
        """Work already enqueued on a foreign ``stream`` of this context (a producer's)
        reads or writes these buffers: make later commands on them wait for it, as if it
        ran on one of these streams."""
        event = self._record_on(stream)
        self.order_after_event(event, reads, writes)
        # The wait captured the event's state; it can be recorded again at once.
        self._spare.append(event)

    def order_after_event(
        self, event: Any, reads: Iterable[Buffer] = (), writes: Iterable[Buffer] = ()
    ) -> None:
        """Work that is complete when ``event`` is (of any context: another device's copy)
        reads or writes these buffers: make later commands on them wait for it."""
        queue = self.tracker.choose(())
        check(
            ErrorStatus.KERNEL_LAUNCH,
            "cuStreamWaitEvent",
            _wait_event(self.handles[queue], event, 0),
        )
        self.commit(queue, reads, writes)

    # ---- sync points --------------------------------------------------------------------

    def synchronize(self) -> None:
        """Wait for every stream; raises the first asynchronous error (KernelSync)."""
        for queue, stream in enumerate(self.handles):
            if self.issued[queue] > self.reached[queue]:
                check(
                    ErrorStatus.KERNEL_SYNC,
                    "cuStreamSynchronize",
                    driver.cuStreamSynchronize(stream),
                )
        self.finished()
