"""Lowering the graph to the IR: costs that must stay linear in the graph's size; reduce
kernels that keep their row resident across passes; reductions split in two stages. Each
against numpy in float64 on random data, into poisoned outputs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from array_support import ARITHMETIC, NUMERIC, data, on, reference, require

import zyx
from zyx.backend import Device
from zyx.dtypes import DType
from zyx.graph.cpu import LANES, ROW_KEPT, STRIP, CpuLowerer
from zyx.graph.lower import RESIDENT, UNROLL, KernelSpec, Lowerer, by_dims
from zyx.graph.nodes import Node, Op
from zyx.graph.schedule import CPU_SPREAD, Graph, schedule
from zyx.host.codegen import PARALLEL_LOADS, HostDialect
from zyx.host.device import HostDevice
from zyx.host.pool import HostPool
from zyx.ir.ops import (
    INDEX,
    Binary,
    BOp,
    Const,
    EndLoop,
    If,
    Kernel,
    Load,
    Loop,
    Param,
    Unary,
    UOp,
    Where,
)
from zyx.testing.devices import checked_host
from zyx.testing.numerics import Array, assert_close


def test_a_reduction_over_shared_operands_lowers_in_linear_time() -> None:
    # Each doubling reads the one before twice: 64 levels are 2**64 paths, but 65 nodes.
    # Hoisting a reduction's loop-invariant operands walked the paths (it never ended).
    a = zyx.arange(8, device="host")
    for _ in range(64):
        a = a + a
    assert int(a.sum()) == 0  # 28 * 2**64 wraps to 0 in int64
    b = zyx.asarray(np.ones(4, np.float32), device="host")
    for _ in range(40):
        b = (b + b) * 0.5
    assert float(b.sum()) == 4.0


# ---- reduce kernels: resident rows ------------------------------------------------------


def _lowered(out: zyx.Tensor, local: int, lowerer: type[Lowerer] = Lowerer) -> list[Kernel]:
    """The kernels that realizing ``out`` runs, lowered for work-groups of ``local`` (by
    ``lowerer``: the host's is ``CpuLowerer``, a group of one)."""
    graph = Graph([out.node])
    sched = schedule(graph)
    kernels = []
    for spec in sched.steps:
        assert isinstance(spec, KernelSpec)

        def is_input(n: Node, spec: KernelSpec = spec) -> bool:
            return n is not spec.output and (n.realized or id(n) in sched.boundaries)

        kernels.append(lowerer(spec, is_input, local).lower().kernel)
    return kernels


def _loads(kernel: Kernel) -> int:
    return sum(isinstance(op, Load) and isinstance(kernel.ops[op.src], Param) for op in kernel.ops)


def _softmax(x: zyx.Tensor, axis: int) -> zyx.Tensor:
    e = zyx.exp(x - zyx.max(x, axis=axis, keepdims=True))
    return e / zyx.sum(e, axis=axis, keepdims=True)


@pytest.mark.parametrize("cols", [5, 1000, 4095])
def test_a_softmax_row_that_fits_is_read_from_memory_once(cols: int) -> None:
    """Max, sum of exp and the normalized output read the row through one set of loads
    (``RESIDENT``): a work-group of 256 holds rows up to 4096 in 16 registers per item,
    the same kernel for every row length (but a multiple of 256)."""
    x = zyx.asarray(np.ones((3, cols), np.float32), device="host")
    (kernel,) = _lowered(_softmax(x, 1), local=256)
    assert not any(isinstance(op, Loop) for op in kernel.ops)
    assert _loads(kernel) == RESIDENT
    other_x = zyx.asarray(np.ones((7, 77), np.float32), device="host")
    (other,) = _lowered(_softmax(other_x, 1), local=256)
    assert other.ops == kernel.ops


@pytest.mark.parametrize("cols", [256, 4096])
def test_a_resident_row_that_fills_its_slots_reads_them_unmasked(cols: int) -> None:
    """A row of a multiple of the group's work-items gives each the same count of elements:
    read with no clamp, their loads offsets from one address (a kernel of its own)."""
    x = zyx.asarray(np.ones((3, cols), np.float32), device="host")
    (kernel,) = _lowered(_softmax(x, 1), local=256)
    ops = kernel.ops
    loads = [op for op in ops if isinstance(op, Load) and isinstance(ops[op.src], Param)]
    assert len(loads) == cols // 256
    assert not any(isinstance(ops[op.index], Where) for op in loads)
    assert not any(isinstance(op, If) for op in ops[: ops.index(loads[-1])])


def test_a_softmax_row_too_long_to_keep_reads_it_in_each_pass() -> None:
    x = zyx.asarray(np.ones((3, 4097), np.float32), device="host")
    (kernel,) = _lowered(_softmax(x, 1), local=256)
    assert sum(isinstance(op, Loop) for op in kernel.ops) == 3  # max, sum, output
    # Each loop's full trips, then the last trip's, read once for all three passes.
    assert _loads(kernel) == 3 * UNROLL + UNROLL


def test_full_trips_of_a_row_read_without_masks() -> None:
    """A row sum's loop reads its elements unclamped (every one is inside the row: an
    offset from one address); only the trip after it, to the row's end, clamps its reads
    and replaces the elements past the end with the identity."""
    x = zyx.asarray(np.ones((3, 5000), np.float32), device="host")
    (kernel,) = _lowered(zyx.sum(x, axis=1), local=256)
    ops = kernel.ops
    loop = next(i for i, op in enumerate(ops) if isinstance(op, Loop))
    end = next(i for i, op in enumerate(ops) if isinstance(op, EndLoop))
    assert _loads(kernel) == 2 * UNROLL
    assert not any(isinstance(op, Where) for op in ops[loop:end])
    assert sum(isinstance(op, Where) for op in ops[end:]) >= 2 * UNROLL  # clamp, identity


# ---- map kernels: along rows ------------------------------------------------------------

MAP_ROWS = [
    ((5, 300), (300,)),  # rows shorter than some groups' work
    ((3, 4, 700), (4, 1)),  # two outer dims, the operand broadcast along the rows
    ((2, 3, 5, 257), (5, 1)),  # three, a row ending just past a chunk of 256
    ((9, 1030), (9, 1)),  # rows longer than a group's work at 256 x 4
]


@pytest.mark.parametrize(("shape", "other"), MAP_ROWS)
def test_a_map_kernel_along_rows_matches_numpy(
    shape: tuple[int, ...], other: tuple[int, ...]
) -> None:
    """A broadcast operand, a transposed one and a maximum, laid out along
    the output's rows (``Lowerer``'s ``rows``) at several group sizes and unrolls, on the
    bounds-checked interpreted host, into a poisoned output: the outer dims are the
    group's, the last dim's index has no division (nor has a 2-D output any)."""
    device = checked_host()
    rng = np.random.default_rng(12)
    a, b = data(rng, shape, DType.F32), data(rng, other, DType.F32)
    transposed = np.ascontiguousarray(np.swapaxes(a, -1, -2))
    x, y, t = on(device, a), on(device, b), on(device, transposed)
    out = zyx.maximum(x + y, 0.0) * zyx.matrix_transpose(t)
    ref = reference(a)
    want = np.maximum(ref + reference(b), 0) * ref
    (spec,) = schedule(Graph([out.node])).steps
    assert isinstance(spec, KernelSpec)

    def is_input(n: Node) -> bool:
        return n.realized

    assert by_dims(spec, is_input)
    for local, unroll in [(32, 4), (64, 16), (256, 4)]:
        lowered = Lowerer(spec, is_input, local, unroll, rows=True).lower()
        divides = [op for op in lowered.kernel.ops if isinstance(op, Binary)
                   and op.op in (BOp.DIV, BOp.MOD)]  # fmt: skip
        assert len(shape) > 2 or not divides, divides
        poisoned = np.full(shape, np.nan, np.float32)
        buf = device.pool.allocate(poisoned.nbytes)
        device.pool.write(buf, poisoned)
        args = [_bound(arg, spec.output, buf) for arg in lowered.args]
        device.launch(device.compile(lowered.kernel), args)
        got = np.empty(shape, np.float32)
        device.pool.read(buf, got)
        device.pool.release(buf)
        assert_close(got, want, DType.F32, f"{shape} + {other} along rows, {local} x {unroll}")


def _bound(arg: Any, out: Node, buf: Any) -> Any:
    """A lowered kernel's argument at a launch: ``buf`` for its output, a realized node's
    buffer, a scalar's value, a shape number as it is."""
    if not isinstance(arg, Node):
        return arg
    if arg is out:
        return buf
    return arg.arg if arg.op is Op.SCALAR else arg.buffer


def _poison(device: Device, shape: tuple[int, ...], dtype: DType) -> None:
    """Leave a buffer of ``shape`` and ``dtype`` holding NaN (integers: their largest value)
    in the allocator's cache, where the next result of that size finds it: an element a
    kernel does not write reads as poison, not as zero."""
    fill = float("nan") if dtype.is_float else dtype.int_range[1]
    # A 0-d result's buffer is that of one element; a 0-d full is its scalar, which a
    # plan cannot realize yet (the runtime binds the scalar where the output buffer goes).
    zyx.realize(zyx.full(shape or (1,), fill, dtype=dtype, device=device))


def _check(device: Device, got: zyx.Tensor, want: Array, dtype: DType, what: str) -> None:
    _poison(device, got.shape, got.dtype)
    out = got.numpy()
    if dtype.is_float:
        assert_close(out, want, dtype, what)
    else:
        np.testing.assert_array_equal(out, want, what)


ROWS = [(3, 5), (2, 2048), (3, 4096), (2, 5000), (2, 16384), (2, 16385), (300, 3)]
"""Rows resident in work-groups of 256 and 1024 (short, and as long as fit), rows past
them (each pass reads the row again), and many short rows (a work-item each)."""


def _compiled_cheaply(device: Device, dtype: DType) -> None:
    """Skip a wide dtype's run off the host: PoCL compiles each kernel of a work-group per
    row in 5 to 25 s on two cores, and these tests compile dozens; f32 runs everywhere."""
    if device.backend != "host" and dtype is not DType.F32:
        pytest.skip(f"{dtype.value} on the host only (compile time on {device.name})")


@pytest.mark.parametrize("dtype", [DType.F32, DType.F64, DType.F16])
def test_multi_pass_row_reductions_match_numpy(array_device: Device, dtype: DType) -> None:
    """Softmax, ``x - mean(x)`` and ``argmax(x - max(x))`` along either axis, resident or
    not, against numpy in float64, into poisoned outputs."""
    _compiled_cheaply(array_device, dtype)
    require(array_device, dtype)
    rng = np.random.default_rng(7)
    for shape in ROWS:
        for axis in (1, 0):
            values = data(rng, shape, dtype)
            x, ref = on(array_device, values), reference(values)
            what = f"{dtype.value} {shape} along {axis}"
            e = np.exp(ref - ref.max(axis, keepdims=True))
            _check(array_device, _softmax(x, axis), e / e.sum(axis, keepdims=True), dtype,
                   f"softmax of {what}")  # fmt: skip
            centred = ref - ref.mean(axis, keepdims=True)
            _check(array_device, x - zyx.mean(x, axis=axis, keepdims=True), centred, dtype,
                   f"x - mean(x) of {what}")  # fmt: skip
            top = zyx.argmax(x - zyx.max(x, axis=axis, keepdims=True), axis=axis)
            _check(array_device, top, values.argmax(axis), DType.I64, f"argmax of {what}")


# ---- reduce kernels: two stages ---------------------------------------------------------

SPLIT = [
    ((400, 700), None),  # one row: chunks of work-groups
    ((2000, 300), 0),  # a work-item per column, in chunks of rows
    ((3, 200000), 1),  # few long rows
    ((4, 140000, 2), 1),  # a reduced dim that is not the last
    ((300, 4, 500), (0, 2)),  # reduced dims apart
]
"""Reductions that run in two stages (``schedule._split``), each of another layout."""


def _kernels(out: zyx.Tensor) -> int:
    graph = Graph([out.node])
    return sum(isinstance(s, KernelSpec) for s in schedule(graph).steps)


@pytest.mark.parametrize(("shape", "axis"), SPLIT)
def test_a_reduction_with_too_few_rows_runs_in_two_stages(
    shape: tuple[int, ...], axis: Any
) -> None:
    x = zyx.asarray(np.ones(shape, np.float32), device="host")
    assert _kernels(zyx.sum(x, axis=axis)) == 2
    assert _kernels(zyx.mean(x, axis=axis) * 2.0) == 2  # what follows fuses into the second
    if not isinstance(axis, tuple):  # an argmax's partials would need their indices too
        assert _kernels(zyx.argmax(x, axis=axis)) == 1
    small = zyx.asarray(np.ones([min(n, 6) for n in shape], np.float32), device="host")
    assert _kernels(zyx.sum(small, axis=axis)) == 1


@pytest.mark.parametrize("dtype", NUMERIC)
def test_two_stage_sums_of_every_numeric_dtype_match_numpy(
    array_device: Device, dtype: DType
) -> None:
    """Over everything and over axis 0 (a work-item per column), into poisoned outputs."""
    _compiled_cheaply(array_device, dtype)
    require(array_device, dtype)
    rng = np.random.default_rng(3)
    for shape, axis in SPLIT[:2]:
        low = 0 if not dtype.is_float and dtype.int_range[0] == 0 else -4
        values = data(rng, shape, dtype, low, 4)
        got = zyx.sum(on(array_device, values), axis=axis)
        want = reference(values).sum(axis=axis, dtype=got.dtype.numpy)
        if dtype.is_float:
            want = reference(values).sum(axis=axis)
        _check(array_device, got, np.asarray(want), got.dtype, f"sum of {dtype.value} {shape}")


@pytest.mark.parametrize(("shape", "axis"), SPLIT)
def test_two_stage_reductions_match_numpy(
    array_device: Device, shape: tuple[int, ...], axis: Any
) -> None:
    """Sum, prod, max, min and mean in f32 and f64, in each layout (off the host, sum and
    max in f32: ``_compiled_cheaply``). The prod's factors are 1 and -1, and a few 2 and
    0.5: exact in any order (a product of many values near 1 rounds with a bias in f32,
    numpy's too), so a factor missed or taken twice shows."""
    rng = np.random.default_rng(4)
    host = array_device.backend == "host"
    names = ("sum", "max", "min", "mean") if host else ("sum", "max")
    for dtype in (DType.F32, DType.F64) if host else (DType.F32,):
        if not array_device.info.supports(dtype, ARITHMETIC):
            continue
        values = data(rng, shape, dtype)
        factors = rng.choice([1, -1, 2, 0.5], shape, p=[0.4998, 0.4998, 0.0002, 0.0002])
        factors = factors.astype(dtype.numpy)
        x, ref = on(array_device, values), reference(values)
        what = f"{dtype.value} {shape} over {axis}"
        for name in names:
            got = getattr(zyx, name)(x, axis=axis)
            _check(array_device, got, np.asarray(getattr(np, name)(ref, axis=axis)), dtype,
                   f"{name} of {what}")  # fmt: skip
        if not host:
            continue
        got = zyx.prod(on(array_device, factors), axis=axis)
        want = np.prod(reference(factors), axis=axis)
        _check(array_device, got, np.asarray(want), dtype, f"prod of {what}")


def test_a_row_sum_of_a_buffer_takes_a_work_group_per_row() -> None:
    """``sum(x, axis=1)`` reads ``x`` itself, whose rows are contiguous: a work-group per
    row, its work-items reading neighbouring elements (the buffer read by the reduction
    directly had no say, and a work-item walked each row alone); ``axis=0`` the other way."""
    x = zyx.asarray(np.ones((4096, 512), np.float32), device="host")
    (rows,) = schedule(Graph([zyx.sum(x, axis=1).node])).steps
    (columns,) = schedule(Graph([zyx.sum(x[:300], axis=0).node])).steps
    assert isinstance(rows, KernelSpec) and rows.group
    assert isinstance(columns, KernelSpec) and not columns.group


# ---- reduce and map kernels laid out for the host's cores (zyx.graph.cpu) ------------------

CPU_SHAPES = [
    ((3, LANES - 1), 1),  # rows shorter than the lanes: all of it in the tail
    ((5, 3 * LANES + 7), 1),  # whole trips and a tail
    ((7, STRIP + 3), 0),  # a strip of columns, and one of 3
    ((LANES + 1, 2 * STRIP), 0),
    ((3, 5, 300), 1),  # kept dims on both sides of the reduced one
    ((3, 7, 1), 1),  # the last kept dim of one element: the strips along the one before
    ((4, 3, 70), (0, 2)),  # reduced dims on both sides of the kept one
    ((4001, 40), 0),  # few columns, many rows: chunks of rows, the last one shorter
    ((2, 1001, 300), 1),  # strips and chunks of each of the outer kept dim's rows
    ((140001,), 0),  # one row: chunks, the last one shorter
]
"""Each layout at the edges of its lanes, strips and chunks."""

INTERPRETED = 20000
"""Elements up to which ``test_host_layouts_match_numpy`` also runs on the interpreter (the
compiled host checks every access in its bounds-checked mode, faster)."""


def test_host_kernels_are_branch_free_loops_of_one_work_item() -> None:
    """On the host a map or reduce kernel's group is one work-item whose loops read
    consecutive elements: no bounds check inside (the trip counts say where to stop), and
    a row reduce's lanes are a loop of constant trip count (what the C compiler unrolls
    and vectorizes)."""
    x = zyx.asarray(np.ones((300, 300), np.float32), device="host")
    for out in (x * 2.0 + 1.0, zyx.sum(x, axis=0), zyx.sum(x * x, axis=1), _softmax(x, 1)):
        for kernel in _lowered(out, 1, CpuLowerer):
            assert kernel.local_size == (1, 1, 1)
            assert not any(isinstance(op, If) for op in kernel.ops), kernel.name
    (rows,) = _lowered(zyx.sum(x, axis=1), 1, CpuLowerer)
    trips = [rows.ops[op.size] for op in rows.ops if isinstance(op, Loop)]
    assert Const(INDEX, LANES) in trips


def test_a_host_reduction_with_few_groups_is_split_for_its_cores() -> None:
    """Under ``CPU_SPREAD`` groups (rows, or strips of columns) a reduction runs in chunks
    that give every core some; a reduction with groups enough, or too small to share, in
    one kernel."""
    x = zyx.asarray(np.ones((2048, 2048), np.float32), device="host")
    for axis in (None, 0):
        first = schedule(Graph([zyx.sum(x, axis=axis).node])).steps[0]
        assert isinstance(first, KernelSpec) and first.chunks > 1
        assert first.chunks * (1 if first.group else 2048 // STRIP) >= CPU_SPREAD
    assert _kernels(zyx.sum(x, axis=1)) == 1
    assert _kernels(zyx.sum(x[:8, :8], axis=0)) == 1


@pytest.mark.parametrize(("shape", "axis"), CPU_SHAPES)
def test_host_layouts_match_numpy(shape: tuple[int, ...], axis: Any) -> None:
    """Sums, max with NaNs, argmin with ties, and a softmax and ``x - mean(x)`` (passes
    that read earlier passes' results, an output of the full shape) in each layout, on the
    compiled host, bounds-checked, and on the interpreted one, into poisoned outputs."""
    rng = np.random.default_rng(11)
    values = rng.integers(-3, 4, shape).astype(np.float32)  # ties everywhere
    holes = values.copy()
    holes.flat[rng.integers(0, holes.size, 5)] = np.nan
    ref, one = reference(values), axis if isinstance(axis, int) else None
    devices = [zyx.device("host"), HostDevice(HostPool(), bounds_checked=True)]
    for device in devices + ([checked_host()] if values.size <= INTERPRETED else []):
        x, nan = on(device, values), on(device, holes)
        what = f"{shape} over {axis} on {device.name}"
        _check(device, zyx.sum(x, axis=axis), np.asarray(ref.sum(axis=axis)), DType.F32,
               f"sum of {what}")  # fmt: skip
        top = zyx.max(nan, axis=axis)
        _poison(device, top.shape, top.dtype)  # exact, NaN where a NaN is in the row
        np.testing.assert_array_equal(top.numpy(), np.max(holes, axis=axis), f"max of {what}")
        if one is None:
            continue
        _check(device, zyx.argmin(x, axis=one), values.argmin(one), DType.I64, f"argmin of {what}")
        e = np.exp(ref - ref.max(one, keepdims=True))
        _check(device, _softmax(x, one), e / e.sum(one, keepdims=True), DType.F32,
               f"softmax of {what}")  # fmt: skip
        _check(device, x - zyx.mean(x, axis=one, keepdims=True), ref - ref.mean(one, keepdims=True),
               DType.F32, f"x - mean(x) of {what}")  # fmt: skip


def test_a_host_kernel_counts_its_loops_as_work() -> None:
    """A group of one work-item is worth the loads of its loops (``PARALLEL_LOADS``), whose
    trips are known at the launch (the Variables of a row's length, a map's last chunk):
    counted once, a large map or reduction would run on one thread, and a small one counted
    as large would pay for waking threads (a 64 x 48 x 80 matmul)."""
    dialect = HostDialect()
    x = zyx.asarray(np.ones((64, 4096), np.float32), device="host")
    for out in (x * 2.0, zyx.sum(x, axis=1), zyx.sum(x * x, axis=0)):
        for kernel in _lowered(out, 1, CpuLowerer):
            work = dialect.loop_work(kernel)
            assert isinstance(work, str) and "p" in work  # of the kernel's Variables
            code = dialect.render(kernel).code
            assert f"if(G0 * (double)1 * ({work}) >= {PARALLEL_LOADS})" in code


@pytest.mark.parametrize(("cols", "exps"), [(ROW_KEPT, 2), (ROW_KEPT + 1, 3)])
def test_a_host_softmax_computes_each_exp_once(cols: int, exps: int) -> None:
    """A row of up to ``ROW_KEPT`` keeps the sum's exp values for the output (in the sum's
    loop and its tail, not again in the output's loop); a longer row computes them again."""
    x = zyx.asarray(np.ones((3, cols), np.float32), device="host")
    (kernel,) = _lowered(_softmax(x, 1), 1, CpuLowerer)
    assert sum(isinstance(op, Unary) and op.op is UOp.EXP for op in kernel.ops) == exps
