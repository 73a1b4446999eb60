"""``ExecPlan.run`` in C (``zyx/runner.c``): a cached plan makes the calls the Python run
makes, in the same order with the same arguments, and gives the same results; where any of
those calls raises, both leave the same trace and raise the same error (with the same
context where a release fails on the way out), count the same launches and leave no buffer
behind; malformed plans are refused with an error, never a crash; nothing leaks a
reference. Without native code (``ZYX_NATIVE=0``, test_native.py) plans run in Python.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import zyx
from zyx import runtime
from zyx.allocator import allocator
from zyx.runtime import Alloc, ExecPlan, Launch, Release


@pytest.fixture
def runner() -> ModuleType:
    if runtime._runner is None:
        pytest.skip("no native runner here (no C compiler, no Python.h, or ZYX_NATIVE=0)")
    return runtime._runner


@contextmanager
def in_python(plan: ExecPlan) -> Iterator[None]:
    native, plan.native = plan.native, None
    try:
        yield
    finally:
        plan.native = native


# ---- a real plan on the host ------------------------------------------------------------


def _program(x: zyx.Tensor, w: zyx.Tensor) -> tuple[zyx.Tensor, zyx.Tensor]:
    e = zyx.exp(x - zyx.max(x, axis=1, keepdims=True))
    soft = e / zyx.sum(e, axis=1, keepdims=True)
    return zyx.sum(soft * w[::-1] + 2.5, axis=0), zyx.matrix_transpose(soft)[::2] * 3


def test_a_cached_plan_runs_in_c_with_the_results_and_launches_of_the_python_run(
    runner: ModuleType,
) -> None:
    rng = np.random.default_rng(7)
    host = zyx.device("host")
    x, w = (zyx.asarray(rng.standard_normal((33, 17)), device=host) for _ in range(2))
    zyx.realize(*_program(x, w))
    plan = runtime.runtime._last[1]
    assert plan is not None and isinstance(plan.native, runner.Plan)
    assert plan.native.launches == sum(isinstance(s, Launch) for s in plan.steps) >= 2
    results, launches = [], []
    for python in (False, True, False):
        before = zyx.stats()
        if python:
            with in_python(plan):
                outputs = _program(x, w)
                zyx.realize(*outputs)
        else:
            outputs = _program(x, w)
            zyx.realize(*outputs)
        assert runtime.runtime._last[1] is plan
        launches.append((zyx.stats() - before).launches)
        results.append([o.numpy() for o in outputs])
    assert launches[0] == launches[1] == launches[2] == plan.native.launches
    for got in (results[0], results[2]):
        for a, b in zip(got, results[1]):
            np.testing.assert_array_equal(a, b)


# ---- a plan of stand-ins: every call recorded, any of them failing -----------------------


class Boom(Exception):
    pass


class Token:
    def __init__(self, name: str) -> None:
        self.name = name


class Recorder:
    """The allocator, a device, targets and leaves of a plan, recording each call; the
    ``fail_at``-th call raises ``Boom``."""

    def __init__(self, fail_at: int) -> None:
        self.trace: list[tuple[Any, ...]] = []
        self.fail_at = fail_at
        self.pool = "pool"

    def _call(self, *what: Any) -> None:
        self.trace.append(what)
        if len(self.trace) == self.fail_at:
            raise Boom(f"call {len(self.trace)}: {what[0]}")

    def allocate(self, pool: str, nbytes: int) -> Token:
        self._call("allocate", pool, nbytes)
        return Token(f"buf{len(self.trace)}")

    def free(self, buf: Token) -> None:
        self._call("free", buf.name)

    def launch(self, program: str, args: list[Any]) -> None:
        self._call("launch", program, [a.name if isinstance(a, Token) else a for a in args])


class Target:
    def __init__(self, recorder: Recorder, name: str) -> None:
        self.recorder, self.name = recorder, name

    def realize_with(self, buf: Token) -> None:
        self.recorder._call("realize_with", self.name, buf.name)


class Leaf:
    def __init__(self, buffer: Token | None, arg: Any) -> None:
        self.buffer, self.arg = buffer, arg


def _plan(device: Any) -> ExecPlan:
    """Two allocations, two launches (leaves, slots and fixed values), a release of a slot
    the second launch read, a third allocation left for the end: two targets."""
    steps = [
        Alloc(0, device, 64),
        Alloc(1, device, 128),
        Launch(device, "first", (("slot", 0), ("leaf", 0), ("value", 7), ("leaf", 1))),
        Alloc(2, device, 32),
        Launch(device, "second", (("slot", 1), ("slot", 0), ("value", 1.5), ("slot", 2))),
        Release(0),
    ]
    return ExecPlan(steps, slots=3, targets=[(1, 1), (0, 2)], kernels=2)


CALLS = 8
"""The calls ``_plan`` makes when nothing fails: 3 allocations, 2 launches, 1 release and 2
targets' ``realize_with``; no release on the way out."""


