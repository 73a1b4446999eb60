"""A device's CUDA streams, scheduled by ``zyx.streams.DependencyTracker``.

The tracker's tokens are per-stream sequence numbers, packed into one int
(``seq * count + stream``), so committing a command costs no driver call and no event.
Events are recorded lazily, only when something must wait for a point on a stream: a
cross-stream hazard (``cuStreamWaitEvent``), a deferred free, an external consumer. A
recorded event covers every command submitted to its stream so far, so one event serves
every later wait for an earlier point, and waiting on a newer point than needed is only
conservative, never wrong.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from cuda.bindings import driver

from zyx.backend import Buffer
from zyx.errors import ErrorStatus
from zyx.streams import DependencyTracker, unreached
from zyx_cuda.errors import check, cuda_error

_NOT_READY = driver.CUresult.CUDA_ERROR_NOT_READY
_NO_TIMING = driver.CUevent_flags.CU_EVENT_DISABLE_TIMING
_wait_event = driver.cuStreamWaitEvent


class Streams:
    """``count`` non-blocking streams, their sequence numbers, and lazily recorded events.

    Every method expects the device's context to be current.
    """

    def __init__(self, count: int) -> None:
        create = driver.cuStreamCreate
        flags = driver.CUstream_flags.CU_STREAM_NON_BLOCKING
        self.count = count
        self.handles = [
            check(ErrorStatus.INITIALIZATION, "cuStreamCreate", create(flags)) for _ in range(count)
        ]
        self.tracker: DependencyTracker[int] = DependencyTracker(count)
        self.issued = [0] * count
        """Sequence number of the last command submitted to each stream."""
        self.reached = [0] * count
        """Highest sequence number known to have completed on each stream."""
        self._marks: list[deque[tuple[int, Any]]] = [deque() for _ in range(count)]
        self._spare: list[Any] = []
        self._deferred: list[tuple[list[tuple[int, int]], Callable[[], None]]] = []

    # ---- the hot path -------------------------------------------------------------------

    def select(self, reads: Sequence[Buffer], writes: Sequence[Buffer]) -> int:
        """The stream for a command that reads ``reads`` and writes ``writes`` (in param
        order), with its cross-stream waits already enqueued (``DependencyTracker.choose``
        says which stream)."""
        tracker = self.tracker
        queue = tracker.choose(reads, writes)
        waits = tracker.waits(queue, reads, writes)
        if waits:
            self._wait(self.handles[queue], waits)
        return queue

    def commit(self, queue: int, reads: Iterable[Buffer], writes: Iterable[Buffer]) -> None:
        """Record the command just enqueued on ``queue``."""
        seq = self.issued[queue] + 1
        self.issued[queue] = seq
        self.tracker.commit(queue, seq * self.count + queue, reads, writes)

    def inline(
        self,
        reads: Sequence[str],
        writes: Sequence[str],
        enqueue: Sequence[str],
        *,
        address: bool = False,
    ) -> tuple[list[str], dict[str, object]]:
        """``select``, then the ``enqueue`` lines (which find the stream in ``stream``: its
        ``CUstream``, or its address as an int where ``address``), then ``commit``, as lines
        of Python for a launch function generated per program (see
        ``DependencyTracker.inline``); returns them and the names they use."""
        plan = self.tracker.inline(reads, writes)
        lines = [
            *plan.choose,
            "if waits:",
            "    streams_wait(streams_handles[queue], waits)",
            f"stream = streams_{'addresses' if address else 'handles'}[queue]",
            *enqueue,
            "seq = streams_issued[queue] + 1",
            "streams_issued[queue] = seq",
            f"token = seq * {self.count} + queue",
            *plan.commit,
        ]
        names = {
            **plan.names,
            "streams_wait": self._wait,
            "streams_handles": self.handles,
            "streams_addresses": [int(handle) for handle in self.handles],
            "streams_issued": self.issued,
        }
        return lines, names

    # ---- events -------------------------------------------------------------------------

    def _wait(self, stream: Any, tokens: Iterable[int]) -> None:
        """Make ``stream`` wait for the points ``tokens`` name (one wait per source stream)."""
        for queue, seq in unreached(tokens, self.count, self.reached).items():
            (result,) = _wait_event(stream, self._event(queue, seq), 0)
            if result:
                raise cuda_error(ErrorStatus.KERNEL_LAUNCH, "cuStreamWaitEvent", result)

    def _event(self, queue: int, seq: int) -> Any:
        """An event that completes no earlier than command ``seq`` of ``queue``."""
        marks = self._marks[queue]
        for covered, event in marks:
            if covered >= seq:
                return event
        self.poll(queue)
        event = self._spare.pop() if self._spare else self._new_event()
        check(
            ErrorStatus.KERNEL_LAUNCH,
            "cuEventRecord",
            driver.cuEventRecord(event, self.handles[queue]),
        )
        marks.append((self.issued[queue], event))
        return event

    def _new_event(self) -> Any:
        return check(ErrorStatus.INITIALIZATION, "cuEventCreate", driver.cuEventCreate(_NO_TIMING))

    def poll(self, queue: int) -> None:
        """Advance ``reached[queue]`` past the events that have completed, without blocking."""
        marks = self._marks[queue]
        while marks:
            covered, event = marks[0]
            (result,) = driver.cuEventQuery(event)
            if result == _NOT_READY:
                break
            if result:
                raise cuda_error(ErrorStatus.KERNEL_SYNC, "cuEventQuery", result)
            marks.popleft()
            self._spare.append(event)
            self.reached[queue] = max(self.reached[queue], covered)
        if self.reached[queue] == self.issued[queue]:
            self.tracker.idle(queue)

    def done(self, queue: int) -> None:
        """Everything submitted to ``queue`` completed (the caller synchronized with it)."""
        self.reached[queue] = self.issued[queue]
        self.poll(queue)

    # ---- deferred work ------------------------------------------------------------------

    def after(self, uses: Mapping[int, int], action: Callable[[], None]) -> None:
        """Run ``action`` once every point in ``uses`` (stream to token) has completed: now,
        if they already have, else at a later ``collect`` or ``synchronize``."""
        points = list(unreached(uses.values(), self.count, self.reached).items())
        for queue, seq in points:
            self._event(queue, seq)
        if points:
            self._deferred.append((points, action))
        else:
            action()

    def collect(self) -> None:
        """Run the deferred actions whose points have completed. Never blocks."""
        if not self._deferred:
            return
        for queue in {q for pending, _ in self._deferred for q, _ in pending}:
            self.poll(queue)
        reached = self.reached
        waiting: list[tuple[list[tuple[int, int]], Callable[[], None]]] = []
        ready: list[tuple[list[tuple[int, int]], Callable[[], None]]] = []
        for entry in self._deferred:
            done = all(seq <= reached[queue] for queue, seq in entry[0])
            (ready if done else waiting).append(entry)
        self._deferred = waiting
        for _, action in ready:
            action()

    def now(self) -> dict[int, int]:
        """Per busy stream, the token of its last command: "everything submitted so far"."""
        return {
            q: seq * self.count + q for q, seq in enumerate(self.issued) if seq > self.reached[q]
        }

    # ---- other streams ------------------------------------------------------------------

    def order_before(self, stream: Any, uses: Mapping[int, int]) -> None:
        """Make a foreign ``stream`` (another device's, a consumer's) wait for ``uses``."""
        self._wait(stream, uses.values())

    def order_after(
        self, stream: Any, reads: Iterable[Buffer] = (), writes: Iterable[Buffer] = ()
    ) -> None:
        """Work already enqueued on a foreign ``stream`` of this context (a producer's)
        reads or writes these buffers: make later commands on them wait for it, as if it
        ran on one of these streams."""
        event = self._spare.pop() if self._spare else self._new_event()
        check(ErrorStatus.KERNEL_LAUNCH, "cuEventRecord", driver.cuEventRecord(event, stream))
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

    def mark(self, queue: int) -> Any:
        """An event that completes once everything submitted to ``queue`` so far has (for
        another device to wait on; it is recycled once seen complete)."""
        return self._event(queue, self.issued[queue])

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
            self.reached[queue] = self.issued[queue]
            self._spare.extend(event for _, event in self._marks[queue])
            self._marks[queue].clear()
        self.tracker.reset()
        deferred, self._deferred = self._deferred, []
        for _, action in deferred:
            action()
