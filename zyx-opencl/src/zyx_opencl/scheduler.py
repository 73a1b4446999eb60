"""zyx 0.17's multi-queue micro-batch scheduler for one OpenCL device.

Commands (launches and copies) collect in a window that is enqueued when it holds
``window`` commands, or at a sync point: a read, ``launch_timed``, ``synchronize``, an
allocation that needs memory still being freed. Enqueuing a window:

1. each command goes to the queue that last wrote its first input, else to the
   least-loaded queue, and its read-after-write, write-after-write and write-after-read
   hazards against other queues become its event wait list (``zyx.streams``);
2. every queue the window used is flushed once. A command may wait on another queue's
   event only once that queue was flushed; flushing once per window rather than once per
   command is what the window saves.

The writer and last-use maps persist across windows. They hold at most one event per
buffer and queue, and the scheduler the last event of each queue, so an event lives only
while it can still matter and is released (its last reference dropped) exactly once.

A buffer released to zero is retired after the window that may use it was enqueued: its
memory is freed once the last events that use it completed. Completion is polled, never
waited for, at later flushes (the deferred list), so a release never blocks the caller.

Errors are asynchronous: an enqueue that fails inside a window, or an event that ends in
an error status, is kept and the first one is raised at the next sync point; the device
stays usable after it.

One scheduler serves one thread; zyx's devices are not thread-safe.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import pyopencl as cl

from zyx.backend import Buffer
from zyx.errors import BackendError, ErrorStatus
from zyx.streams import DependencyTracker

Action = Callable[[], None]

_log = logging.getLogger("zyx.sched")
_launch_log = logging.getLogger("zyx.launch")

_OUT_OF_MEMORY = frozenset({
    cl.status_code.MEM_OBJECT_ALLOCATION_FAILURE,
    cl.status_code.OUT_OF_RESOURCES,
    cl.status_code.OUT_OF_HOST_MEMORY,
})  # fmt: skip
"""Failures of memory a driver allocates lazily, at the first command that uses it."""

_STATUS_NAMES = {
    getattr(cl.status_code, name): name for name in dir(cl.status_code) if name.isupper()
}


class Command:
    """One unit of work for a queue: the buffers it reads and writes, the status its
    failure reports, and ``done``, an action to run once it completed (or failed).
    A subclass defines ``status`` and ``done`` as slots or as class attributes."""

    __slots__ = ("reads", "writes")

    reads: Sequence[Buffer]
    writes: Sequence[Buffer]
    status: ErrorStatus
    done: Action | None

    def enqueue(self, queue: cl.CommandQueue, wait_for: list[cl.Event] | None) -> cl.Event:
        """Enqueue on ``queue`` after the events ``wait_for``; return the command's event."""
        raise NotImplementedError