def _run(runner: ModuleType | None, fail_at: int, monkeypatch: pytest.MonkeyPatch) -> Any:
    recorder = Recorder(fail_at)
    plan = _plan(recorder)
    monkeypatch.setattr(runtime, "allocator", recorder)
    if runner is None:
        plan.native = None
    else:
        runner.configure(recorder.allocate, recorder.free, runtime._stats)
    leaves = [Leaf(Token("leaf0"), None), Leaf(None, 2.0)]
    targets = [Target(recorder, "t0"), Target(recorder, "t1")]
    before = zyx.stats().launches
    error: BaseException | None = None
    try:
        plan.run(leaves, targets)
    except Boom as raised:
        error = raised
    finally:
        if runner is not None:
            runner.configure(allocator.allocate, allocator.free, runtime._stats)
        monkeypatch.undo()
    context = None if error is None else error.__context__
    return recorder.trace, repr(error), repr(context), zyx.stats().launches - before


@pytest.mark.parametrize("fail_at", range(CALLS + 2))
def test_the_c_run_makes_the_python_runs_calls_and_fails_as_it_does(
    runner: ModuleType, fail_at: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    c, python = _run(runner, fail_at, monkeypatch), _run(None, fail_at, monkeypatch)
    assert c == python
    trace, error, _, launches = c
    if fail_at == 0 or fail_at > len(trace):
        assert error == "None" and len(trace) == CALLS and launches == 2
    failed = trace[-1][0] if error != "None" else None
    made = trace[:-1] if failed == "allocate" else trace  # a failed allocation made nothing
    allocated = {f"buf{i + 1}" for i, call in enumerate(made) if call[0] == "allocate"}
    freed = {c[1] for c in trace if c[0] == "free"}
    given = freed | {c[2] for c in trace if c[0] == "realize_with"}
    if failed != "free":  # every buffer made went back, or to a target
        assert allocated <= given


def test_the_recorded_calls_are_those_of_the_plan(
    runner: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace, error, _, launches = _run(runner, 0, monkeypatch)
    assert error == "None" and launches == 2
    assert trace == [
        ("allocate", "pool", 64),
        ("allocate", "pool", 128),
        ("launch", "first", ["buf1", "leaf0", 7, 2.0]),
        ("allocate", "pool", 32),
        ("launch", "second", ["buf2", "buf1", 1.5, "buf4"]),
        ("free", "buf1"),
        ("realize_with", "t1", "buf2"),
        ("realize_with", "t0", "buf4"),
    ]


def test_a_failed_release_on_the_way_out_keeps_the_first_error_as_its_context(
    runner: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    # call 3 (the first launch) fails, then the release of buf1 (call 4) on the way out
    recorder_calls = []
    for python in (False, True):
        recorder = Recorder(3)
        plan = _plan(recorder)
        recorded_free = recorder.free

        def free(buf: Token, recorded_free: Any = recorded_free) -> None:
            recorded_free(buf)
            if buf.name == "buf1":
                raise Boom("release of buf1")

        monkeypatch.setattr(runtime, "allocator", recorder)
        monkeypatch.setattr(recorder, "free", free)
        if python:
            plan.native = None
        else:
            runner.configure(recorder.allocate, free, runtime._stats)
        try:
            with pytest.raises(Boom, match="release of buf1") as raised:
                plan.run([Leaf(Token("leaf0"), None), Leaf(None, 2.0)], [])
        finally:
            runner.configure(allocator.allocate, allocator.free, runtime._stats)
            monkeypatch.undo()
        assert repr(raised.value.__context__) == repr(Boom("call 3: launch"))
        recorder_calls.append(recorder.trace)
    assert recorder_calls[0] == recorder_calls[1]
    assert recorder_calls[0][-1] == ("free", "buf1")  # buf2 is not released after it: as Python


# ---- malformed plans and arguments ------------------------------------------------------


@pytest.mark.parametrize(
    "ops, slots, targets, error",
    [
        ([(9, 0)], 1, (), ValueError),
        ([("alloc", 0)], 1, (), TypeError),
        ([(0, 1, "pool", 8)], 1, (), ValueError),
        ([(0, -1, "pool", 8)], 1, (), ValueError),
        ([(0, 0, "pool", "8")], 1, (), TypeError),
        ([(1, "dev", "prog", [None], ((1, 0),), ())], 1, (), ValueError),
        ([(1, "dev", "prog", [None], (), ((0, 5),))], 1, (), ValueError),
        ([(1, "dev", "prog", (None,), (), ())], 1, (), TypeError),
        ([(2, 0)], 1, ((0, 3),), ValueError),
        ([], -1, (), ValueError),
        ([object()], 1, (), TypeError),
    ],
)
def test_a_malformed_plan_is_refused(
    runner: ModuleType, ops: list[Any], slots: int, targets: Any, error: type[Exception]
) -> None:
    with pytest.raises(error):
        runner.Plan(ops, slots, targets)


def test_bad_runs_raise_and_give_their_buffers_back(
    runner: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = Recorder(0)
    runner.configure(recorder.allocate, recorder.free, runtime._stats)
    try:
        empty = runner.Plan([(2, 0)], 1, ())
        with pytest.raises(RuntimeError, match="released while empty"):
            empty.run([], [])
        past = runner.Plan([(0, 0, "pool", 8), (1, recorder, "p", [None], ((0, 3),), ())], 1, ())
        with pytest.raises(IndexError):
            past.run([], [])
        with pytest.raises(TypeError):
            past.run(None, [])
        untargeted = runner.Plan([(0, 0, "pool", 8)], 1, ((2, 0),))
        with pytest.raises(RuntimeError, match="target"):
            untargeted.run([], [Target(recorder, "t0")])
        with pytest.raises(TypeError):
            empty.run([])
    finally:
        runner.configure(allocator.allocate, allocator.free, runtime._stats)
    made = [i + 1 for i, call in enumerate(recorder.trace) if call[0] == "allocate"]
    freed = [call[1] for call in recorder.trace if call[0] == "free"]
    assert freed == [f"buf{i}" for i in made] and len(made) == 2


def test_runs_leak_no_reference(runner: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder(0)
    plan = _plan(recorder)
    leaves = [Leaf(Token("leaf0"), None), Leaf(None, 2.0)]
    targets = [Target(recorder, "t0"), Target(recorder, "t1")]
    watched = [recorder, *leaves, *targets, leaves[0].buffer, "first", "second", 7, 1.5]
    runner.configure(recorder.allocate, recorder.free, runtime._stats)
    try:
        plan.run(leaves, targets)
        before = [sys.getrefcount(o) for o in watched]
        for _ in range(100):
            recorder.trace.clear()
            plan.run(leaves, targets)
        assert [sys.getrefcount(o) for o in watched] == before
    finally:
        runner.configure(allocator.allocate, allocator.free, runtime._stats)
