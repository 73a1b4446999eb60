"""The device contract: compile and launch kernels that use every kind of range, local
memory and barriers, loops and conditionals; zero work-groups; groups at the device's
limits; timed launches; programs released and compiled again; recordings; chains of
dependent launches."""

from __future__ import annotations

from math import ceil

import numpy as np
import pytest

from zyx.backend import Arg, Device, MemoryPool
from zyx.dtypes import DType, DTypeCapability
from zyx.errors import BackendError, ErrorStatus, IRError
from zyx.ir import INDEX, BOp, Kernel, KernelBuilder, ParamKind, check_limits
from zyx.testing._suite import Require
from zyx.testing.examples import matmul
from zyx.testing.harness import Buffers, HostArg, compiled, launch, reference, run
from zyx.testing.kernels import (
    axpb,
    binary,
    copy,
    elementwise,
    grid3d,
    group_sum,
    local_memory_in_scopes,
    local_threads,
    positive_prefix_sums,
    reverse_in_local_memory,
)
from zyx.testing.numerics import assert_close, assert_poison, assert_prefix, poisoned, random

pytestmark = pytest.mark.zyx_area("device")

ARITHMETIC = DTypeCapability.ARITHMETIC
STORAGE = DTypeCapability.STORAGE


def test_info_describes_a_device(device: Device) -> None:
    info = device.info
    assert isinstance(info.name, str) and info.name
    assert info.max_local_threads >= 1 and info.warp_size >= 1
    assert all(d >= 1 for d in (*info.max_global_work_dims, *info.max_local_work_dims))
    assert info.local_mem_size >= 0 and info.global_mem_size > 0
    assert isinstance(device.pool, MemoryPool)


@pytest.mark.parametrize(
    "name", ["memcpy", "printf", "main", "k" * 300], ids=lambda name: name[:8] + str(len(name))
)
def test_any_identifier_names_a_kernel(device: Device, require: Require, name: str) -> None:
    """A kernel named like a C library function or at length (PoCL aborted on one of 251
    characters) compiles and runs: entry points are the backend's to name."""
    require(DType.F32, ARITHMETIC)
    kb = KernelBuilder(name)
    out = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    out[kb.local(0, 1)] = 1.5
    (result,) = run(device, kb.build(), [poisoned(DType.F32, 1)])
    assert result[0] == 1.5


def test_group_count_follows_a_variable(device: Device, local: int, require: Require) -> None:
    """``ceil(n / local)`` groups for each ``n``: every element below ``n`` is written,
    none past it."""
    require(DType.F32, ARITHMETIC)
    kernel = axpb(DType.F32, local)
    rng = np.random.default_rng(1)
    with compiled(device, kernel) as program:
        # local - 1 is no size where a group holds one work-item (a 0-byte buffer)
        for n in sorted({1, local - 1, local, local + 1, 5 * local + 3, 4099} - {0}):
            args: list[HostArg] = [
                random(rng, DType.F32, n),
                poisoned(DType.F32, n + local),
                1.5,
                -0.25,
                n,
            ]
            got, want = launch(device, program, args), reference(kernel, args)
            assert_prefix(got[1], want[1], DType.F32, n, f"n={n}")


@pytest.mark.parametrize("dtype", [DType.F32, DType.I32])
def test_work_group_tree_reduction(
    device: Device, local: int, require: Require, rng: np.random.Generator, dtype: DType
) -> None:
    """Local memory and a barrier per level; the last group is partial."""
    require(dtype, ARITHMETIC)
    kernel = group_sum(dtype, local)
    with compiled(device, kernel) as program:
        for n in (3 * local + 7, 1000):
            groups = ceil(n / local)
            x = random(rng, dtype, n, -1000, 1000)
            args: list[HostArg] = [x, poisoned(dtype, groups + 1), n]
            got, want = launch(device, program, args), reference(kernel, args)
            assert_prefix(got[1], want[1], dtype, groups, f"group sums, n={n}")