class Scheduler:
    """The queues of one device, the window, and the dependency maps over them."""

    def __init__(self, context: cl.Context, device: cl.Device, queues: int, window: int) -> None:
        self.queues = [cl.CommandQueue(context, device) for _ in range(queues)]
        self.timing_queue = cl.CommandQueue(
            context, device, cl.command_queue_properties.PROFILING_ENABLE
        )
        """Runs ``launch_timed``'s kernel, alone: profiling only where it is measured."""
        self.window = window
        self.tracker: DependencyTracker[cl.Event] = DependencyTracker(queues)
        self._batch: list[Command] = []
        self._retiring: list[tuple[Buffer, Action]] = []
        """Buffers released while the window may still use them."""
        self._deferred: list[tuple[list[cl.Event], Action]] = []
        """Actions waiting for events, oldest first."""
        self._tails: list[cl.Event | None] = [None] * queues
        """The last event enqueued on each queue, until it is seen complete."""
        self._error: BackendError | None = None

    # ---- submitting ---------------------------------------------------------------------

    def submit(self, command: Command) -> None:
        """Add ``command`` to the window; enqueue the window once it is full."""
        batch = self._batch
        batch.append(command)
        if len(batch) >= self.window:
            self.flush()

    def flush(self) -> None:
        """Enqueue the window, retire what was released during it, and free what is done."""
        batch = self._batch
        if batch:
            self._batch = []
            self._enqueue_batch(batch)
        retiring, self._retiring = self._retiring, []
        for buf, free in retiring:
            self._retire(buf, free)
        self._reap()

    def retire(self, buf: Buffer, free: Action) -> None:
        """Run ``free`` once no command, enqueued or in the window, can still use ``buf``."""
        if self._batch:
            self._retiring.append((buf, free))
        else:
            self._retire(buf, free)

    # ---- sync points --------------------------------------------------------------------

    def run(self, command: Command) -> None:
        """Enqueue the window, then ``command`` (a blocking one: a read); raise the first
        pending error before it and its own error."""
        self.flush()
        self.raise_pending()
        try:
            self._enqueue(command, raising=True)
        finally:
            self._reap()
        self.raise_pending()

    def time(self, command: Command) -> int:
        """Drain everything, run ``command`` alone, and return its device time in ns."""
        self.synchronize()
        try:
            event = command.enqueue(self.timing_queue, None)
            event.wait()
        except cl.Error as error:
            raise failure(command.status, error) from error
        return int(event.profile.end - event.profile.start)

    def synchronize(self) -> None:
        """Enqueue the window, wait for every queue, free everything released, and raise
        the first error since the last sync point."""
        self.flush()
        for queue in self.queues:
            try:
                queue.finish()
            except cl.Error as error:
                self._fail(failure(ErrorStatus.KERNEL_SYNC, error))
        for tail in self._tails:
            if tail is not None:
                self._settled(tail)
        self._tails = [None] * len(self.queues)
        self.tracker.reset()
        self.reclaim()
        self.raise_pending()

    def reclaim(self) -> None:
        """Enqueue the window and wait until every buffer released so far is freed."""
        self.flush()
        deferred, self._deferred = self._deferred, []
        for events, action in deferred:
            for event in events:
                try:
                    event.wait()
                except cl.Error as error:
                    self._fail(failure(ErrorStatus.KERNEL_SYNC, error))
            action()

    def raise_pending(self) -> None:
        """Raise the first error kept since the last sync point, and forget it."""
        error, self._error = self._error, None
        if error is not None:
            raise error

    def batched(self) -> int:
        """Commands in the window, not enqueued yet."""
        return len(self._batch)

    def deferred(self) -> int:
        """Actions (frees, releases of copy sources) still waiting for their events."""
        return len(self._deferred)

    # ---- inside ---------------------------------------------------------------------------

    def _enqueue_batch(self, batch: list[Command]) -> None:
        self._mark_idle()
        used = [False] * len(self.queues)
        log = _launch_log.isEnabledFor(logging.DEBUG)
        for command in batch:
            queue = self._enqueue(command, raising=False)
            if queue >= 0:
                used[queue] = True
                if log:
                    _launch_log.debug("%r on queue %d", command, queue)
        for cl_queue, flag in zip(self.queues, used):
            if flag:
                cl_queue.flush()
        if _log.isEnabledFor(logging.DEBUG):
            _log.debug("window of %d commands on queues %s", len(batch), self.tracker.load)

    def _enqueue(self, command: Command, *, raising: bool) -> int:
        """Enqueue ``command`` with its waits on its queue; return the queue, or -1 where the
        enqueue failed (the error is kept, or raised when ``raising``)."""
        tracker = self.tracker
        reads, writes = command.reads, command.writes
        queue = tracker.choose(reads, writes)
        waits = tracker.waits(queue, reads, writes)
        try:
            event = command.enqueue(self.queues[queue], waits or None)
        except cl.Error as error:
            if command.done is not None:
                command.done()
            if raising:
                raise failure(command.status, error) from error
            self._fail(failure(command.status, error))
            return -1
        tracker.commit(queue, event, reads, writes)
        self._tails[queue] = event
        if command.done is not None:
            self._deferred.append(([event], command.done))
        return queue

    def _mark_idle(self) -> None:
        """Tell the tracker which queues finished all their work (for least-loaded choice)."""
        tails = self._tails
        for queue, tail in enumerate(tails):
            if tail is not None and self._settled(tail):
                self.tracker.idle(queue)
                tails[queue] = None

    def _retire(self, buf: Buffer, free: Action) -> None:
        events = list(self.tracker.forget(buf).values())
        if events:
            self._deferred.append((events, free))
        else:
            free()

    def _reap(self) -> None:
        """Run the deferred actions whose events completed, oldest first, up to the first
        one still waiting (later ones wait for a later flush: polling stays cheap)."""
        deferred = self._deferred
        done = 0
        for events, action in deferred:
            if not all(self._settled(event) for event in events):
                break
            action()
            done += 1
        del deferred[:done]

    def _settled(self, event: cl.Event) -> bool:
        """Whether ``event`` completed or failed; a failure is kept as the pending error."""
        status: int = event.command_execution_status
        if status < 0:
            name = _STATUS_NAMES.get(status, str(status))
            self._fail(_failure(ErrorStatus.KERNEL_SYNC, status, f"a command ended in {name}"))
        return status <= 0

    def _fail(self, error: BackendError) -> None:
        if self._error is None:
            self._error = error
        elif _log.isEnabledFor(logging.DEBUG):
            _log.debug("later error, not raised: %s", error)


def failure(status: ErrorStatus, error: cl.Error) -> BackendError:
    """The ``BackendError`` for an OpenCL call that raised ``error``."""
    return _failure(status, getattr(error, "code", None), str(error))


def _failure(status: ErrorStatus, code: int | None, message: str) -> BackendError:
    # A lazily allocating driver reports out-of-memory at the first command using a buffer.
    if code in _OUT_OF_MEMORY:
        status = ErrorStatus.MEMORY_ALLOCATION
    return BackendError(status, f"OpenCL: {message}")
