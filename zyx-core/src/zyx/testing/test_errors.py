"""Every bad argument is an error with the right status, raised before anything happens:
no buffer, no byte and no pool is left changed. Out of memory leaves the pool usable;
kernels over the device's limits are refused at compile, naming the limit."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from zyx.backend import Arg, Buffer, Device, MemoryPool, Program
from zyx.dtypes import DType, DTypeCapability
from zyx.errors import BackendError, ErrorStatus
from zyx.host.device import HostDevice
from zyx.host.pool import HostPool
from zyx.ir import Kernel, KernelBuilder, ParamKind, ceil_div
from zyx.testing._suite import Allocations
from zyx.testing.harness import Buffers, HostArg, compiled, launch, reference
from zyx.testing.kernels import axpb, local_memory, local_threads, store_variables
from zyx.testing.numerics import assert_close, assert_poison, poisoned, random

pytestmark = pytest.mark.zyx_area("errors")

NBYTES = 4099

STATUS = {
    "read": ErrorStatus.MEMORY_COPY_P2H,
    "write": ErrorStatus.MEMORY_COPY_H2P,
    "retain": ErrorStatus.MEMORY_DEALLOCATION,
    "release": ErrorStatus.MEMORY_DEALLOCATION,
    "copy from it": ErrorStatus.MEMORY_COPY_P2P,
    "copy into it": ErrorStatus.MEMORY_COPY_P2P,
}
"""Each way of using a buffer, and the status its refusal carries."""


def use(operation: str, pool: MemoryPool, buf: Buffer, other: Buffer) -> None:
    """Use ``buf`` through ``pool`` by ``operation``; ``other`` is a live buffer of ``pool``
    of the same size."""
    if operation == "read":
        pool.read(buf, np.empty(buf.nbytes, np.uint8))
    elif operation == "write":
        pool.write(buf, np.zeros(buf.nbytes, np.uint8))
    elif operation == "retain":
        pool.retain(buf)
    elif operation == "release":
        pool.release(buf)
    elif operation == "copy from it":
        pool.copy_from(pool, buf, other)
    else:
        pool.copy_from(pool, other, buf)


@contextmanager
def raises(status: ErrorStatus) -> Iterator[None]:
    """Expect a ``BackendError`` with ``status``."""
    with pytest.raises(BackendError) as caught:
        yield
    assert caught.value.status is status, f"expected {status.value}, got {caught.value}"


def content(pool: MemoryPool, buf: Buffer) -> np.ndarray:
    out = np.empty(buf.nbytes, np.uint8)
    pool.read(buf, out)
    return out


@pytest.fixture
def filled(alloc: Allocations, pool: MemoryPool) -> tuple[Buffer, np.ndarray]:
    """A buffer of ``NBYTES`` random bytes, and the bytes."""
    data = np.random.default_rng(3).integers(0, 256, NBYTES, dtype=np.uint8)
    buf = alloc(NBYTES)
    pool.write(buf, data)
    return buf, data


# ---- pools ---------------------------------------------------------------------------------


@pytest.mark.parametrize("nbytes", [0, -1, -(1 << 40), 1.5, "8", None, True], ids=repr)
def test_bad_sizes_are_refused(alloc: Allocations, pool: MemoryPool, nbytes: object) -> None:
    with raises(ErrorStatus.MEMORY_ALLOCATION):
        alloc(nbytes)  # type: ignore[arg-type]
    assert alloc(16).refcount == 1


def test_out_of_memory_leaves_the_pool_usable(
    alloc: Allocations, pool: MemoryPool, filled: tuple[Buffer, np.ndarray]
) -> None:
    buf, data = filled
    free = pool.free_bytes()
    with raises(ErrorStatus.MEMORY_ALLOCATION):
        alloc(4 * free + (1 << 40))
    if pool.exact_free_bytes:
        assert pool.free_bytes() == free
    np.testing.assert_array_equal(content(pool, buf), data)
    fresh = alloc(NBYTES)
    pool.write(fresh, data)
    np.testing.assert_array_equal(content(pool, fresh), data)


NOT_PLAIN: dict[str, Callable[[], object]] = {
    "objects": lambda: np.array([object(), "zyx", None, 1.5] * 2, dtype=object),
    "records with an object": lambda: np.zeros(4, dtype=[("n", np.int64), ("o", object)]),
    "records": lambda: np.zeros(8, dtype=[("n", np.int32), ("x", np.float32)]),
    "strings": lambda: np.array(["zyx", "abc"] * 4),
    "a str": lambda: "zyx" * 8,
}
"""Host data that is no buffer of plain numbers: an object's bytes are pointers, which a read
would forge and a write would copy raw."""


@pytest.mark.parametrize("kind", NOT_PLAIN)
def test_host_data_of_other_than_plain_numbers_is_refused(
    pool: MemoryPool, filled: tuple[Buffer, np.ndarray], kind: str
) -> None:
    buf, data = filled
    for operation in (pool.write, pool.read):
        host = NOT_PLAIN[kind]()
        before = host.tobytes() if isinstance(host, np.ndarray) else None
        with raises(ErrorStatus.INCORRECT_KERNEL_ARG):
            operation(buf, host)
        if isinstance(host, np.ndarray):
            assert host.tobytes() == before, f"a refused {operation.__name__} wrote"
    np.testing.assert_array_equal(content(pool, buf), data)


BAD_RANGES = [(-1, 4), (NBYTES, 1), (NBYTES - 3, 4), (0, NBYTES + 1), (1 << 62, 1), (2.0, 4)]
"""(offset, size) pairs that do not fit in a buffer of NBYTES."""


@pytest.mark.parametrize("offset, size", BAD_RANGES, ids=repr)
def test_write_out_of_range_is_refused(
    pool: MemoryPool, filled: tuple[Buffer, np.ndarray], offset: int, size: int
) -> None:
    buf, data = filled
    with raises(ErrorStatus.MEMORY_COPY_H2P):
        pool.write(buf, np.full(size, 0x5A, np.uint8), offset)
    np.testing.assert_array_equal(content(pool, buf), data)


@pytest.mark.parametrize("offset, size", BAD_RANGES, ids=repr)
def test_read_out_of_range_is_refused(
    pool: MemoryPool, filled: tuple[Buffer, np.ndarray], offset: int, size: int
) -> None:
    buf, _ = filled
    out = np.full(size, 0x5A, np.uint8)
    with raises(ErrorStatus.MEMORY_COPY_P2H):
        pool.read(buf, out, offset)
    assert np.all(out == 0x5A), "a refused read wrote to its output"


@pytest.mark.parametrize("size", [NBYTES - 1, NBYTES + 1])
def test_copy_between_sizes_is_refused(
    alloc: Allocations, pool: MemoryPool, filled: tuple[Buffer, np.ndarray], size: int
) -> None:
    buf, data = filled
    other = alloc(size)
    pool.write(other, np.full(size, 0x5A, np.uint8))
    with raises(ErrorStatus.MEMORY_COPY_P2P):
        pool.copy_from(pool, other, buf)
    with raises(ErrorStatus.MEMORY_COPY_P2P):
        pool.copy_from(pool, buf, other)
    np.testing.assert_array_equal(content(pool, buf), data)
    assert np.all(content(pool, other) == 0x5A)


@pytest.mark.parametrize("kind", ["read-only array", "bytes"])
def test_read_into_read_only_memory_is_refused(
    pool: MemoryPool, filled: tuple[Buffer, np.ndarray], kind: str
) -> None:
    buf, _ = filled
    out: object
    if kind == "bytes":
        out = bytes(NBYTES)
    else:
        out = np.zeros(NBYTES, np.uint8)
        out.flags.writeable = False
    with raises(ErrorStatus.MEMORY_COPY_P2H):
        pool.read(buf, out)


@pytest.mark.parametrize("operation", list(STATUS))
def test_buffer_of_another_pool_is_refused(
    alloc: Allocations, pool: MemoryPool, host_pool: HostPool, operation: str
) -> None:
    foreign = host_pool.allocate(NBYTES)
    try:
        host_pool.write(foreign, np.full(NBYTES, 0x5A, np.uint8))
        with raises(STATUS[operation]):
            use(operation, pool, foreign, alloc(NBYTES))
        assert foreign.refcount == 1
        assert np.all(content(host_pool, foreign) == 0x5A)
    finally:
        host_pool.release(foreign)


@pytest.mark.parametrize("operation", list(STATUS))
def test_released_buffer_is_refused(alloc: Allocations, pool: MemoryPool, operation: str) -> None:
    """Use after the last release, and a release past zero, are errors."""
    dead = alloc(NBYTES)
    pool.release(dead)
    with raises(STATUS[operation]):
        use(operation, pool, dead, alloc(NBYTES))
    assert dead.refcount == 0


# ---- launches ------------------------------------------------------------------------------

N = 1000


@pytest.fixture(scope="module")
def program(zyx_device: Device, local: int) -> Iterator[Program]:
    """``axpb`` in f32: params ``x`` (buffer), ``y`` (buffer), ``alpha``, ``beta`` (f32
    scalars), ``n`` (i64 scalar)."""
    if not zyx_device.info.supports(DType.F32, DTypeCapability.ARITHMETIC):
        pytest.skip(f"{zyx_device.name} does not claim ARITHMETIC for f32")
    program = zyx_device.compile(axpb(DType.F32, local))
    yield program
    zyx_device.release(program)


BAD_ARGS = [
    "too few", "too many", "buffer for a scalar", "scalar for a buffer", "float for an int",
    "buffer of another pool", "released buffer",
]  # fmt: skip


def bad_args(case: str, good: list[Arg], pool: MemoryPool, foreign: Buffer) -> list[Arg]:
    """``good`` spoiled as ``case`` says."""
    args = list(good)
    if case == "too few":
        return args[:-1]
    if case == "too many":
        return [*args, 1]
    if case == "buffer for a scalar":
        args[2] = args[0]
    elif case == "scalar for a buffer":
        args[0] = 1.0
    elif case == "float for an int":
        args[4] = float(N)
    elif case == "buffer of another pool":
        args[0] = foreign
    else:
        dead = pool.allocate(N * 4)
        pool.release(dead)
        args[0] = dead
    return args


@pytest.mark.parametrize(
    "via, case",
    [
        (via, case)
        for via in ("launch", "launch_timed", "record", "set_arg")
        for case in BAD_ARGS
        if via != "set_arg" or case not in ("too few", "too many")  # set_arg keeps the count
    ],
)
def test_bad_launch_arguments_are_refused(
    device: Device, pool: MemoryPool, program: Program, host_pool: HostPool, case: str, via: str
) -> None:
    """Refused with IncorrectKernelArg, and nothing runs: the output keeps its poison."""
    foreign = host_pool.allocate(N * 4)
    try:
        with Buffers(pool) as bufs:
            x = random(np.random.default_rng(5), DType.F32, N)
            bx, by = bufs.put(x), bufs.put(poisoned(DType.F32, N))
            good: list[Arg] = [bx, by, 2.0, 1.0, N]
            args = bad_args(case, good, pool, foreign)
            with raises(ErrorStatus.INCORRECT_KERNEL_ARG):
                submit(device, program, good, args, via)
            device.synchronize()
            assert np.all(np.isnan(bufs.get(by, DType.F32))), "the refused launch ran"
    finally:
        host_pool.release(foreign)


def submit(device: Device, program: Program, good: list[Arg], args: list[Arg], via: str) -> None:
    """Launch ``program`` with ``args`` ``via`` one of the entry points that take arguments;
    ``set_arg`` rebinds the arguments that differ in a recording made with ``good``."""
    if via == "launch":
        device.launch(program, args)
    elif via == "launch_timed":
        device.launch_timed(program, args)
    elif via == "record":
        device.record().launch(program, args)
    else:
        recording = device.record()
        recording.launch(program, good)
        for position, (old, new) in enumerate(zip(good, args)):
            if new is not old:
                recording.set_arg(0, position, new)
        recording.replay()


def doubled(local: int) -> Kernel:
    """``y[i] = 2 * x[i]`` for ``i < n``: what it reaches of each buffer is ``n`` elements."""
    kb = KernelBuilder("doubled")
    x, y = kb.param(DType.F32), kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    n = kb.variable()
    i = kb.group(0, ceil_div(n, local)) * local + kb.local(0, local)
    with kb.if_(i < n):
        y[i] = x[i] * 2.0
    return kb.build()


@pytest.mark.parametrize("via", ["launch", "launch_timed", "record"])
def test_buffers_smaller_than_the_kernel_reaches_are_refused(
    device: Device, pool: MemoryPool, via: str
) -> None:
    """A launch whose buffer holds fewer elements than the kernel is known to reach for its
    arguments (``zyx.ir.extent``) is IncorrectKernelArg before anything runs, on a native
    launch path too: the output keeps its poison. The program runs where they fit."""
    with (
        compiled(device, doubled(min(64, device.info.max_local_threads))) as program,
        Buffers(pool) as bufs,
    ):
        x = random(np.random.default_rng(11), DType.F32, 100)
        bx, by = bufs.put(x), bufs.put(poisoned(DType.F32, 100))
        short = bufs.put(poisoned(DType.F32, 40))
        cases: list[list[Arg]] = [[bx, by, 101], [bx, short, 100], [short, by, 41]]
        for args in cases:
            with raises(ErrorStatus.INCORRECT_KERNEL_ARG):
                submit(device, program, args, args, via)
        device.synchronize()
        assert np.all(np.isnan(bufs.get(by, DType.F32))), "a refused launch ran"
        assert np.all(np.isnan(bufs.get(short, DType.F32))), "a refused launch ran"
        device.launch(program, [bx, short, 40])
        assert_close(bufs.get(short, DType.F32), 2.0 * x[:40].astype(np.float64), DType.F32)


def test_refused_set_arg_keeps_the_recording(
    device: Device, pool: MemoryPool, program: Program
) -> None:
    """After a refused ``set_arg`` the recording replays with the arguments it had."""
    x = random(np.random.default_rng(6), DType.F32, N)
    with Buffers(pool) as bufs:
        bx, by = bufs.put(x), bufs.put(poisoned(DType.F32, N))
        recording = device.record()
        recording.launch(program, [bx, by, 2.0, 1.0, N])
        with raises(ErrorStatus.INCORRECT_KERNEL_ARG):
            recording.set_arg(0, 2, bx)
        recording.replay()
        assert_close(bufs.get(by, DType.F32), x.astype(np.float64) * 2 + 1, DType.F32)


def test_what_is_not_a_program_kernel_or_buffer_is_refused(
    device: Device, pool: MemoryPool, local: int
) -> None:
    """The usual slips get the error of their operation, not an AttributeError from inside:
    launching or releasing a Kernel not compiled yet, compiling what is not a Kernel,
    releasing what is not a buffer."""
    kernel = axpb(DType.F32, local)
    with Buffers(pool) as bufs:
        x = bufs.put(poisoned(DType.F32, N))
        with raises(ErrorStatus.INCORRECT_KERNEL_ARG):
            device.launch(kernel, [x, x, 1.0, 1.0, N])  # type: ignore[arg-type]
    with raises(ErrorStatus.INCORRECT_KERNEL_ARG):
        device.release(kernel)  # type: ignore[arg-type]
    with raises(ErrorStatus.KERNEL_COMPILATION):
        device.compile("out[i] = x[i]")  # type: ignore[arg-type]
    with raises(ErrorStatus.MEMORY_DEALLOCATION):
        pool.release(None)  # type: ignore[arg-type]


def test_a_program_of_another_device_is_refused(
    device: Device, host_pool: HostPool, local: int
) -> None:
    """Launching or releasing a program that another device compiled (here a host device
    of the test's own) is IncorrectKernelArg, and leaves that program working."""
    other = HostDevice(host_pool)
    kernel = axpb(DType.F32, local)
    x = random(np.random.default_rng(8), DType.F32, N)
    args: list[HostArg] = [x, poisoned(DType.F32, N), 2.0, 1.0, N]
    with compiled(other, kernel) as program:
        with Buffers(other.pool) as bufs:
            theirs: list[Arg] = [bufs.put(x), bufs.put(poisoned(DType.F32, N)), 2.0, 1.0, N]
            for attempt in (device.launch, device.launch_timed):
                with raises(ErrorStatus.INCORRECT_KERNEL_ARG):
                    attempt(program, theirs)
        with raises(ErrorStatus.INCORRECT_KERNEL_ARG):
            device.release(program)
        got = launch(other, program, args)
    assert_close(got[1], reference(kernel, args)[1], DType.F32, "the other device's program")


OUT_OF_RANGE = [
    (DType.I32, 1 << 40), (DType.I32, -(1 << 31) - 1), (DType.U32, -1), (DType.U32, 1 << 32),
    (DType.I64, 1 << 63), (DType.U64, -1), (DType.U64, 1 << 64), (DType.I8, 128),
    (DType.U8, 256), (DType.I16, -(1 << 15) - 1), (DType.U16, 1 << 16), (DType.BOOL, 2),
]  # fmt: skip
"""Int ``Variable`` dtypes, each with a value outside its range: just past an end, or far."""


@pytest.fixture(scope="module")
def variables(zyx_device: Device) -> Iterator[tuple[Program, list[DType]]]:
    """``store_variables`` of every integer dtype (and bool) the device stores."""
    dtypes = [d for d in DType if not d.is_float and zyx_device.info.supports(d)]
    program = zyx_device.compile(store_variables(dtypes))
    yield program, dtypes
    zyx_device.release(program)


@pytest.mark.parametrize("dtype, value", OUT_OF_RANGE, ids=str)
def test_int_variable_out_of_range_is_refused(
    device: Device,
    pool: MemoryPool,
    variables: tuple[Program, list[DType]],
    dtype: DType,
    value: int,
) -> None:
    """A value the native type would wrap is IncorrectKernelArg at launch, and nothing runs;
    the ends of the range pass, exactly."""
    program, dtypes = variables
    if dtype not in dtypes:
        pytest.skip(f"{device.name} does not claim STORAGE for {dtype}")
    low, high = dtype.int_range
    edges = [(high if value > high else low) if d is dtype else d.int_range[1] for d in dtypes]
    with Buffers(pool) as bufs:
        outs = [bufs.put(poisoned(d, 1)) for d in dtypes]
        spoiled: list[Arg] = [value if d is dtype else edge for d, edge in zip(dtypes, edges)]
        with raises(ErrorStatus.INCORRECT_KERNEL_ARG):
            device.launch(program, [*outs, *spoiled])
        device.synchronize()
        for d, out in zip(dtypes, outs):
            assert_poison(bufs.get(out, d), d, f"{d} output of the refused launch")
        device.launch(program, [*outs, *edges])
        for d, out, edge in zip(dtypes, outs, edges):
            assert_close(bufs.get(out, d), np.array([edge], d.numpy), d, f"{d} Variable {edge}")


@pytest.fixture(scope="module")
def float_variables(zyx_device: Device) -> Iterator[tuple[Program, list[DType]]]:
    """``store_variables`` of every float dtype the device stores."""
    dtypes = [d for d in DType if d.is_float and zyx_device.info.supports(d)]
    program = zyx_device.compile(store_variables(dtypes))
    yield program, dtypes
    zyx_device.release(program)


def test_float_variable_past_float64_is_refused_and_past_its_dtype_is_infinite(
    device: Device, pool: MemoryPool, float_variables: tuple[Program, list[DType]]
) -> None:
    """An int no float64 holds is IncorrectKernelArg at launch, and nothing runs; a float
    past its dtype's range arrives as an infinity of its sign, as C converts it."""
    program, dtypes = float_variables
    past = [-1e300 if d is DType.F64 else (-1) ** k * 1e300 for k, d in enumerate(dtypes)]
    want = [-1e300 if d is DType.F64 else (-1) ** k * np.inf for k, d in enumerate(dtypes)]
    with Buffers(pool) as bufs:
        outs = [bufs.put(poisoned(d, 1)) for d in dtypes]
        for big in (1 << 1024, -(10**400)):
            with raises(ErrorStatus.INCORRECT_KERNEL_ARG):
                device.launch(program, [*outs, *past[:-1], big])
        device.synchronize()
        for d, out in zip(dtypes, outs):
            assert_poison(bufs.get(out, d), d, f"{d} output of the refused launch")
        device.launch(program, [*outs, *past])
        for d, out, value in zip(dtypes, outs, want):
            got = bufs.get(out, d).astype(np.float64)
            assert got[0] == value, f"{d} Variable {value}: got {got[0]}"


# ---- device limits -------------------------------------------------------------------------


def refused_at_compile(device: Device, kernel: Kernel, limit: int) -> None:
    """``compile`` refuses ``kernel`` with KernelCompilation naming ``limit``: one
    ``except BackendError`` catches every kernel a device cannot build."""
    with pytest.raises(BackendError) as caught:
        program = device.compile(kernel)
        device.release(program)
    error = caught.value
    assert error.status is ErrorStatus.KERNEL_COMPILATION, error
    assert str(limit) in str(error), f"the error does not name the limit {limit}: {error}"


def test_local_size_over_the_limit_is_refused(device: Device) -> None:
    limit = device.info.max_local_threads
    # Two axes, each within its own limit; sizes chosen so that neither they nor their
    # product spell the limit, which the message must.
    x = min(device.info.max_local_work_dims[0], limit // 2 + 1)
    refused_at_compile(device, local_threads((x, limit // x + 1)), limit)


def test_local_memory_over_the_limit_is_refused(device: Device) -> None:
    limit = device.info.local_mem_size
    refused_at_compile(device, local_memory(limit + 4), limit)


def test_register_arrays_over_the_limit_are_refused(device: Device) -> None:
    limit = device.info.private_mem_size
    if limit >= 1 << 40:
        pytest.skip(f"{device.name} sets no private_mem_size: its compiler bounds registers")
    kb = KernelBuilder("registers")
    out = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    kb.local(0, 1)
    length = limit // 4 + 1
    registers = kb.define(DType.F32, length)
    with kb.loop(length) as j:
        registers[j] = j.cast(DType.F32)
    out[0] = registers[length - 1]
    refused_at_compile(device, kb.build(), limit)


def test_constant_group_count_over_the_limit_is_refused(device: Device) -> None:
    limit = device.info.max_global_work_dims[1]
    kb = KernelBuilder("too_many_groups")
    kb.group(1, limit + 1)
    refused_at_compile(device, kb.build(), limit)


def test_variable_group_count_over_the_limit_is_refused_before_launch(
    device: Device, alloc: Allocations
) -> None:
    """A ``Variable`` that makes too many work-groups is a KernelLaunch error, raised before
    the launch; the device keeps working."""
    limit = device.info.max_global_work_dims[0]
    kb = KernelBuilder("variable_groups")
    out = kb.param(DType.I32, ParamKind.GLOBAL_MUT)
    n = kb.variable()
    group = kb.group(0, ceil_div(n, 1))
    with kb.if_(group.eq(0)):
        out[0] = 7
    program = device.compile(kb.build())
    buf = alloc(4)
    device.pool.write(buf, np.zeros(1, np.int32))
    with pytest.raises(BackendError) as caught:
        device.launch(program, [buf, limit + 1])
    assert caught.value.status is ErrorStatus.KERNEL_LAUNCH
    assert str(limit) in str(caught.value)
    device.launch(program, [buf, 3])
    result = np.zeros(1, np.int32)
    device.pool.read(buf, result)
    assert result[0] == 7
    device.release(program)