def test_tiled_matmul(device: Device, rng: np.random.Generator, require: Require) -> None:
    """2-D groups of 2-D work-items, tiles in local memory, barriers inside a loop; no size
    is a multiple of the tile, the largest of 8, 4 and 2 that the device's limits allow."""
    require(DType.F32, ARITHMETIC)
    tiles = (matmul(37, 45, 29, tile) for tile in (8, 4, 2))
    example = next((e for e in tiles if _fits(device, e.kernel)), None)
    if example is None:
        pytest.skip(f"{device.name}'s limits allow no 2 x 2 tile: {_local_limits(device)}")
    args = example.arguments(rng)
    got = run(device, example.kernel, args)
    assert_close(got[2], reference(example.kernel, args)[2], DType.F32, "c = a @ b")


@pytest.mark.parametrize("dtype", [DType.F32, DType.I32])
def test_loop_and_if_with_register_accumulator(
    device: Device, local: int, require: Require, rng: np.random.Generator, dtype: DType
) -> None:
    """A Define accumulator, a loop whose trip count differs per work-item, an If in it."""
    require(dtype, ARITHMETIC)
    rows, cols = 300, 37
    kernel = positive_prefix_sums(dtype, local)
    args: list[HostArg] = [
        random(rng, dtype, rows * cols, -100, 100),
        poisoned(dtype, rows + 5),
        rows,
        cols,
    ]
    got = run(device, kernel, args)
    assert_prefix(got[1], reference(kernel, args)[1], dtype, rows, "row sums")


def test_three_axis_groups(device: Device, rng: np.random.Generator, require: Require) -> None:
    """Groups and work-items on all three axes: (4, 2, 2) work-items, fewer on an axis
    where the device allows fewer."""
    require(DType.I32, ARITHMETIC)
    shape, local = (5, 10, 13), _within_limits(device, (4, 2, 2))
    kernel = grid3d(shape, local)
    size = shape[0] * shape[1] * shape[2]
    args = [random(rng, DType.I32, size, -1000, 1000), poisoned(DType.I32, size)]
    got = run(device, kernel, args)
    assert_close(got[1], reference(kernel, args)[1], DType.I32, "grid")


def test_launch_timed_drains_then_times(
    device: Device, pool: MemoryPool, local: int, rng: np.random.Generator, require: Require
) -> None:
    """``launch_timed`` returns positive nanoseconds, after earlier launches it depends on."""
    require(DType.F32, ARITHMETIC)
    n = 5000
    x = random(rng, DType.F32, n)
    kernel = axpb(DType.F32, local)
    with compiled(device, kernel) as program, Buffers(pool) as bufs:
        bx, by, bz = bufs.put(x), bufs.put(poisoned(DType.F32, n)), bufs.put(poisoned(DType.F32, n))
        device.launch(program, [bx, by, 2.0, 1.0, n])
        ns = device.launch_timed(program, [by, bz, -0.5, 3.0, n])
        assert isinstance(ns, int) and ns > 0, f"launch_timed returned {ns!r}"
        y = reference(kernel, [x, poisoned(DType.F32, n), 2.0, 1.0, n])[1]
        z = reference(kernel, [y.astype(np.float32), poisoned(DType.F32, n), -0.5, 3.0, n])[1]
        assert_close(bufs.get(bz, DType.F32), z, DType.F32, "timed launch after a launch")


def test_release_then_compile_again(
    device: Device, local: int, rng: np.random.Generator, require: Require
) -> None:
    require(DType.F32, ARITHMETIC)
    kernel = axpb(DType.F32, local)
    n = 1000
    args: list[HostArg] = [random(rng, DType.F32, n), poisoned(DType.F32, n), 0.75, 2.0, n]
    want = reference(kernel, args)[1]
    for attempt in ("first", "second"):
        program = device.compile(kernel)
        got = launch(device, program, args)
        device.release(program)
        assert_close(got[1], want, DType.F32, f"{attempt} compile")


