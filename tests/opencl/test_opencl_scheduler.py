"""The multi-queue micro-batch scheduler: ordering, the window, frees, errors, leaks."""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyopencl as cl
import pytest
from opencl_support import add_kernel, open_all, read

from zyx.backend import Buffer
from zyx.dtypes import DType
from zyx.errors import BackendError, ErrorStatus
from zyx.ir import Kernel, KernelBuilder, ParamKind, Storage
from zyx_opencl.device import OpenCLDevice
from zyx_opencl.native import enqueuer_type, window_loop
from zyx_opencl.pool import Copy
from zyx_opencl.scheduler import Command

pytestmark = pytest.mark.opencl

Array = np.ndarray[Any, Any]
U32 = DType.U32
LOCAL = 64
N = 64 * LOCAL
"""u32 elements per fuzz buffer."""
ROUNDS = 24
"""LCG steps per element: enough work per launch for queues to overlap."""
SHAPES = [(1, 1), (2, 1), (3, 1), (1, 2), (2, 2), (0, 1)]
"""(buffers read, buffers written) of the fuzz kernels."""


def fuzz_kernel(reads: int, writes: int) -> Kernel:
    """``out_j[i] = out_j[i] * (2j + 3) + lcg^ROUNDS(sum_k in_k[i] * (k + 1)) + j``."""
    kb = KernelBuilder(f"fuzz_{reads}_{writes}")
    ins = [kb.param(U32) for _ in range(reads)]
    outs = [kb.param(U32, ParamKind.GLOBAL_MUT) for _ in range(writes)]
    i = kb.group(0, N // LOCAL) * LOCAL + kb.local(0, LOCAL)
    acc = kb.define(U32, 1, Storage.REGISTER)
    acc[0] = kb.const(7, U32)
    for k, x in enumerate(ins):
        acc[0] = acc[0] + x[i] * (k + 1)
    with kb.loop(ROUNDS):
        acc[0] = acc[0] * 1664525 + 1013904223
    for j, out in enumerate(outs):
        out[i] = out[i] * (2 * j + 3) + acc[0] + j
    return kb.build()


def fuzz_model(ins: list[Array], outs: list[Array]) -> None:
    """What ``fuzz_kernel`` does, in numpy (uint32 wraps like the device)."""
    acc = np.full(N, 7, np.uint32)
    for k, x in enumerate(ins):
        acc += x * np.uint32(k + 1)
    for _ in range(ROUNDS):
        acc = acc * np.uint32(1664525) + np.uint32(1013904223)
    for j, out in enumerate(outs):
        out[:] = out * np.uint32(2 * j + 3) + acc + np.uint32(j)


@dataclass
class Step:
    """One fuzz command: what it does and to which buffer slots."""

    kind: str  # launch, write, copy, read, renew
    slots: tuple[int, ...]
    shape: tuple[int, int] = (0, 0)
    data: Array | None = None


def fuzz_steps(seed: int, count: int, nbuf: int) -> list[Step]:
    rng = np.random.default_rng(seed)
    kinds = ["launch", "write", "copy", "read", "renew"]
    steps = []
    for kind in rng.choice(kinds, size=count, p=[0.72, 0.08, 0.1, 0.04, 0.06]):
        if kind == "launch":
            shape = SHAPES[rng.integers(len(SHAPES))]
            slots = rng.choice(nbuf, size=sum(shape), replace=False)
            steps.append(Step(kind, tuple(int(s) for s in slots), (int(shape[0]), int(shape[1]))))
        elif kind == "copy":
            src, dst = rng.choice(nbuf, size=2, replace=False)
            steps.append(Step(kind, (int(src), int(dst))))
        else:
            data = rng.integers(0, 2**32, N, dtype=np.uint32) if kind != "read" else None
            steps.append(Step(str(kind), (int(rng.integers(nbuf)),), data=data))
    return steps


class Model:
    """The fuzz commands on numpy arrays: the reference."""

    def __init__(self, initial: list[Array]) -> None:
        self.bufs = [x.copy() for x in initial]

    def launch(self, step: Step) -> None:
        reads = step.shape[0]
        ins = [self.bufs[s] for s in step.slots[:reads]]
        fuzz_model(ins, [self.bufs[s] for s in step.slots[reads:]])

    def copy(self, step: Step) -> None:
        self.bufs[step.slots[1]][:] = self.bufs[step.slots[0]]

    def write(self, step: Step) -> None:
        self.bufs[step.slots[0]][:] = step.data

    renew = write

    def read(self, step: Step) -> Array:
        return self.bufs[step.slots[0]].copy()

    def close(self) -> list[Array]:
        return self.bufs


class OnDevice:
    """The fuzz commands on an OpenCL device."""

    def __init__(self, dev: OpenCLDevice, initial: list[Array]) -> None:
        self.dev = dev
        self.pool = dev.pool
        self.programs = {shape: dev.compile(fuzz_kernel(*shape)) for shape in SHAPES}
        self.bufs = [self.pool.allocate(4 * N) for _ in initial]
        for buf, x in zip(self.bufs, initial):
            self.pool.write(buf, x)

    def launch(self, step: Step) -> None:
        self.dev.launch(self.programs[step.shape], [self.bufs[s] for s in step.slots])

    def copy(self, step: Step) -> None:
        self.pool.copy_from(self.pool, self.bufs[step.slots[0]], self.bufs[step.slots[1]])

    def write(self, step: Step) -> None:
        self.pool.write(self.bufs[step.slots[0]], step.data)

    def renew(self, step: Step) -> None:
        """Release the buffer (its commands may still be in flight) and use a new one."""
        slot = step.slots[0]
        self.pool.release(self.bufs[slot])
        self.bufs[slot] = self.pool.allocate(4 * N)
        self.write(step)

    def read(self, step: Step) -> Array:
        return read(self.dev, self.bufs[step.slots[0]], U32)

    def close(self) -> list[Array]:
        final = [read(self.dev, buf, U32) for buf in self.bufs]
        for buf in self.bufs:
            self.pool.release(buf)
        self.dev.synchronize()
        return final


def replay(steps: list[Step], runner: Model | OnDevice) -> list[Array]:
    """What every read step saw, then the final contents of every buffer."""
    seen = []
    for step in steps:
        if step.kind == "read":
            seen.append(runner.read(step))
        else:
            getattr(runner, step.kind)(step)
    return seen + runner.close()


def mismatches(got: list[Array], want: list[Array]) -> int:
    return sum(int(np.count_nonzero(g != w)) for g, w in zip(got, want))


@pytest.mark.parametrize("seed", [1, 2])
def test_fuzz_eight_queues_match_one_queue_and_numpy(
    device: OpenCLDevice,
    seed: int,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Through zyx-opencl's native Enqueuer and window loop (where they are built), through
    the Python window loop (taken while launches are logged), and through pyopencl's
    enqueue, the path taken where the native module is not built."""
    index = device.index
    nbuf = 12
    rng = np.random.default_rng(seed + 100)
    initial = [rng.integers(0, 2**32, N, dtype=np.uint32) for _ in range(nbuf)]
    steps = fuzz_steps(seed, 3000, nbuf)
    want = replay(steps, Model(initial))
    one = replay(steps, OnDevice(open_all(queues=1)[index], initial))
    on_eight = OnDevice(open_all(queues=8)[index], initial)
    eight = replay(steps, on_eight)
    small_window = replay(steps, OnDevice(open_all(queues=8, window=7)[index], initial))
    other_gate = replay(
        steps, OnDevice(open_all(queues=8, gate=not device.scheduler.gated)[index], initial)
    )
    with monkeypatch.context() as patch:
        patch.setattr("zyx_opencl.program.enqueue_function", lambda: None)
        patch.setattr("zyx_opencl.scheduler.enqueuer_type", lambda: None)
        through_pyopencl = replay(steps, OnDevice(open_all(queues=8)[index], initial))
    with caplog.at_level(logging.DEBUG, logger="zyx.launch"):
        logged = replay(steps, OnDevice(open_all(queues=8)[index], initial))
    assert "on queue" in caplog.text
    assert mismatches(one, want) == 0
    assert mismatches(eight, one) == 0
    if enqueuer_type() is not None:  # the native Enqueuer took a good share of the launches
        enqueuers = [p.enqueuer for p in on_eight.programs.values()]
        appended = sum(enqueuer.appended for enqueuer in enqueuers)
        enqueued = sum(enqueuer.enqueued for enqueuer in enqueuers)
        launches = sum(step.kind == "launch" for step in steps)
        assert appended > launches // 2, (appended, launches)
        assert enqueued > launches // 4, (enqueued, launches)
    assert mismatches(small_window, one) == 0
    assert mismatches(other_gate, one) == 0
    assert mismatches(through_pyopencl, one) == 0
    assert mismatches(logged, one) == 0


class Enqueues:
    """A stand-in program for the window loop: records its launches, raises ``error``."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error
        self.launched: list[object] = []

    def enqueue(self, args: tuple[object, ...], work: object) -> int:
        self.launched.append(args)
        if self.error is not None:
            raise self.error
        return 0


def test_the_native_window_loop_keeps_enqueue_errors_and_raises_others() -> None:
    loop = window_loop()
    if loop is None:
        pytest.skip("zyx-opencl's native module did not build")
    kept: list[BaseException] = []

    def failed(error: BaseException) -> None:
        if not isinstance(error, BackendError):
            raise error
        kept.append(error)

    good, refused = Enqueues(), Enqueues(BackendError(ErrorStatus.KERNEL_SYNC, "refused"))
    commands: list[object] = []
    work = (1, 1, 1)
    batch = [(good, (1,), work), (refused, (2,), work), (None, "copy", work), (good, (3,), work)]
    loop(batch, lambda command: commands.append(command) or 0, failed)
    assert good.launched == [(1,), (3,)] and refused.launched == [(2,)]
    assert commands == ["copy"] and kept == [refused.error]
    broken = Enqueues(ValueError("a bug, not a failed enqueue"))
    with pytest.raises(ValueError, match="a bug"):
        loop([(broken, (4,), work), (good, (5,), work)], commands.append, failed)
    assert good.launched == [(1,), (3,)], "the loop stopped at the error it could not keep"


def busy_kernel() -> Kernel:
    """Writes ``out`` after a long loop: a launch that is still running when tested."""
    kb = KernelBuilder("busy")
    out = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    i = kb.group(0, 64) * LOCAL + kb.local(0, LOCAL)
    acc = kb.define(DType.F32, 1, Storage.REGISTER)
    acc[0] = kb.const(0.0, DType.F32)
    with kb.loop(20000):
        acc[0] = acc[0] * 0.5 + 1.0
    out[i] = acc[0]
    return kb.build()


def test_the_window_is_enqueued_when_full(device: OpenCLDevice) -> None:
    dev = open_all(window=10)[device.index]
    program = dev.compile(add_kernel())
    bufs = [dev.pool.allocate(256) for _ in range(3)]
    for k in range(1, 10):
        dev.launch(program, [*bufs, 64])
        assert dev.scheduler.batched() == k
    dev.launch(program, [*bufs, 64])
    assert dev.scheduler.batched() == 0
    dev.synchronize()


def test_a_buffer_released_in_use_is_freed_after_its_work(device: OpenCLDevice) -> None:
    pool = device.pool
    before = pool.free_bytes()
    program = device.compile(busy_kernel())
    buf = pool.allocate(4 * 64 * LOCAL)
    device.launch(program, [buf])
    pool.release(buf)  # returns at once; the launch is still in the window
    assert pool.free_bytes() == before - buf.nbytes
    device.scheduler.flush()
    assert pool.free_bytes() in (before - buf.nbytes, before)
    device.synchronize()
    assert pool.free_bytes() == before
    assert device.scheduler.held()[1] == 0


def test_an_unused_buffer_is_freed_at_once(device: OpenCLDevice) -> None:
    pool = device.pool
    before = pool.free_bytes()
    pool.release(pool.allocate(1024))
    assert pool.free_bytes() == before


def failing_copy(a: Buffer, b: Buffer) -> Copy:
    """A device copy larger than its buffers: the driver refuses it when it is enqueued
    (the pool's checks would refuse it earlier, so it goes to the scheduler directly)."""
    return Copy(
        ErrorStatus.MEMORY_COPY_P2P, (a,), (b,), b.handle, a.handle, byte_count=2 * a.nbytes
    )


def test_a_failed_enqueue_is_raised_at_the_next_sync_point_only(
    device: OpenCLDevice, alloc: Callable[[int], Buffer]
) -> None:
    a, b = alloc(256), alloc(256)
    data = np.arange(64, dtype=np.float32)
    device.scheduler.submit(failing_copy(a, b))  # fire and forget: nothing raised
    too_long = np.zeros(128, np.float32)  # twice the buffer: refused as well, but later
    device.scheduler.submit(Copy(ErrorStatus.MEMORY_COPY_H2P, (), (a,), a.handle, too_long))
    with pytest.raises(BackendError) as caught:
        read(device, b)
    assert caught.value.status is ErrorStatus.MEMORY_COPY_P2P  # the first error wins
    device.pool.write(a, data)  # the error was raised once; the device works on
    np.testing.assert_array_equal(read(device, a), data)


def test_synchronize_raises_the_pending_error(
    device: OpenCLDevice, alloc: Callable[[int], Buffer]
) -> None:
    a, b = alloc(256), alloc(256)
    device.scheduler.submit(failing_copy(a, b))
    with pytest.raises(BackendError) as caught:
        device.synchronize()
    assert caught.value.status is ErrorStatus.MEMORY_COPY_P2P
    device.synchronize()


class Broken(Command):
    """A command whose enqueue fails with an exception that is not an OpenCL error."""

    __slots__ = ("done",)
    status = ErrorStatus.MEMORY_COPY_H2P

    def __init__(self, done: Callable[[], None]) -> None:
        self.reads, self.writes, self.done = (), (), done

    def enqueue(self, queue: cl.CommandQueue, wait_for: list[cl.Event] | None) -> cl.Event:
        raise ValueError("not an OpenCL error")


def test_any_failure_in_a_window_is_kept_and_the_window_goes_on(
    device: OpenCLDevice, alloc: Callable[[int], Buffer]
) -> None:
    program = device.compile(add_kernel())
    a, b, c = alloc(256), alloc(256), alloc(256)
    x, y = np.arange(64, dtype=np.float32), np.arange(64, dtype=np.float32)[::-1].copy()
    device.pool.write(a, x)
    device.pool.write(b, y)
    done: list[bool] = []
    device.scheduler.submit(Broken(lambda: done.append(True)))
    device.launch(program, [a, b, c, 64])  # in the same window, after the failure
    with pytest.raises(BackendError) as caught:
        device.synchronize()
    assert caught.value.status is ErrorStatus.MEMORY_COPY_H2P
    assert isinstance(caught.value.__cause__, ValueError) and done == [True]
    np.testing.assert_array_equal(read(device, c), x + y)


def references(kind: type) -> int:
    """References to objects of ``kind`` held by containers and objects Python tracks:
    pyopencl's events and buffers are not tracked themselves, who holds them is."""
    gc.collect()
    return sum(isinstance(ref, kind) for obj in gc.get_objects() for ref in gc.get_referents(obj))


def test_no_growth_of_events_or_buffers_over_10000_launches(device: OpenCLDevice) -> None:
    pool, scheduler = device.pool, device.scheduler
    program = device.compile(add_kernel())
    bufs = [pool.allocate(256) for _ in range(6)]

    def launches(count: int) -> None:
        for j in range(count):
            a, b, c = bufs[j % 6], bufs[(j + 1) % 6], bufs[(j + 3) % 6]
            device.launch(program, [a, b, c, 64])
            if j % 50 == 0:  # a temporary, released while its launch is in flight
                tmp = pool.allocate(256)
                pool.write(tmp, np.ones(64, np.float32))
                device.launch(program, [tmp, a, b, 64])
                pool.release(tmp)

    def quiescent_state() -> tuple[int, int, int, int, int]:
        """Counts once the device ran everything, with the maps kept (no synchronize)."""
        scheduler.flush()
        for queue in scheduler.queues:
            queue.finish()
        scheduler.flush()  # frees what completed
        for queue in range(scheduler.count):  # as the next window's enqueue polls them
            scheduler.poll(queue)
        return (
            references(cl.Event),
            references(cl.Buffer),
            scheduler.tracker.tracked(),
            scheduler.held()[1],
            scheduler.held()[0],
        )

    held = [cl.enqueue_marker(scheduler.queues[0])]
    assert references(cl.Event) >= 1, "the count sees an event held"
    held[0].wait()
    del held
    launches(1000)
    early = quiescent_state()
    launches(9000)
    late = quiescent_state()
    assert late[3] == early[3] == 0
    assert late[2] == early[2] == len(bufs)
    # Every mark completed and was polled away; which queues hold a buffer's last uses
    # depends on timing: allow one event per queue.
    assert late[4] == early[4] == 0, (early, late)
    assert late[0] <= early[0] + len(scheduler.queues), (early, late)
    assert late[1] <= early[1], (early, late)
    for buf in bufs:
        pool.release(buf)
    device.synchronize()
    assert (scheduler.tracker.tracked(), *scheduler.held()) == (0, 0, 0)
    assert references(cl.Event) == 0
