"""``zyx.streams.Sequencer``: points by sequence number, lazily made marks, deferred actions.

A model device stands in for a backend: each queue has a count of commands that have
completed, which the test advances; a mark completes once its queue's count reaches the
commands enqueued before it. What zyx-cuda and zyx-opencl build on, checked without a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from test_streams import bufs

from zyx.streams import Sequencer


@dataclass
class Mark:
    queue: int
    covers: int


class ModelQueues(Sequencer[Mark]):
    def __init__(self, count: int) -> None:
        super().__init__(count)
        self.completed = [0] * count
        """Commands the model device finished, per queue."""
        self.recorded: list[Mark] = []
        self.recycled: list[Mark] = []
        self.blocked: list[Mark] = []

    def record(self, queue: int) -> Mark:
        mark = Mark(queue, self.issued[queue])
        self.recorded.append(mark)
        return mark

    def settled(self, mark: Mark) -> bool:
        return self.completed[mark.queue] >= mark.covers

    def block(self, mark: Mark) -> None:
        self.blocked.append(mark)
        self.completed[mark.queue] = max(self.completed[mark.queue], mark.covers)

    def recycle(self, mark: Mark) -> None:
        self.recycled.append(mark)

    def run(self, queue: int, commands: int = 1) -> list[int]:
        """Enqueue ``commands`` commands without buffers on ``queue``; their tokens."""
        return [self.commit(queue, (), ()) * self.count + queue for _ in range(commands)]


def test_commands_are_numbered_per_queue_and_tokens_name_them() -> None:
    q = ModelQueues(3)
    assert q.run(1, 2) == [1 * 3 + 1, 2 * 3 + 1]
    assert q.run(2) == [1 * 3 + 2]
    assert q.issued == [0, 2, 1]
    assert q.now() == {1: 2 * 3 + 1, 2: 1 * 3 + 2}


def test_a_mark_is_made_only_when_asked_and_serves_every_earlier_point() -> None:
    q = ModelQueues(2)
    first, second = q.run(0, 2)
    assert q.recorded == [], "committing records nothing"
    (mark,) = q.marks([first, second])  # one per queue, for the latest point
    assert mark == Mark(0, 2)
    assert q.marks([first]) == [mark] and len(q.recorded) == 1, "the held mark covers it"
    (third,) = q.run(0)
    assert q.marks([third]) == [Mark(0, 3)] and len(q.recorded) == 2
    q.completed[0] = 3
    assert q.reached[0] == 0, "reached advances only by polling"
    q.poll(0)
    assert q.reached[0] == 3 and q.recycled == [Mark(0, 2), Mark(0, 3)]
    assert q.marks([third]) == [], "nothing to wait for once reached"
    assert q.held() == (0, 0)


def test_polling_stops_at_the_first_mark_not_complete_and_idles_caught_up_queues() -> None:
    q = ModelQueues(2)
    a, b = bufs("a b")
    q.commit(0, (), (a,))
    q.commit(0, (), (b,))
    assert q.mark(0, 1) == Mark(0, 2), "a mark made now covers all enqueued so far"
    q.commit(0, (), (a,))
    q.mark(0, 3)
    q.completed[0] = 2
    q.poll(0)
    assert q.reached[0] == 2 and q.held()[0] == 1
    assert q.tracker.load[0] == 3, "still busy"
    q.completed[0] = 3
    q.poll(0)
    assert q.reached[0] == 3 and q.tracker.load[0] == 0


def test_a_wait_for_a_point_that_completed_since_is_not_asked_again() -> None:
    """An upload on queue 1 no one synchronized, read by launches on queue 0: the first
    waits for its mark; once the mark completed, the next asks nothing and queue 1 is idle
    (the native launch paths take only launches without waits: the front end's a + b on
    CUDA went through the Python path every time)."""
    q = ModelQueues(2)
    (x,) = bufs("x")
    q.commit(1, (), (x,))
    queue = q.tracker.choose((x,), ())
    assert queue == 1, "the reader goes where its input was written..."
    q.commit(0, (), ())  # ...unless another queue is chosen (as for a second input)
    waits = q.tracker.waits(0, (x,), ())
    (mark,) = q.marks(waits)
    q.commit(0, (x,), ())
    q.completed[1] = 1  # the upload finished; nothing synchronized queue 1
    assert q.marks(q.tracker.waits(0, (x,), ())) == []
    assert q.reached[1] == 1 and q.recycled == [mark] and q.tracker.load[1] == 0


def test_an_action_runs_once_its_points_complete_and_never_earlier() -> None:
    q = ModelQueues(3)
    ran: list[str] = []
    (zero,) = q.run(0)
    (one,) = q.run(1)
    q.after([], lambda: ran.append("now"))
    q.after([zero, one], lambda: ran.append("both"))
    q.after([one], lambda: ran.append("one"))
    assert ran == ["now"] and q.held() == (2, 2)
    q.collect()
    assert ran == ["now"]
    q.completed[1] = 1
    q.collect()
    assert ran == ["now", "one"], "a ready action runs though an earlier one waits"
    q.completed[0] = 1
    q.collect()
    assert ran == ["now", "one", "both"] and q.held() == (0, 0)


def test_reclaim_blocks_for_each_pending_point_then_runs_the_actions() -> None:
    q = ModelQueues(2)
    ran: list[int] = []
    tokens = q.run(0, 3) + q.run(1)
    q.after(tokens[:1], lambda: ran.append(0))
    q.after(tokens, lambda: ran.append(1))
    q.reclaim()
    assert ran == [0, 1]
    assert q.reached == [3, 1] and q.held() == (0, 0)
    assert {(m.queue, m.covers) for m in q.blocked} == {(0, 3), (1, 1)}


def test_finished_forgets_accesses_recycles_marks_and_runs_what_waited() -> None:
    q = ModelQueues(2)
    a, b = bufs("a b")
    q.commit(0, (a,), (b,))
    ran: list[str] = []
    q.after(q.tracker.last_uses(b).values(), lambda: ran.append("free b"))
    q.finished()
    assert ran == ["free b"]
    assert q.reached == q.issued and q.held() == (0, 0) and q.recycled == q.recorded
    assert q.tracker.tracked() == 0 and a.tracking is None and b.tracking is None


def fail() -> None:
    raise RuntimeError("a free failed")


@pytest.mark.parametrize("end", ["collect", "finished"])
def test_an_action_that_raises_in_collect_or_finished_does_not_drop_the_others(end: str) -> None:
    q = ModelQueues(1)
    ran: list[str] = []
    tokens = q.run(0)
    for action in (fail, lambda: ran.append("a"), lambda: ran.append("b")):
        q.after(tokens, action)
    q.completed[0] = 1
    with pytest.raises(RuntimeError, match="a free failed"):
        getattr(q, end)()
    assert ran == ["a", "b"] and q.held()[1] == 0


def test_an_action_that_raises_in_reclaim_leaves_those_after_it_deferred() -> None:
    q = ModelQueues(1)
    ran: list[str] = []
    tokens = q.run(0)
    for action in (lambda: ran.append("a"), fail, lambda: ran.append("b")):
        q.after(tokens, action)
    with pytest.raises(RuntimeError, match="a free failed"):
        q.reclaim()
    assert ran == ["a"] and q.held()[1] == 1
    q.reclaim()
    assert ran == ["a", "b"] and q.held() == (0, 0)