def test_a_released_program_refuses_to_launch(
    device: Device, pool: MemoryPool, local: int, rng: np.random.Generator, require: Require
) -> None:
    """After ``release``, a launch (timed or not) raises IncorrectKernelArg instead of using
    freed resources, and the device goes on working; a second release does nothing."""
    require(DType.F32, ARITHMETIC)
    kernel = axpb(DType.F32, local)
    n = 500
    program = device.compile(kernel)
    with Buffers(pool) as bufs:
        bx, by = bufs.put(random(rng, DType.F32, n)), bufs.put(poisoned(DType.F32, n))
        args: list[Arg] = [bx, by, 2.0, 1.0, n]
        device.launch(program, args)
        device.release(program)
        device.release(program)  # again: nothing happens
        for attempt in (device.launch, device.launch_timed):
            with pytest.raises(BackendError) as caught:
                attempt(program, args)
            assert caught.value.status is ErrorStatus.INCORRECT_KERNEL_ARG, attempt.__name__
        device.synchronize()
    args_host: list[HostArg] = [random(rng, DType.F32, n), poisoned(DType.F32, n), 0.5, 1.0, n]
    with compiled(device, kernel) as again:
        got = launch(device, again, args_host)
    assert_close(got[1], reference(kernel, args_host)[1], DType.F32, "compiled again")


def test_recording_replays_with_rebound_arguments(
    device: Device, pool: MemoryPool, local: int, rng: np.random.Generator, require: Require
) -> None:
    """Replays read the buffers' current contents; ``set_arg`` rebinds a buffer and a
    scalar; every replay gives the right result."""
    require(DType.F32, ARITHMETIC)
    n = 3000
    add, scale = elementwise("add_f32", [binary(BOp.ADD, DType.F32)], local), axpb(DType.F32, local)
    a, b, b2, a2 = (random(rng, DType.F32, n) for _ in range(4))
    with compiled(device, add) as p_add, compiled(device, scale) as p_scale, Buffers(pool) as bufs:
        ba, bb, bb2 = bufs.put(a), bufs.put(b), bufs.put(b2)
        bc, bd = bufs.put(poisoned(DType.F32, n)), bufs.put(poisoned(DType.F32, n))
        recording = device.record()
        recording.launch(p_add, [ba, bb, bc, n])
        recording.launch(p_scale, [bc, bd, 2.0, 0.5, n])
        for step, (x, y, alpha) in enumerate([(a, b, 2.0), (a2, b, 2.0), (a2, b2, -1.5)]):
            if step == 1:
                pool.write(ba, a2)
            if step == 2:
                recording.set_arg(0, 1, bb2)
                recording.set_arg(1, 2, -1.5)
            recording.replay()
            c = reference(add, [x, y, poisoned(DType.F32, n), n])[2].astype(np.float32)
            d = reference(scale, [c, poisoned(DType.F32, n), alpha, 0.5, n])[1]
            assert_close(bufs.get(bd, DType.F32), d, DType.F32, f"replay {step + 1}")


def test_dependent_launches_in_sequence(
    device: Device, pool: MemoryPool, local: int, rng: np.random.Generator, require: Require
) -> None:
    """Forty launches over five buffers, each reading what earlier ones wrote and
    overwriting what earlier ones read: every hazard a multi-queue scheduler must order."""
    require(DType.U32, ARITHMETIC)
    n = 4099
    add = elementwise("add_u32", [binary(BOp.ADD, DType.U32)], local)
    scale = axpb(DType.U32, local)
    values = [random(rng, DType.U32, n) for _ in range(5)]
    with compiled(device, add) as p_add, compiled(device, scale) as p_scale, Buffers(pool) as bufs:
        buffers = [bufs.put(v) for v in values]
        for step in range(40):
            a, b, out = step % 5, (step + 1) % 5, (step + 2) % 5
            if step % 2:
                device.launch(p_add, [buffers[a], buffers[b], buffers[out], n])
                values[out] = reference(add, [values[a], values[b], values[out], n])[2]
            else:
                alpha = step + 3
                device.launch(p_scale, [buffers[a], buffers[out], alpha, 7, n])
                values[out] = reference(scale, [values[a], values[out], alpha, 7, n])[1]
        device.synchronize()
        for i, (buf, want) in enumerate(zip(buffers, values)):
            assert_close(bufs.get(buf, DType.U32), want, DType.U32, f"buffer {i}")


