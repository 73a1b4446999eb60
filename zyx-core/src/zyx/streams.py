"""Multi-queue dependency tracking, shared by every backend with several in-order queues.

zyx 0.17's OpenCL scheduling, made backend-agnostic: a command goes to the queue that last
wrote its first input (else one of its outputs), else to the least-loaded queue;
read-after-write, write-after-write and write-after-read hazards against *other* queues
become waits. Commands on one queue are ordered by the queue itself and need no waits.

The tracker deals in tokens: whatever a backend uses to name a completed point on a queue
(an OpenCL event, a CUDA stream sequence number). It never touches native handles.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")


class _Access(Generic[T]):
    """Who touched one buffer since its last write."""

    __slots__ = ("writer_queue", "writer", "readers")

    def __init__(self) -> None:
        self.writer_queue = -1
        self.writer: T | None = None
        self.readers: dict[int, T] = {}


class DependencyTracker(Generic[T]):
    """Per-buffer writer and last-use maps over ``queues`` in-order queues.

    The maps persist across batches (windows); ``forget`` drops a buffer, ``reset``
    everything (after the device was synchronized).
    """

    def __init__(self, queues: int) -> None:
        if queues < 1:
            raise ValueError(f"need at least one queue, got {queues}")
        self.queues = queues
        self.load = [0] * queues
        """Commands submitted to each queue since it was last known idle."""
        self._access: dict[Hashable, _Access[T]] = {}

    def choose(self, reads: Sequence[Hashable], writes: Sequence[Hashable] = ()) -> int:
        """The queue that last wrote the first input; else the queue that last wrote one of
        the outputs (its order then puts this write after that one without a wait); else
        the least-loaded queue."""
        access_map = self._access
        if reads:
            access = access_map.get(reads[0])
            if access is not None and access.writer_queue >= 0:
                return access.writer_queue
        for buf in writes:
            access = access_map.get(buf)
            if access is not None and access.writer_queue >= 0:
                return access.writer_queue
        load = self.load
        return load.index(min(load))

    def waits(self, queue: int, reads: Iterable[Hashable], writes: Iterable[Hashable]) -> list[T]:
        """Tokens on other queues that a command on ``queue`` must wait for."""
        waits: list[T] = []
        get = self._access.get
        # Plain loops, no generators: this runs on every launch (a microsecond counts).
        for buf in reads:
            access = get(buf)
            if access is not None and access.writer_queue != queue and access.writer_queue >= 0:
                waits.append(access.writer)  # type: ignore[arg-type]
        for buf in writes:
            access = get(buf)
            if access is None:
                continue
            if access.writer_queue != queue and access.writer_queue >= 0:
                waits.append(access.writer)  # type: ignore[arg-type]
            if access.readers:
                for q, token in access.readers.items():
                    if q != queue:
                        waits.append(token)
        return waits

    def commit(
        self, queue: int, token: T, reads: Iterable[Hashable], writes: Iterable[Hashable]
    ) -> None:
        """Record a command on ``queue``, complete when ``token`` is, with these accesses."""
        self.load[queue] += 1
        access_map = self._access
        for buf in reads:
            access = access_map.get(buf)
            if access is None:
                access = access_map[buf] = _Access()
            access.readers[queue] = token
        for buf in writes:
            access = access_map.get(buf)
            if access is None:
                access = access_map[buf] = _Access()
            access.writer_queue = queue
            access.writer = token
            access.readers.clear()

    def last_uses(self, buf: Hashable) -> dict[int, T]:
        """Per queue, the last token that used ``buf``: all must complete before it is freed."""
        access = self._access.get(buf)
        if access is None:
            return {}
        uses = dict(access.readers)
        if access.writer_queue >= 0 and access.writer_queue not in uses:
            uses[access.writer_queue] = access.writer  # type: ignore[assignment]
        return uses

    def forget(self, buf: Hashable) -> dict[int, T]:
        """Drop ``buf`` from the maps; returns its ``last_uses``."""
        uses = self.last_uses(buf)
        self._access.pop(buf, None)
        return uses

    def idle(self, queue: int) -> None:
        """``queue`` finished everything submitted to it."""
        self.load[queue] = 0

    def reset(self) -> None:
        """Every queue finished everything: forget all accesses."""
        self._access.clear()
        self.load = [0] * self.queues

    def tracked(self) -> int:
        """How many buffers the maps hold (for leak tests)."""
        return len(self._access)
