"""zyx 0.17's multi-queue micro-batch scheduler for one OpenCL device.

Commands (launches and copies) collect in a window that is enqueued when it holds
``window`` commands, or at a sync point: a read, ``launch_timed``, ``synchronize``, an
allocation that needs memory still being freed. A launch waits there as a plain tuple
``(program, args, work)``, appended by its program's ``submit`` and enqueued by its
``enqueue`` (``zyx_opencl.program`` says where those run: in C or in Python); an object
and a handful of Python calls per launch cost more than the rest of its bookkeeping.
Every other command is a ``Command``. Enqueuing a window:

1. each command goes to the queue that last wrote its first input, else to the
   least-loaded queue, and its read-after-write, write-after-write and write-after-read
   hazards against other queues become its event wait list (``zyx.streams``; ``place``);
2. where the scheduler is ``gated``, the first command of each queue also waits for the
   window's gate, a user event set complete once the whole window is enqueued. A driver
   that starts each command as it is enqueued (PoCL) would otherwise wake its idle worker
   threads once per command, and the host's enqueues cost more (benchmarks/opencl_c_loop.py
   times the schedule with and without the gate);
3. every queue the window used is flushed once. A command may wait on another queue's
   event only once that queue was flushed; flushing once per window rather than once per
   command is what the window saves.

Launches create no event: an event per command costs a driver host time per launch
(benchmarks/opencl_c_loop.py: one queue with and without). The dependency maps name points
on a queue by sequence number instead (``seq * queues + queue``, as zyx-cuda's streams do),
and an event for such a point is made only when something must wait for it: a marker
enqueued on its queue (in-order, so it completes after every command before it) when
another queue's command waits, or a released buffer's memory, or a copy's host memory. A
copy's own event serves as such a marker too. Markers are kept per queue until seen
complete, so an event lives only while it can still matter and is released (its last
reference dropped) exactly once.

A buffer released to zero waits for the window that may use it to be enqueued
(``free_after_window``); its memory is then freed once the points of its last uses
completed. Completion is polled, never waited for, at later flushes (the deferred list),
so a release never blocks the caller.

Errors are asynchronous: an enqueue that fails inside a window, or an event that ends in
an error status, is kept and the first one is raised at the next sync point; the device
stays usable after it.

The scheduler does not lock: its device and pool call it under their shared lock.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyopencl as cl

from zyx.backend import Arg, Buffer, Program
from zyx.errors import BackendError, ErrorStatus
from zyx.native import launch_layout
from zyx.streams import Action, Sequencer
from zyx_opencl.errors import backend_error, call_failure, event_failure
from zyx_opencl.native import enqueuer_type, window_loop
from zyx_opencl.waits import wait

Work = tuple[int, int, int]

_log = logging.getLogger("zyx.sched")
_launch_log = logging.getLogger("zyx.launch")


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


class Launchable(Protocol):
    """What the scheduler needs of a program to enqueue its launches
    (``zyx_opencl.program.OpenCLProgram``)."""

    name: str
    kernel: cl.Kernel
    local_size: Work
    bound: tuple[Arg, ...] | None
    """The arguments the kernel holds; ``bind`` sets them."""

    def bind(self, args: tuple[Arg, ...]) -> None: ...

    def enqueue(self, args: tuple[Arg, ...], work: Work) -> int:
        """Enqueue a launch from the window with its waits on the queue it chooses
        (``Scheduler.place``), and record it; return the queue."""
        ...


class Enqueuer(Protocol):
    """A kernel's launch path in C (zyx-opencl's native ``Enqueuer``): ``submit`` for
    ``OpenCLProgram.submit``, ``enqueue`` for ``Launchable.enqueue``."""

    appended: int
    enqueued: int

    def submit(self, args: Sequence[Arg]) -> None: ...

    def enqueue(self, args: tuple[Arg, ...], work: Work) -> int: ...


@dataclass(frozen=True)
class NativeKernel:
    """What zyx-opencl's native ``Enqueuer`` needs of a kernel besides its
    ``zyx.native.LaunchLayout`` (native.c reads these fields by name)."""

    schedule: Callable[[Sequence[Arg]], None]
    """The program's Python submit, for every launch the C path does not append."""
    issue: Callable[[tuple[Arg, ...], Work], int]
    """Its Python enqueue, for every launch the C path does not enqueue."""
    program: Any
    """The program, whose ``bound`` says what the kernel holds (``OpenCLProgram.bind``)."""
    failure: Callable[[str, int], BackendError]
    """The error of a failed call (``clSetKernelArg``, ``clEnqueueNDRangeKernel``)."""
    kernel: int
    """The ``cl_kernel``'s address."""
    local: Work
    used: list[bool]
    gate: list[cl.UserEvent]
    batch: list[Entry]
    window: int
    flush: Callable[[], None]