def test_buffers_released_during_a_launch_stay_alive(
    device: Device, pool: MemoryPool, local: int, rng: np.random.Generator, require: Require
) -> None:
    """A buffer released right after a launch that reads it is freed only once the launch
    is done: new buffers written at once cannot change the result."""
    require(DType.F32, ARITHMETIC)
    n = 1 << 18
    x = random(rng, DType.F32, n)
    kernel = axpb(DType.F32, local)
    with compiled(device, kernel) as program, Buffers(pool) as bufs:
        by = bufs.put(poisoned(DType.F32, n))
        bx = pool.allocate(x.nbytes)
        pool.write(bx, x)
        device.launch(program, [bx, by, 3.0, -1.0, n])
        pool.release(bx)
        bufs.put(np.full(n, 1e30, np.float32))  # may reuse the released memory
        device.synchronize()
        want = reference(kernel, [x, poisoned(DType.F32, n), 3.0, -1.0, n])[1]
        assert_close(bufs.get(by, DType.F32), want, DType.F32, "result")


def test_zero_work_groups_do_nothing(
    device: Device, pool: MemoryPool, local: int, rng: np.random.Generator, require: Require
) -> None:
    """A ``Variable`` that makes no work-groups (``n = 0``) is allowed: the launch, timed or
    not, raises nothing and writes nothing, and the device goes on working."""
    require(DType.F32, ARITHMETIC)
    n = 3 * local
    x = random(rng, DType.F32, n)
    kernel = axpb(DType.F32, local)
    with compiled(device, kernel) as program, Buffers(pool) as bufs:
        bx, by = bufs.put(x), bufs.put(poisoned(DType.F32, n))
        device.launch(program, [bx, by, 1.5, -0.25, 0])
        ns = device.launch_timed(program, [bx, by, 1.5, -0.25, 0])
        assert isinstance(ns, int) and ns >= 0, f"launch_timed returned {ns!r}"
        device.synchronize()
        assert_poison(bufs.get(by, DType.F32), DType.F32, "output of zero work-groups")
        device.launch(program, [bx, by, 1.5, -0.25, n])
        want = reference(kernel, [x, poisoned(DType.F32, n), 1.5, -0.25, n])[1]
        assert_close(bufs.get(by, DType.F32), want, DType.F32, "the launch after them")


def test_a_group_of_max_local_threads(device: Device, require: Require) -> None:
    """A group of exactly ``max_local_threads`` work-items (on two axes where one cannot
    hold them) runs every work-item once."""
    require(INDEX, STORAGE)
    sizes = _full_group(device)
    kernel = local_threads(sizes)
    threads = sizes[0] * sizes[1]
    args: list[HostArg] = [poisoned(INDEX, threads + 8)]
    got = run(device, kernel, args)
    assert_prefix(got[0], reference(kernel, args)[0], INDEX, threads, f"{sizes} work-items")


def test_local_memory_up_to_the_limit(
    device: Device, local: int, rng: np.random.Generator, require: Require
) -> None:
    """A group uses all of ``local_mem_size`` (in whole f32s): every element it staged there
    comes back, read by another work-item after a barrier."""
    require(DType.F32, STORAGE)
    length = device.info.local_mem_size // 4
    if length == 0:
        pytest.skip(f"{device.name} has {device.info.local_mem_size} bytes of local memory")
    x = random(rng, DType.F32, length)
    kernel = reverse_in_local_memory(length, local)
    got = run(device, kernel, [x, poisoned(DType.F32, length + local)])
    assert_prefix(got[1], x[::-1], DType.F32, length, f"{length * 4} bytes reversed")


