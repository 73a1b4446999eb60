"""Cumulative sums and products (``cumulative_sum`` and ``cumulative_prod`` of the
standard's statistical functions) as a custom op of hand-written kernels.

Two layouts, by the axis:

- the contiguous last axis: work-groups scan blocks of ``ITEMS * L`` elements of a row in
  local memory (coalesced loads into a tile, a sequential scan of ``ITEMS`` elements per
  work-item, a scan of the work-items' totals across the group). A row of more than one
  block is reduce-then-scan: one launch writes each block's total, the totals are scanned
  by the same kernels (recursively, as rows of blocks), and a last launch scans every
  block again from its carry-in, the running value of the blocks before it.
- any other axis: one work-item per column looping down the axis; neighbouring work-items
  read neighbouring elements. Where there are too few columns to fill a device, the axis is
  moved last and scanned as rows instead (two copies, a parallel scan).

The standard's dtype rules: the result has ``dtype`` and each element of ``x`` is cast to
it before it is accumulated. float16 and bfloat16 accumulate in float32 and each element is
the running value rounded once (numpy's float16 ``cumsum`` rounds the running value at every
step, which drifts on long rows); every other dtype accumulates in itself (integers wrap).
Floats are summed in a blocked order, not strictly left to right: each element is within
the dtype's rounding of the exact running value, not bitwise numpy's.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from math import prod
from typing import TYPE_CHECKING

from zyx.array.custom import both, flat_item, group_size
from zyx.array.manipulation import normalize_axis
from zyx.dtypes import DType, DTypeCapability
from zyx.graph import nodes
from zyx.graph.nodes import Custom, CustomLaunch, Node, ReduceOp
from zyx.graph.views import View
from zyx.ir.builder import KernelBuilder, Value, ceil_div
from zyx.ir.ops import INDEX, Kernel, ParamKind, Storage
from zyx.tensor import Tensor, require

if TYPE_CHECKING:
    from zyx.backend import Device

__all__: list[str] = []

ITEMS = 8
"""Elements each work-item scans sequentially in a row block: a block is ``ITEMS * L``."""

MIN_COLUMNS = 4096
"""Columns from which a scan along a non-last axis loops down each column; fewer would leave
most of a GPU idle, so the axis is moved last and scanned as rows."""


def accumulator(dtype: DType) -> DType:
    """The dtype a scan of ``dtype`` results accumulates in."""
    return DType.F32 if dtype in (DType.F16, DType.BF16) else dtype


def identity(op: ReduceOp) -> int:
    return 0 if op is ReduceOp.SUM else 1


def _combine(op: ReduceOp, a: Value, b: Value) -> Value:
    return a + b if op is ReduceOp.SUM else a * b


def _element(v: Value, dtype: DType, acc: DType) -> Value:
    """An element of ``x`` as the scan adds it: cast to the result dtype (the standard),
    then to the accumulator."""
    if v.dtype is not dtype:
        v = v.cast(dtype)
    return v.cast(acc) if acc is not dtype else v


def cumulative(
    x: Tensor, op: ReduceOp, axis: int | None, dtype: DType, include_initial: bool
) -> Tensor:
    """The running sum or product of ``x`` along ``axis``, of ``dtype`` (already resolved by
    the standard's rules), with the identity first where ``include_initial``."""
    name = "cumulative_sum" if op is ReduceOp.SUM else "cumulative_prod"
    if x.ndim == 0:
        raise ValueError(f"{name} needs an array of at least one dimension, got shape ()")
    if axis is None:
        if x.ndim > 1:
            raise ValueError(
                f"{name}: axis is required for a {x.ndim}-D array (shape {x.shape}); the "
                "standard makes it optional for 1-D arrays only"
            )
        axis = 0
    d = normalize_axis(axis, x.ndim, name)
    require(x.device, dtype, DTypeCapability.ARITHMETIC, name)
    shape = x.shape[:d] + (x.shape[d] + include_initial,) + x.shape[d + 1 :]
    inner = prod(x.shape[d + 1 :])
    if inner == 1 or prod(x.shape) // max(x.shape[d], 1) >= MIN_COLUMNS:
        scan = _Scan(op, d, include_initial)
        return Tensor(nodes.custom(scan, (x.node,), dtype, shape, x.device))
    last = x.ndim - 1
    order = tuple(a for a in range(x.ndim) if a != d) + (d,)
    moved = nodes.view(x.node, View.identity(x.shape).permute(order))
    scan = _Scan(op, last, include_initial)
    out = nodes.custom(scan, (moved,), dtype, tuple(shape[a] for a in order), x.device)
    back = tuple(order.index(a) for a in range(x.ndim))
    return Tensor(nodes.view(out, View.identity(out.shape).permute(back)))


class _Scan(Custom):
    """The scan of source 0 along ``axis``; ``initial``: the result starts with the
    identity (one more element along the axis)."""

    def __init__(self, op: ReduceOp, axis: int, initial: bool) -> None:
        self.op, self.axis, self.initial = op, axis, initial
        self.key = ("cumulative", op, axis, initial)

    def _dims(self, node: Node) -> tuple[int, int, int]:
        """The source's elements before the axis, along it, and after it."""
        shape = node.srcs[0].shape
        return prod(shape[: self.axis]), shape[self.axis], prod(shape[self.axis + 1 :])

    def _row_plan(self, node: Node) -> _RowPlan:
        outer, n, inner = self._dims(node)
        src = node.srcs[0].dtype
        return _RowPlan(self.op, src, node.dtype, outer, n, self.initial, group_size(node.device))

    def scratch(self, node: Node) -> Sequence[int]:
        if self._dims(node)[2] != 1:
            return ()
        return self._row_plan(node).scratch

    def launches(self, device: Device, node: Node) -> Sequence[CustomLaunch]:
        outer, n, inner = self._dims(node)
        if inner == 1:
            return self._row_plan(node).launches
        local = group_size(device)
        kernel = _column_kernel(self.op, node.srcs[0].dtype, node.dtype, local)
        columns = outer * inner
        return [
            CustomLaunch(kernel, (("src", 0), ("out", 0), n, inner, int(self.initial), columns))
        ]


class _RowPlan:
    """The launches (and scratch buffers) of a scan along contiguous rows: reduce-then-scan
    over blocks, recursing into the blocks' totals."""

    def __init__(
        self, op: ReduceOp, src: DType, out: DType, rows: int, n: int, initial: bool, local: int
    ) -> None:
        self.op, self.local = op, local
        self.scratch: list[int] = []
        self.launches: list[CustomLaunch] = []
        self._plan(("src", 0), ("out", 0), src, out, rows, n, initial)

    def _new(self, nbytes: int) -> tuple[str, int]:
        self.scratch.append(nbytes)
        return ("scratch", len(self.scratch) - 1)

    def _plan(
        self, src: tuple[str, int], dst: tuple[str, int], src_dtype: DType, dtype: DType,
        rows: int, n: int, initial: bool,
    ) -> None:  # fmt: skip
        acc = accumulator(dtype)
        block = ITEMS * self.local
        blocks = max(1, -(-n // block))
        sizes = (n, blocks, rows * blocks)
        if blocks == 1:
            carry = self._new(acc.itemsize)  # never read: no block has blocks before it
        else:
            totals = self._new(rows * blocks * acc.itemsize)
            carry = self._new(rows * blocks * acc.itemsize)
            reduce = _row_kernel(self.op, src_dtype, acc, self.local, totals=True)
            self.launches.append(CustomLaunch(reduce, (src, carry, totals, *sizes, 0)))
            self._plan(totals, carry, acc, acc, rows, blocks, False)
        scan = _row_kernel(self.op, src_dtype, dtype, self.local, totals=False)
        self.launches.append(CustomLaunch(scan, (src, carry, dst, *sizes, int(initial))))


@cache
def _row_kernel(op: ReduceOp, src: DType, dtype: DType, local: int, totals: bool) -> Kernel:
    """A work-group per block of a row. Params: the source, the inclusive scan of the
    blocks' totals (the carries), the destination; Variables: the row length, blocks per
    row, blocks in all, and ``initial`` (0 or 1: the destination's rows start with the
    identity). With ``totals``, each group writes its block's total instead of the scan."""
    acc = accumulator(dtype)
    kb = KernelBuilder(f"cumulative_{op.value}_{'totals' if totals else 'rows'}")
    x = kb.param(src)
    carries = kb.param(acc)
    out = kb.param(acc if totals else dtype, ParamKind.GLOBAL_MUT)
    n, blocks, groups, initial = kb.variable(), kb.variable(), kb.variable(), kb.variable()
    g, lid = kb.group(0, ceil_div(groups, 1)), kb.local(0, local)
    row, b = g / blocks, g % blocks
    start = b * (ITEMS * local)
    tile = kb.define(acc, ITEMS * local, Storage.LOCAL)
    partial = kb.define(acc, local, Storage.LOCAL)
    value = kb.define(acc)
    with kb.loop(ITEMS) as e:  # coalesced: neighbouring work-items load neighbours
        p = e * local + lid
        value[0] = kb.const(identity(op), acc)
        with kb.if_(start + p < n):
            value[0] = _element(x[row * n + start + p], dtype, acc)
        tile[p] = value[0]
    kb.barrier()
    value[0] = kb.const(identity(op), acc)
    with kb.loop(ITEMS) as e:
        value[0] = _combine(op, value[0], tile[lid * ITEMS + e])
    _group_scan(kb, op, partial, lid, value[0], local)
    if totals:
        with kb.if_(lid.eq(local - 1)):
            out[g] = partial[local - 1]
        return kb.build()
    running = kb.define(acc)
    running[0] = kb.const(identity(op), acc)
    with kb.if_(b > 0):
        running[0] = carries[row * blocks + b - 1]
    with kb.if_(lid > 0):
        running[0] = _combine(op, running[0], partial[lid - 1])
    with kb.loop(ITEMS) as e:  # each work-item's own elements: no barrier before
        running[0] = _combine(op, running[0], tile[lid * ITEMS + e])
        tile[lid * ITEMS + e] = running[0]
    kb.barrier()
    width = n + initial
    with kb.if_(both(kb, (lid + b).eq(0), initial > 0)):
        out[row * width] = kb.const(identity(op), dtype)
    with kb.loop(ITEMS) as e:
        p = e * local + lid
        with kb.if_(start + p < n):
            out[row * width + initial + start + p] = tile[p].cast(dtype)
    return kb.build()


def _group_scan(
    kb: KernelBuilder, op: ReduceOp, partial: Value, lid: Value, value: Value, local: int
) -> None:
    """``partial[i]`` becomes the inclusive scan of the work-items' ``value`` up to ``i``
    (Hillis-Steele: log2(local) steps, each read before a barrier and written after). A
    loop, not unrolled: PoCL compiles each barrier region apart (17 s for 16 barriers)."""
    partial[lid] = value
    kb.barrier()
    other = kb.define(value.dtype)
    with kb.loop(local.bit_length() - 1) as s:
        step = kb.const(1, INDEX) << s
        other[0] = kb.const(identity(op), value.dtype)
        with kb.if_(lid >= step):
            other[0] = partial[lid - step]
        kb.barrier()
        partial[lid] = _combine(op, partial[lid], other[0])
        kb.barrier()


@cache
def _column_kernel(op: ReduceOp, src: DType, dtype: DType, local: int) -> Kernel:
    """A work-item per column looping down the axis. Params: source, destination;
    Variables: the axis length, the elements after the axis, ``initial`` (0 or 1), and the
    number of columns."""
    acc = accumulator(dtype)
    kb = KernelBuilder(f"cumulative_{op.value}_columns")
    x = kb.param(src)
    out = kb.param(dtype, ParamKind.GLOBAL_MUT)
    n, inner, initial, columns = kb.variable(), kb.variable(), kb.variable(), kb.variable()
    c = flat_item(kb, columns, local)
    with kb.if_(c < columns):
        outer, column = c / inner, c % inner
        source = outer * n * inner + column
        target = outer * (n + initial) * inner + column
        with kb.if_(initial > 0):
            out[target] = kb.const(identity(op), dtype)
        running = kb.define(acc)
        running[0] = kb.const(identity(op), acc)
        with kb.loop(n) as j:
            running[0] = _combine(op, running[0], _element(x[source + j * inner], dtype, acc))
            out[target + (j + initial) * inner] = running[0].cast(dtype)
    return kb.build()
