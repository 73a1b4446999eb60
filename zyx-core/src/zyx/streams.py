"""Multi-queue dependency tracking, shared by every backend with several in-order queues.

zyx 0.17's OpenCL scheduling, made backend-agnostic: a command goes to the queue that last
wrote its first input (else one of its outputs), else to the least-loaded queue;
read-after-write, write-after-write and write-after-read hazards against *other* queues
become waits. Commands on one queue are ordered by the queue itself and need no waits.

The tracker deals in tokens: whatever a backend uses to name a completed point on a queue
(an OpenCL event, a CUDA stream sequence number). It never touches native handles. A
buffer's record lives in its ``Buffer.tracking`` slot (an attribute load on the hot path,
not a map lookup); the tracker also keeps the set of buffers it tracks, for ``reset``.

For the launch path, ``inline`` renders the same decisions as straight-line Python for one
fixed layout of read and written buffers, for a backend to compile into a per-program launch
function (see ``zyx.backend.Program.specialize``): a microsecond per launch is mostly
Python calls, and this saves four of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
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


class _Access(Generic[T]):
    """Who touched one buffer since its last write."""

    __slots__ = ("writer_queue", "writer", "readers")

    def __init__(self) -> None:
        self.writer_queue = -1
        self.writer: T | None = None
        self.readers: dict[int, T] = {}


@dataclass(frozen=True)
class Inline:
    """One command's scheduling as lines of Python, for a fixed layout of buffer variables.

    Run ``choose`` before enqueuing: it sets ``queue`` (as ``DependencyTracker.choose``) and
    ``waits`` (``None`` where there is no hazard, else ``DependencyTracker.waits``: tokens,
    possibly none). Run ``commit`` once the command was enqueued, with its token in the
    variable ``token``. The lines use the variables ``t`` and ``hazard`` and need ``names``
    in the function's globals.
    """

    choose: list[str]
    commit: list[str]
    names: dict[str, object] = field(default_factory=dict)


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
        access: _Access[T] | None
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
                access = self._track(buf)
            access.readers[queue] = token
        for buf in writes:
            access = buf.tracking
            if access is None:
                access = self._track(buf)
            access.writer_queue = queue
            access.writer = token
            if access.readers:
                access.readers.clear()

    def inline(self, reads: Sequence[str], writes: Sequence[str]) -> Inline:
        """``choose``, ``waits`` and ``commit`` for a command that reads the buffers in the
        variables named ``reads`` and writes those named ``writes`` (in param order).

        The rendered lines decide exactly as the methods do; where a hazard is possible
        they call ``waits`` itself, so only the common case is unrolled."""
        choose = ["queue = -1"]
        for buf in [*reads[:1], *writes]:
            choose += [
                "if queue < 0:",
                f"    t = {buf}.tracking",
                "    if t is not None:",
                "        queue = t.writer_queue",
            ]
        choose += ["if queue < 0:", "    queue = tracker_load.index(min(tracker_load))"]
        choose.append("hazard = False")
        for buf in reads:
            choose += [
                f"t = {buf}.tracking",
                "if t is not None and queue != t.writer_queue >= 0:",
                "    hazard = True",
            ]
        for buf in writes:
            choose += [
                f"t = {buf}.tracking",
                "if t is not None and (t.readers or queue != t.writer_queue >= 0):",
                "    hazard = True",
            ]
        listed = f"({''.join(f'{b}, ' for b in reads)}), ({''.join(f'{b}, ' for b in writes)})"
        choose.append(f"waits = tracker_waits(queue, {listed}) if hazard else None")
        commit = ["tracker_load[queue] += 1"]
        for buf in reads:
            commit += [
                f"t = {buf}.tracking",
                "if t is None:",
                f"    t = tracker_track({buf})",
                "t.readers[queue] = token",
            ]
        for buf in writes:
            commit += [
                f"t = {buf}.tracking",
                "if t is None:",
                f"    t = tracker_track({buf})",
                "t.writer_queue = queue",
                "t.writer = token",
                "if t.readers:",
                "    t.readers.clear()",
            ]
        names = {
            "tracker_load": self.load,
            "tracker_waits": self.waits,
            "tracker_track": self._track,
        }
        return Inline(choose, commit, names)

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
        self.load[:] = [0] * self.queues  # in place: inlined launch code holds this list

    def tracked(self) -> int:
        """How many buffers have a record (for leak tests)."""
        return len(self._tracked)

    def _track(self, buf: Tracked) -> _Access[T]:
        access: _Access[T] = _Access()
        buf.tracking = access
        self._tracked.add(buf)
        return access
