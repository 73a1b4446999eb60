"""Multi-queue dependency tracking, shared by every backend with several in-order queues.

zyx 0.17's OpenCL scheduling, made backend-agnostic: a command goes to the queue that last
wrote its first input (else one of its outputs), else to the least-loaded queue;
read-after-write, write-after-write and write-after-read hazards against *other* queues
become waits. Commands on one queue are ordered by the queue itself and need no waits.

The tracker deals in tokens: whatever a backend uses to name a completed point on a queue
(``Sequencer``'s backends use sequence numbers). It never touches native handles. A
buffer's record lives in its ``Buffer.tracking`` slot (an attribute load on the hot path,
not a map lookup); the tracker also keeps the set of buffers it tracks, for ``reset``.

``Sequencer`` adds what backends whose queues are in order share: commands named by
sequence number, native events made only when something waits, and actions deferred until
points complete.

These methods are the specification of ``zyx/tracker.c``, which makes the same decisions
for a backend's native launch path, on the same records, in place. Neither locks: a
device calls them under its lock (``zyx.backend.Device.lock``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")


def unreached(tokens: Iterable[int], queues: int, reached: Sequence[int]) -> dict[int, int]:
    """Per queue, the latest point among ``tokens`` not known to have completed.

    For backends whose tokens are sequence numbers (``seq * queues + queue``, zyx-cuda's and
    zyx-opencl's): a point ``seq`` of ``queue`` has completed once ``reached[queue]`` is at
    least ``seq``. On an in-order queue waiting for the latest point covers the earlier
    ones, so the result holds one ``seq`` per queue."""
    latest: dict[int, int] = {}
    for token in tokens:
        seq, queue = divmod(token, queues)
        if seq > reached[queue] and seq > latest.get(queue, 0):
            latest[queue] = seq
    return latest


class Tracked(Protocol):
    """What the tracker schedules: a ``zyx.backend.Buffer``. Its ``tracking`` slot holds the
    buffer's access record, so the hot path reads an attribute instead of looking the
    buffer up in a map. A buffer is only ever tracked by its own device's tracker."""

    tracking: Any


class Access(Generic[T]):
    """Who touched one buffer since its last write: a buffer's ``tracking`` record. Its
    attributes are ``__slots__``, which native launch paths read in place."""

    __slots__ = ("writer_queue", "writer", "readers")

    def __init__(self) -> None:
        self.writer_queue = -1
        self.writer: T | None = None
        self.readers: dict[int, T] = {}


class DependencyTracker(Generic[T]):
    """Per-buffer writer and last-use records over ``queues`` in-order queues.

    The records persist across batches (windows); ``forget`` drops a buffer's, ``reset``
    everyone's (after the device was synchronized).
    """

    def __init__(self, queues: int) -> None:
        if queues < 1:
            raise ValueError(f"need at least one queue, got {queues}")
        self.queues = queues
        self.load = [0] * queues
        """Commands submitted to each queue since it was last known idle."""
        self._tracked: set[Tracked] = set()
        """The buffers whose ``tracking`` holds a record of this tracker."""

    def choose(self, reads: Sequence[Tracked], writes: Sequence[Tracked] = ()) -> int:
        """The queue that last wrote the first input; else the queue that last wrote one of
        the outputs (its order then puts this write after that one without a wait); else
        the least-loaded queue."""
        access: Access[T] | None
        if reads:
            access = reads[0].tracking
            if access is not None and access.writer_queue >= 0:
                return access.writer_queue
        for buf in writes:
            access = buf.tracking
            if access is not None and access.writer_queue >= 0:
                return access.writer_queue
        load = self.load
        return load.index(min(load))

    def waits(self, queue: int, reads: Iterable[Tracked], writes: Iterable[Tracked]) -> list[T]:
        """Tokens on other queues that a command on ``queue`` must wait for."""
        waits: list[T] = []
        # Plain loops, no generators: this runs on every launch (a microsecond counts).
        for buf in reads:
            access = buf.tracking
            if access is not None and access.writer_queue != queue and access.writer_queue >= 0:
                waits.append(access.writer)
        for buf in writes:
            access = buf.tracking
            if access is None:
                continue
            if access.writer_queue != queue and access.writer_queue >= 0:
                waits.append(access.writer)
            if access.readers:
                for q, token in access.readers.items():
                    if q != queue:
                        waits.append(token)
        return waits

    def commit(
        self, queue: int, token: T, reads: Iterable[Tracked], writes: Iterable[Tracked]
    ) -> None:
        """Record a command on ``queue``, complete when ``token`` is, with these accesses."""
        self.load[queue] += 1
        for buf in reads:
            access = buf.tracking
            if access is None:
                access = self.track(buf)
            access.readers[queue] = token
        for buf in writes:
            access = buf.tracking
            if access is None:
                access = self.track(buf)
            access.writer_queue = queue
            access.writer = token
            if access.readers:
                access.readers.clear()

    def last_uses(self, buf: Tracked) -> dict[int, T]:
        """Per queue, the last token that used ``buf``: all must complete before it is freed."""
        access = buf.tracking
        if access is None:
            return {}
        uses = dict(access.readers)
        if access.writer_queue >= 0 and access.writer_queue not in uses:
            uses[access.writer_queue] = access.writer
        return uses

    def forget(self, buf: Tracked) -> dict[int, T]:
        """Drop ``buf``'s record; returns its ``last_uses``."""
        uses = self.last_uses(buf)
        buf.tracking = None
        self._tracked.discard(buf)
        return uses

    def idle(self, queue: int) -> None:
        """``queue`` finished everything submitted to it."""
        self.load[queue] = 0

    def reset(self) -> None:
        """Every queue finished everything: forget all accesses."""
        for buf in self._tracked:
            buf.tracking = None
        self._tracked.clear()
        self.load[:] = [0] * self.queues  # in place: native launchers hold this list

    def tracked(self) -> int:
        """How many buffers have a record (for leak tests)."""
        return len(self._tracked)

    def track(self, buf: Tracked) -> Access[T]:
        """Give ``buf`` a new, empty record and return it."""
        access: Access[T] = Access()
        buf.tracking = access
        self._tracked.add(buf)
        return access


E = TypeVar("E")
Action = Callable[[], None]


class Sequencer(ABC, Generic[E]):
    """Commands on ``count`` in-order queues, each named by its sequence number on its
    queue, with a ``DependencyTracker`` over them and native events made only on demand.

    What zyx-cuda's streams and zyx-opencl's scheduler share. A command's token is
    ``seq * count + queue``, so recording one costs no native call. An event ("mark") for a
    point is made only when something must wait for it or see it complete: a wait across
    queues, a deferred action. A mark made now covers every command enqueued on its queue
    so far (the queue is in order), so one serves every later wait for an earlier point.
    Marks are kept per queue until seen complete; ``reached`` then advances past them.

    A backend supplies the native side: ``record`` (a new mark at the end of a queue),
    ``settled`` (has a mark completed, without blocking), ``block`` (wait for one), and
    ``recycle`` (a mark no longer needed).
    """

    def __init__(self, count: int) -> None:
        self.count = count
        self.tracker: DependencyTracker[int] = DependencyTracker(count)
        self.issued = [0] * count
        """Sequence number of the last command enqueued on each queue."""
        self.reached = [0] * count
        """Highest sequence number known to have completed on each queue."""
        self._marks: list[deque[tuple[int, E]]] = [deque() for _ in range(count)]
        """Per queue, marks not yet seen complete, with the sequence number each covers."""
        self._deferred: list[tuple[list[tuple[int, int]], Action]] = []
        """Actions waiting for points ``(queue, seq)``."""

    # ---- the backend's side -------------------------------------------------------------

    @abstractmethod
    def record(self, queue: int) -> E:
        """A new mark: an event at the end of ``queue`` that another queue may wait for."""

    @abstractmethod
    def settled(self, mark: E) -> bool:
        """Whether ``mark`` completed (or failed: the backend raises or keeps the error)."""

    @abstractmethod
    def block(self, mark: E) -> None:
        """Wait until ``mark`` completed."""

    def recycle(self, mark: E) -> None:
        """``mark`` is seen complete and no longer held (a backend may reuse it)."""

    # ---- points ---------------------------------------------------------------------------

    def commit(self, queue: int, reads: Iterable[Tracked], writes: Iterable[Tracked]) -> int:
        """Record a command just enqueued on ``queue``; returns its sequence number."""
        seq = self.issued[queue] + 1
        self.issued[queue] = seq
        self.tracker.commit(queue, seq * self.count + queue, reads, writes)
        return seq

    def marks(self, tokens: Iterable[int]) -> list[E]:
        """Marks to wait for before the points ``tokens`` name: one per queue, for the latest
        point not yet reached. Each such queue is polled first: a point that completed since
        its mark was made (an upload no one synchronized) needs no wait, and once it is seen
        reached the launches after it need none either (the native paths take only those)."""
        marks = []
        for queue, seq in unreached(tokens, self.count, self.reached).items():
            self.poll(queue)
            if seq > self.reached[queue]:
                marks.append(self.mark(queue, seq))
        return marks

    def mark(self, queue: int, seq: int) -> E:
        """A mark that completes no earlier than command ``seq`` of ``queue``: one held
        already, else a new one."""
        marks = self._marks[queue]
        for covered, mark in marks:
            if covered >= seq:
                return mark
        self.poll(queue)  # a backend may reuse what completed
        mark = self.record(queue)
        marks.append((self.issued[queue], mark))
        return mark

    def marked(self, queue: int, seq: int, mark: E) -> None:
        """``mark`` completes with command ``seq`` of ``queue`` (a copy's own event)."""
        self._marks[queue].append((seq, mark))

    def poll(self, queue: int) -> None:
        """Advance ``reached[queue]`` past the marks seen complete, without blocking; a queue
        that caught up is idle for the tracker's least-loaded choice."""
        marks, reached = self._marks[queue], self.reached
        while marks and self.settled(marks[0][1]):
            covered, mark = marks.popleft()
            reached[queue] = max(reached[queue], covered)
            self.recycle(mark)
        if reached[queue] >= self.issued[queue]:
            self.tracker.idle(queue)

    def done(self, queue: int) -> None:
        """Everything enqueued on ``queue`` completed (the caller waited for it)."""
        self.reached[queue] = self.issued[queue]
        self.poll(queue)

    def now(self) -> dict[int, int]:
        """Per busy queue, the token of its last command: "everything enqueued so far"."""
        count, reached = self.count, self.reached
        return {q: seq * count + q for q, seq in enumerate(self.issued) if seq > reached[q]}

    # ---- deferred actions -----------------------------------------------------------------

    def after(self, tokens: Iterable[int], action: Action) -> None:
        """Run ``action`` once every point ``tokens`` names completed: now, where they have,
        else at a later ``collect``, ``reclaim`` or ``finished``."""
        points = list(unreached(tokens, self.count, self.reached).items())
        for queue, seq in points:
            self.mark(queue, seq)  # so that its completion can be seen
        if points:
            self._deferred.append((points, action))
        else:
            action()

    def collect(self) -> None:
        """Run the deferred actions whose points completed. Never blocks."""
        deferred = self._deferred
        if not deferred:
            return
        for queue in {queue for points, _ in deferred for queue, _ in points}:
            self.poll(queue)
        reached = self.reached
        waiting: list[tuple[list[tuple[int, int]], Action]] = []
        ready: list[Action] = []
        for points, action in deferred:
            if all(seq <= reached[queue] for queue, seq in points):
                ready.append(action)
            else:
                waiting.append((points, action))
        self._deferred = waiting
        _run_all(ready)

    def reclaim(self) -> None:
        """Wait for the points of every deferred action, running each in turn. An action
        that raises leaves those after it deferred."""
        while self._deferred:
            points, action = self._deferred[0]
            for queue, seq in points:
                if seq > self.reached[queue]:
                    self.block(self.mark(queue, seq))
                    self.poll(queue)
            del self._deferred[0]
            action()

    def finished(self) -> None:
        """Every queue completed everything (the caller synchronized the device): recycle
        the marks, forget every access, and run the deferred actions."""
        self.reached[:] = self.issued
        for marks in self._marks:
            for _, mark in marks:
                self.recycle(mark)
            marks.clear()
        self.tracker.reset()
        deferred, self._deferred = self._deferred, []
        _run_all(action for _, action in deferred)

    def held(self) -> tuple[int, int]:
        """Marks held and actions deferred (for leak tests)."""
        return sum(len(marks) for marks in self._marks), len(self._deferred)


def _run_all(actions: Iterable[Action]) -> None:
    """Run every action, also those after one that raises; then raise the first error.
    An action frees memory or releases a source: skipping one would leak it."""
    first: Exception | None = None
    for action in actions:
        try:
            action()
        except Exception as error:
            first = first or error
    if first is not None:
        raise first
