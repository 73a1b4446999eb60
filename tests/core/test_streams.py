"""The multi-queue dependency tracker: queue choice and hazards, as zyx 0.17 schedules."""

from __future__ import annotations

import random
from typing import Any

from zyx.streams import DependencyTracker, unreached


class Buf:
    """A stand-in for ``zyx.backend.Buffer``: the tracker keeps its record in ``tracking``."""

    __slots__ = ("name", "tracking")

    def __init__(self, name: str) -> None:
        self.name = name
        self.tracking: Any = None

    def __repr__(self) -> str:
        return self.name


def bufs(names: str) -> list[Buf]:
    return [Buf(name) for name in names.split()]


def test_first_input_keeps_its_writers_queue() -> None:
    a, b = bufs("a b")
    t: DependencyTracker[str] = DependencyTracker(4)
    t.commit(2, "w", reads=[], writes=[a])
    assert t.choose([a, b]) == 2


def test_unknown_input_goes_to_least_loaded_queue() -> None:
    x, y, fresh = bufs("x y fresh")
    t: DependencyTracker[str] = DependencyTracker(3)
    t.commit(0, "x", [], [x])
    t.commit(1, "y", [], [y])
    assert t.choose([fresh]) == 2
    assert t.choose([]) == 2


def test_without_a_written_input_an_outputs_writer_keeps_its_queue() -> None:
    out, fresh, other, in_ = bufs("out fresh other in")
    t: DependencyTracker[str] = DependencyTracker(4)
    t.commit(3, "w", [], [out])
    assert t.choose([fresh], [other, out]) == 3
    assert t.waits(3, [fresh], [other, out]) == []  # ordered by the queue itself
    t.commit(1, "w2", [], [in_])
    assert t.choose([in_], [out]) == 1, "the first input's writer comes first"


def test_read_after_write_on_another_queue_waits() -> None:
    a, b = bufs("a b")
    t: DependencyTracker[str] = DependencyTracker(2)
    t.commit(0, "write-a", [], [a])
    assert t.waits(1, reads=[a], writes=[b]) == ["write-a"]
    assert t.waits(0, reads=[a], writes=[b]) == []


def test_write_after_read_waits_for_readers_on_other_queues() -> None:
    (a,) = bufs("a")
    t: DependencyTracker[str] = DependencyTracker(3)
    t.commit(1, "read1", [a], [])
    t.commit(2, "read2", [a], [])
    assert sorted(t.waits(0, reads=[], writes=[a])) == ["read1", "read2"]
    assert t.waits(1, reads=[], writes=[a]) == ["read2"]


def test_write_clears_readers_and_last_uses_cover_every_queue() -> None:
    (a,) = bufs("a")
    t: DependencyTracker[str] = DependencyTracker(2)
    t.commit(1, "r", [a], [])
    t.commit(0, "w", [], [a])
    assert t.waits(0, reads=[], writes=[a]) == []
    t.commit(1, "r2", [a], [])
    assert t.last_uses(a) == {0: "w", 1: "r2"}
    assert t.tracked() == 1
    assert t.forget(a) == {0: "w", 1: "r2"}
    assert t.tracked() == 0 and a.tracking is None


def test_reset_forgets_every_buffer() -> None:
    a, b = bufs("a b")
    t: DependencyTracker[str] = DependencyTracker(2)
    t.commit(1, "w", [a], [b])
    t.reset()
    assert t.tracked() == 0 and a.tracking is None and b.tracking is None
    assert t.last_uses(b) == {} and t.load == [0, 0]


def test_random_schedule_respects_every_hazard() -> None:
    """Simulate: each command must be ordered after every conflicting earlier command.

    Sets of commands are bitsets (bit ``i``: command ``i``): the checker's sets grow with
    the history, and as Python sets it took 53 s."""
    rng = random.Random(7)
    t: DependencyTracker[int] = DependencyTracker(8)
    done_before: list[int] = []  # per command: the commands it is ordered after, itself too
    queue_done = [0] * 8  # per queue: what its commands so far are ordered after
    writers: dict[Buf, int] = {}  # per buffer: the commands that wrote it
    readers: dict[Buf, int] = {}
    names = bufs(" ".join(f"b{i}" for i in range(12)))
    for cmd in range(2000):
        reads = set(rng.sample(names, rng.randint(0, 3)))
        writes = set(rng.sample(names, rng.randint(1, 2)))
        queue = t.choose(sorted(reads, key=repr), sorted(writes, key=repr))
        after = queue_done[queue]  # an in-order queue: after all of its earlier commands
        for earlier in t.waits(queue, reads, writes):
            after |= done_before[earlier]
        conflicts = 0
        for b in reads | writes:
            conflicts |= writers.get(b, 0)
        for b in writes:
            conflicts |= readers.get(b, 0)
        missed = conflicts & ~after
        assert not missed, f"command {cmd} not ordered after {(missed & -missed).bit_length() - 1}"
        done_before.append(after | 1 << cmd)
        queue_done[queue] |= done_before[cmd]
        for b in reads:
            readers[b] = readers.get(b, 0) | 1 << cmd
        for b in writes:
            writers[b] = writers.get(b, 0) | 1 << cmd
        t.commit(queue, cmd, reads, writes)


def test_unreached_keeps_the_latest_point_per_queue_not_yet_reached() -> None:
    queues = 4
    tokens = [seq * queues + queue for seq, queue in [(3, 1), (5, 1), (2, 2), (7, 0), (4, 3)]]
    reached = [7, 0, 1, 9]  # queue 0 reached 7, queue 3 reached 9: nothing to wait for there
    assert unreached(tokens, queues, reached) == {1: 5, 2: 2}
    assert unreached([], queues, reached) == {}