def test_local_memory_declared_in_a_loop_and_an_if(
    device: Device, local: int, rng: np.random.Generator, require: Require
) -> None:
    """Local memory whose ``Define`` is inside a loop or an ``If`` works like any other."""
    require(DType.F32, ARITHMETIC)
    blocks = 3
    kernel = local_memory_in_scopes(blocks, local)
    if not _fits(device, kernel):
        pytest.skip(f"{device.name}: two arrays of {local} f32 exceed its local memory")
    x = random(rng, DType.F32, blocks * local)
    got = run(device, kernel, [x, poisoned(DType.F32, (blocks + 1) * local)])[1]
    want = np.concatenate([x.reshape(blocks, local)[:, ::-1].ravel(), x[:local]])
    assert_close(got, want.astype(np.float64), DType.F32, "reversed blocks")


def _fits(device: Device, kernel: Kernel) -> bool:
    """Whether ``kernel`` is within the device's limits."""
    try:
        check_limits(kernel, device.info)
    except IRError:
        return False
    return True


def _within_limits(device: Device, local: tuple[int, int, int]) -> tuple[int, int, int]:
    """``local`` shrunk to the device's limits: each axis to its own, then the largest
    halved until the group is within ``max_local_threads``."""
    sizes = [min(size, limit) for size, limit in zip(local, device.info.max_local_work_dims)]
    while sizes[0] * sizes[1] * sizes[2] > device.info.max_local_threads:
        largest = sizes.index(max(sizes))
        sizes[largest] = max(1, sizes[largest] // 2)
    return sizes[0], sizes[1], sizes[2]


def _full_group(device: Device) -> tuple[int, int]:
    """Work-items ``(x, y)`` of a group of exactly ``max_local_threads``, the most on axis
    0; skips where the per-axis limits allow no such group on two axes."""
    limit = device.info.max_local_threads
    x_max, y_max = device.info.max_local_work_dims[:2]
    for x in range(min(limit, x_max), 0, -1):
        if limit % x == 0 and limit // x <= y_max:
            return x, limit // x
    pytest.skip(f"no two axes hold a group of {limit}: {_local_limits(device)}")


def _local_limits(device: Device) -> str:
    """The device's limits on a group's work-items, for a skip's reason."""
    threads, dims = device.info.max_local_threads, device.info.max_local_work_dims
    return f"max_local_threads {threads}, max_local_work_dims {dims}"


BUILTIN_NAMES = (
    "exp", "sqrt", "abs", "memcpy", "printf", "main", "_Bool", "half", "float4",
    "get_global_id", "barrier", "threadIdx", "atomicAdd",
)  # fmt: skip
"""Identifiers taken by C, OpenCL C or CUDA: functions, types, built-in variables."""


def test_kernels_may_have_any_identifier_as_name(
    device: Device, local: int, require: Require
) -> None:
    """The IR allows any identifier as a kernel's name; a backend must compile and run a
    kernel whatever its name, also one its language already uses."""
    require(DType.F32, STORAGE)
    x = np.arange(1, 101, dtype=np.float32)
    failures = []
    for name in BUILTIN_NAMES:
        kernel = elementwise(name, [copy(DType.F32)], local)
        try:
            out = run(device, kernel, [x, poisoned(DType.F32, 100), 100])[1]
        except Exception as error:  # every name is tried, and each failure reported
            failures.append(f"{name}: {type(error).__name__}: {error}")  # with its log
            continue
        if not np.array_equal(out, x):
            failures.append(f"{name}: wrong result")
    assert not failures, "kernels that failed by name:\n" + "\n".join(failures)
