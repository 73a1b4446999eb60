"""Sorting functions (the standard's "Sorting Functions"): ``sort`` and ``argsort``, on the
device, by a bitonic network of hand-written kernels.

Every sort is stable (``stable=False`` sorts stably too, which the standard allows): the
network compares ``(value, index)`` pairs, the index along the axis breaking ties, so
equal values keep their order in both directions. NaNs go to the end, in their order, in
ascending and in descending sorts alike (the standard leaves their place to the
implementation; numpy puts them last ascending, torch and JAX first descending). Signed
zeros are equal (the standard's value equality): ``-0.0`` and ``0.0`` keep their order.

The network runs over each row padded to a power of two ``N``; the padding is virtual:
padded positions hold nothing in memory and sort after every element (their index is
past the row), so a comparator with a padded partner is skipped. Rows of up to ``2L``
positions (``L`` work-items a group) sort in one launch in local memory, several rows a
group; longer ones merge: each stage's steps of distance ``>= 2L`` are launches over the
whole array, the rest one launch in local memory. The sorted axis is moved last first (a
copy where it is not; the result is a view back).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

from zyx.array.custom import before, both, either, flat_item, group_size
from zyx.array.dtypes import DEFAULT_INDEX
from zyx.array.manipulation import normalize_axis
from zyx.dtypes import DType, DTypeCapability
from zyx.graph import nodes
from zyx.graph.nodes import Custom, CustomLaunch, Node
from zyx.graph.views import View
from zyx.ir.builder import KernelBuilder, Value, ceil_div
from zyx.ir.ops import INDEX, Kernel, ParamKind, Storage
from zyx.tensor import Tensor, array_argument, require

if TYPE_CHECKING:
    from zyx.backend import Device

__all__ = ["argsort", "sort"]


def sort(x: Tensor, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Tensor:
    """A sorted copy of ``x`` along ``axis``."""
    return _sorted(x, axis, descending, stable, indices=False, name="sort")


def argsort(
    x: Tensor, /, *, axis: int = -1, descending: bool = False, stable: bool = True
) -> Tensor:
    """The indices (int64) that sort ``x`` along ``axis``."""
    return _sorted(x, axis, descending, stable, indices=True, name="argsort")


def _sorted(
    x: Tensor, axis: int, descending: bool, stable: bool, indices: bool, name: str
) -> Tensor:
    x = array_argument(x, name)
    if x.dtype is DType.BOOL:
        raise TypeError(f"{name} takes real numeric arrays (the standard), got bool")
    if not isinstance(descending, bool) or not isinstance(stable, bool):
        raise TypeError(f"{name}: descending and stable must be bools")
    require(x.device, x.dtype, DTypeCapability.ARITHMETIC, name)
    d = normalize_axis(axis, x.ndim, name)
    last = x.ndim - 1
    if d == last:
        return Tensor(_sort_node(x.node, descending, indices))
    order = tuple(a for a in range(x.ndim) if a != d) + (d,)
    moved = nodes.view(x.node, View.identity(x.shape).permute(order))
    out = _sort_node(moved, descending, indices)
    back = tuple(order.index(a) for a in range(x.ndim))
    return Tensor(nodes.view(out, View.identity(out.shape).permute(back)))


def _sort_node(x: Node, descending: bool, indices: bool) -> Node:
    """``x`` sorted along its last axis (or the indices that do)."""
    dtype = DEFAULT_INDEX if indices else x.dtype
    return nodes.custom(_Sort(descending, indices), (x,), dtype, x.shape, x.device)


def ceil_log2(n: int) -> int:
    return max(n - 1, 0).bit_length()


class _Sort(Custom):
    """Sorts source 0 along its last axis: the result is the values, or (``indices``) their
    positions; the other of the two is the scratch buffer the network also moves."""

    def __init__(self, descending: bool, indices: bool) -> None:
        self.descending, self.indices = descending, indices
        self.key = ("sort", descending, indices)

    def scratch(self, node: Node) -> Sequence[int]:
        other = node.srcs[0].dtype if self.indices else INDEX
        return (node.size * other.itemsize,)

    def launches(self, device: Device, node: Node) -> Sequence[CustomLaunch]:
        dtype, local = node.srcs[0].dtype, group_size(device)
        n = node.shape[-1]
        rows, log_n, log_tile = node.size // n, ceil_log2(n), (2 * local).bit_length() - 1
        moved = (("scratch", 0), ("out", 0)) if self.indices else (("out", 0), ("scratch", 0))
        desc = int(self.descending)
        tiles = -(-(rows << log_n) // (2 * local))
        block, step = _block_kernel(dtype, local), _step_kernel(dtype, local)

        def in_tiles(first: int, end: int, load: int) -> CustomLaunch:
            args = (("src", 0), *moved, n, rows, log_n, first, end, load, desc, tiles)
            return CustomLaunch(block, args)

        out = [in_tiles(0, min(log_n, log_tile), 1)]
        comparators = rows << max(log_n - 1, 0)
        for stage in range(log_tile, log_n):
            for log_j in range(stage, log_tile - 1, -1):
                args = (*moved, n, log_n, stage, log_j, desc, comparators)
                out.append(CustomLaunch(step, args))
            out.append(in_tiles(stage, stage + 1, 0))
        return out


def _insert_zero(kb: KernelBuilder, t: Value, bit: Value) -> Value:
    """``t`` with a 0 bit inserted at position ``bit``: the lower position of the
    comparator number ``t`` of a step whose distance is ``1 << bit``."""
    one = kb.const(1, INDEX)
    low = t & ((one << bit) - 1)
    return ((t >> bit) << (bit + 1)) | low


def _partner(kb: KernelBuilder, i: Value, stage: Value, log_j: Value) -> Value:
    """The higher position compared with ``i``: the mirror image in its block of
    ``2 << stage`` at a stage's first step (``log_j == stage``), else ``i + (1 << log_j)``."""
    one = kb.const(1, INDEX)
    mirror = i ^ ((one << (stage + 1)) - 1)
    return kb.where(log_j.eq(stage), mirror, i + (one << log_j))