Entry = tuple[Launchable | None, Any, Work]
"""A command in the window: ``(program, args, work)`` for a launch, ``(None, command, _)``
for a ``Command``."""

_NO_WORK: Work = (0, 0, 0)


class Scheduler(Sequencer[cl.Event]):
    """The queues of one device, the window, and the dependency maps over them
    (``zyx.streams.Sequencer``: points by sequence number, marks, deferred actions)."""

    def __init__(
        self, context: cl.Context, device: cl.Device, queues: int, window: int, *, gate: bool
    ) -> None:
        super().__init__(queues)
        self.context = context
        self.gated = gate
        """Whether windows of two commands or more are held behind a gate."""
        self.queues = [cl.CommandQueue(context, device) for _ in range(queues)]
        self.timing_queue = cl.CommandQueue(
            context, device, cl.command_queue_properties.PROFILING_ENABLE
        )
        """Runs ``launch_timed``'s kernel, alone: profiling only where it is measured."""
        self.window = window
        self._batch: list[Entry] = []
        self._released: list[tuple[Buffer, Action]] = []
        """Buffers released while the window may still use them, with their frees."""
        self._used = [False] * queues
        """The queues the window being enqueued used so far."""
        self._gate: list[cl.UserEvent] = []
        """The gate of the window being enqueued, if it has one, as a wait list."""
        self._error: BackendError | None = None
        self._window_loop = window_loop()
        """``_enqueue_entries``'s loop in C (zyx-opencl's native module), or ``None``."""

    # ---- submitting ---------------------------------------------------------------------

    def append(self, program: Launchable, args: tuple[Arg, ...], work: Work) -> None:
        """Add a launch of ``program`` (its checked ``args``, its global ``work``) to the
        window; enqueue the window once it is full."""
        batch = self._batch
        batch.append((program, args, work))
        if len(batch) >= self.window:
            self.flush()

    def place(
        self, reads: Sequence[Buffer], writes: Sequence[Buffer]
    ) -> tuple[int, list[cl.Event] | None]:
        """The queue of a command of the window being enqueued that reads ``reads`` and
        writes ``writes`` (in param order), and the events it must wait for: its hazards on
        other queues, and the window's gate where it is the queue's first command."""
        tracker = self.tracker
        queue = tracker.choose(reads, writes)
        waits = tracker.waits(queue, reads, writes)
        events: list[cl.Event] = self.marks(waits) if waits else []
        if not self._used[queue]:
            self._used[queue] = True
            events += self._gate
        return queue, events or None

    def native_launcher(
        self,
        program: Program,
        schedule: Callable[[Sequence[Arg]], None],
        issue: Callable[[tuple[Arg, ...], Work], int],
        failure: Callable[[str, int], BackendError],
    ) -> Enqueuer | None:
        """zyx-opencl's native ``Enqueuer`` of ``program``, whose Python submit and enqueue
        are ``schedule`` and ``issue`` and whose failed calls raise ``failure(call,
        status)``; ``None`` without the native module, or where the program has more
        params than a ``LaunchLayout`` takes."""
        native_type = enqueuer_type()
        layout = launch_layout(program, self, [queue.int_ptr for queue in self.queues])
        if native_type is None or layout is None:
            return None
        kernel = NativeKernel(
            schedule=schedule,
            issue=issue,
            program=program,
            failure=failure,
            kernel=program.kernel.int_ptr,  # type: ignore[attr-defined]
            local=program.local_size,
            used=self._used,
            gate=self._gate,
            batch=self._batch,
            window=self.window,
            flush=self.flush,
        )
        enqueuer: Enqueuer = native_type(layout, kernel)
        return enqueuer

    def submit(self, command: Command) -> None:
        """Add ``command`` to the window; enqueue the window once it is full."""
        batch = self._batch
        batch.append((None, command, _NO_WORK))
        if len(batch) >= self.window:
            self.flush()

    def flush(self) -> None:
        """Enqueue the window, defer the frees of what was released during it until its
        uses complete, and free what is done."""
        batch = self._batch
        if batch:
            # The list stays: native Enqueuers append to it.
            entries = batch.copy()
            batch.clear()
            self._enqueue_batch(entries)
        released, self._released = self._released, []
        for buf, free in released:
            self._free_after_uses(buf, free)
        self.collect()

    def free_after_window(self, buf: Buffer, free: Action) -> None:
        """Run ``free`` once no command, enqueued or in the window, can still use ``buf``."""
        if self._batch:
            self._released.append((buf, free))
        else:
            self._free_after_uses(buf, free)

    # ---- sync points --------------------------------------------------------------------

    def run(self, command: Command) -> None:
        """Enqueue the window, then ``command`` (a read into host memory), and wait until it
        completed (``waits.wait``: Ctrl-C ends the wait, not the command); raise the first
        pending error before it and its own error."""
        self.flush()
        self.raise_pending()
        try:
            queue = self._enqueue(command, raising=True)
            self.queues[queue].flush()
            try:
                wait([self.mark(queue, self.issued[queue])])  # the command's own event
            except cl.Error as error:
                raise backend_error(command.status, error) from error
            # In order: everything before it on its queue completed too.
            self.done(queue)
        finally:
            self.collect()
        self.raise_pending()

    def time(self, program: Launchable, args: tuple[Arg, ...], work: Work) -> int:
        """Drain everything, run a launch of ``program`` alone, and return its device time
        in ns."""
        self.synchronize()
        try:
            if program.bound != args:
                program.bind(args)
            event = cl.enqueue_nd_range_kernel(
                self.timing_queue, program.kernel, work, program.local_size
            )
            wait([event])
        except cl.Error as error:
            raise call_failure(ErrorStatus.KERNEL_SYNC, error) from error
        return int(event.profile.end - event.profile.start)

    def synchronize(self) -> None:
        """Enqueue the window, wait for every queue, free everything released, and raise
        the first error since the last sync point."""
        self.flush()
        busy = [q for q in range(self.count) if self.issued[q] > self.reached[q]]
        # A mark at each busy queue's end: a command that failed shows in its status.
        marks = [self.mark(q, self.issued[q]) for q in busy]
        with contextlib.suppress(cl.Error):  # a failure is read from the marks below
            wait(marks)  # where Ctrl-C ends the wait; the queues' finish is then at once
        for queue in self.queues:
            try:
                queue.finish()
            except cl.Error as error:
                self._fail(call_failure(ErrorStatus.KERNEL_SYNC, error))
        for q in busy:  # every mark is complete now: polling reads each status once
            self.poll(q)
        self.finished()
        self.raise_pending()

    def reclaim(self) -> None:
        """Enqueue the window and wait until every buffer released so far is freed."""
        self.flush()
        super().reclaim()

    def raise_pending(self) -> None:
        """Raise the first error kept since the last sync point, and forget it."""
        error, self._error = self._error, None
        if error is not None:
            raise error

    def batched(self) -> int:
        """Commands in the window, not enqueued yet."""
        return len(self._batch)

    # ---- inside ---------------------------------------------------------------------------

    def _enqueue_batch(self, batch: list[Entry]) -> None:
        """Enqueue each command on its queue after its waits and behind the window's gate,
        open the gate, then flush the queues used."""
        for queue in range(self.count):
            self.poll(queue)  # the least-loaded choice learns which queues are idle
        used, gate = self._used, self._gate
        used[:] = [False] * len(used)
        if self.gated and len(batch) > 1:  # a gate for one command only adds its own cost
            gate.append(cl.UserEvent(self.context))
        try:
            self._enqueue_entries(batch)
        finally:
            if gate:
                gate.pop().set_status(cl.command_execution_status.COMPLETE)
        for cl_queue, flag in zip(self.queues, used):
            if flag:
                cl_queue.flush()

    def _enqueue_entries(self, batch: list[Entry]) -> None:
        log = _launch_log.isEnabledFor(logging.DEBUG)
        if self._window_loop is not None and not log:
            self._window_loop(batch, self._enqueue_command, self._failed)
        else:
            for program, payload, work in batch:
                try:
                    if program is None:
                        queue = self._enqueue_command(payload)
                    else:
                        queue = program.enqueue(payload, work)
                except Exception as error:
                    self._failed(error)
                    continue
                if log and queue >= 0:
                    _launch_log.debug("%s on queue %d", _describe(program, payload, work), queue)
        if _log.isEnabledFor(logging.DEBUG):
            _log.debug("window of %d commands on queues %s", len(batch), self.tracker.load)

    def _enqueue_command(self, command: Command) -> int:
        return self._enqueue(command, raising=False)

    def _failed(self, error: BaseException) -> None:
        """Keep the error of an enqueue in the window, to raise at the next sync point: the
        window goes on, as the commands after it were promised to run. Raise what is not
        an ``Exception`` (``KeyboardInterrupt``)."""
        if not isinstance(error, Exception):
            raise error
        self._fail(backend_error(ErrorStatus.KERNEL_SYNC, error))

    def _enqueue(self, command: Command, *, raising: bool) -> int:
        """Enqueue ``command`` with its waits on its queue; return the queue, or -1 where the
        enqueue failed (the error is kept, or raised when ``raising``)."""
        reads, writes = command.reads, command.writes
        queue, wait_for = self.place(reads, writes)
        try:
            event = command.enqueue(self.queues[queue], wait_for)
        except Exception as error:
            if command.done is not None:
                command.done()
            kept = backend_error(command.status, error)
            if raising:
                raise kept  # noqa: B904 (backend_error chained it to error)
            self._fail(kept)
            return -1
        seq = self.commit(queue, reads, writes)
        self.marked(queue, seq, event)  # its event marks its point
        if command.done is not None:
            self.after((seq * self.count + queue,), command.done)
        return queue

    def _free_after_uses(self, buf: Buffer, free: Action) -> None:
        self.after(self.tracker.forget(buf).values(), free)

    # ---- marks (Sequencer) ------------------------------------------------------------------

    def record(self, queue: int) -> cl.Event:
        """A marker enqueued now, which covers everything enqueued on ``queue`` so far."""
        cl_queue = self.queues[queue]
        marker = cl.enqueue_marker(cl_queue)
        cl_queue.flush()  # another queue will wait for it: it must reach the device
        return marker

    def settled(self, mark: cl.Event) -> bool:
        """Whether ``mark`` completed or failed; a failure is kept as the pending error."""
        status: int = mark.command_execution_status
        if status < 0:
            self._fail(event_failure(status))
        return status <= 0

    def block(self, mark: cl.Event) -> None:
        try:
            wait([mark])
        except cl.Error as error:
            self._fail(call_failure(ErrorStatus.KERNEL_SYNC, error))

    def _fail(self, error: BackendError) -> None:
        if self._error is None:
            self._error = error
        elif _log.isEnabledFor(logging.DEBUG):
            _log.debug("later error, not raised: %s", error)


def _describe(program: Launchable | None, payload: Any, work: Work) -> str:
    return f"<launch {program.name} {work}>" if program is not None else repr(payload)