def _after(
    kb: KernelBuilder, a: Value, ia: Value, b: Value, ib: Value, desc: Value, n: Value | None
) -> Value:
    """Whether ``(a, ia)`` must move after ``(b, ib)``: ``b`` sorts before it, or ties and
    has the smaller index. With ``n``, an index ``>= n`` is a padded position, which sorts
    after every element (padded positions by index)."""
    by_index = ib < ia
    ties = ~before(kb, a, b, desc)
    value_after = either(kb, before(kb, b, a, desc), both(kb, ties, by_index))
    if n is None:
        return value_after
    padded = either(kb, ia >= n, ib >= n)
    return kb.where(padded, by_index, value_after)


@cache
def _block_kernel(dtype: DType, local: int) -> Kernel:
    """Stages ``[first_stage, end_stage)`` of the network on tiles of ``2 * local``
    positions in local memory, the steps of distance below ``2 * local`` (the whole stage
    where it fits a tile). Params: the source, the values and positions the network moves;
    Variables: the row length, rows, log2 of the padded row, the stages, ``load`` (1: read
    the source and number the positions; 0: read the values and positions), descending,
    tiles."""
    tile_size = 2 * local
    kb = KernelBuilder(f"sort_block_{dtype.value}")
    src = kb.param(dtype)
    values = kb.param(dtype, ParamKind.GLOBAL_MUT)
    positions = kb.param(INDEX, ParamKind.GLOBAL_MUT)
    n, rows, log_n, first, end = (kb.variable() for _ in range(5))
    load, descending, tiles = kb.variable(), kb.variable(), kb.variable()
    g, lid = kb.group(0, ceil_div(tiles, 1)), kb.local(0, local)
    desc = descending.ne(0)
    keys = kb.define(dtype, tile_size, Storage.LOCAL)
    index = kb.define(INDEX, tile_size, Storage.LOCAL)
    one = kb.const(1, INDEX)
    with kb.loop(2) as half:
        p = half * local + lid
        v = g * tile_size + p
        row, j = v >> log_n, v & ((one << log_n) - 1)
        real = both(kb, j < n, row < rows)
        keys[p] = kb.const(0, dtype)
        index[p] = j + n  # a padded position: past every element
        with kb.if_(both(kb, real, load.ne(0))):
            keys[p] = src[row * n + j]
            index[p] = j
        with kb.if_(both(kb, real, load.eq(0))):
            keys[p] = values[row * n + j]
            index[p] = positions[row * n + j]
    kb.barrier()
    with kb.loop(end - first) as s:
        stage = first + s
        top = kb.minimum(stage, kb.const(tile_size.bit_length() - 2, INDEX))
        with kb.loop(top + 1) as q:
            log_j = top - q
            i = _insert_zero(kb, lid, log_j)
            partner = _partner(kb, i, stage, log_j)
            a, b, ia, ib = keys[i], keys[partner], index[i], index[partner]
            swap = _after(kb, a, ia, b, ib, desc, n)
            keys[i], keys[partner] = kb.where(swap, b, a), kb.where(swap, a, b)
            index[i], index[partner] = kb.where(swap, ib, ia), kb.where(swap, ia, ib)
            kb.barrier()
    with kb.loop(2) as half:
        p = half * local + lid
        v = g * tile_size + p
        row, j = v >> log_n, v & ((one << log_n) - 1)
        with kb.if_(both(kb, j < n, row < rows)):
            values[row * n + j] = keys[p]
            positions[row * n + j] = index[p]
    return kb.build()


@cache
def _step_kernel(dtype: DType, local: int) -> Kernel:
    """One step of the network over every row, a work-item per comparator. Params: the
    values and positions; Variables: the row length, log2 of the padded row, the stage,
    log2 of the step's distance, descending, comparators in all."""
    kb = KernelBuilder(f"sort_step_{dtype.value}")
    values = kb.param(dtype, ParamKind.GLOBAL_MUT)
    positions = kb.param(INDEX, ParamKind.GLOBAL_MUT)
    n, log_n, stage, log_j, descending, comparators = (kb.variable() for _ in range(6))
    c = flat_item(kb, comparators, local)
    one = kb.const(1, INDEX)
    row, t = c >> (log_n - 1), c & ((one << (log_n - 1)) - 1)
    i = _insert_zero(kb, t, log_j)
    partner = _partner(kb, i, stage, log_j)
    with kb.if_(both(kb, c < comparators, partner < n)):
        at, other = row * n + i, row * n + partner
        a, b, ia, ib = values[at], values[other], positions[at], positions[other]
        swap = _after(kb, a, ia, b, ib, descending.ne(0), None)
        values[at], values[other] = kb.where(swap, b, a), kb.where(swap, a, b)
        positions[at], positions[other] = kb.where(swap, ib, ia), kb.where(swap, ia, ib)
    return kb.build()
