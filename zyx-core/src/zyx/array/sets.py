"""Set functions (the standard's "Set Functions"): ``unique_all``, ``unique_counts``,
``unique_inverse`` and ``unique_values``, on the device.

``x`` is flattened and sorted stably (``argsort``, realized), a run of equal values starts
where an element differs from the one before it, the running count of the starts is
realized (its last element is the number of unique values: the standard's data-dependent
shape), and the starts are compacted. From these, lazily: the values (the sorted array at
the starts), the indices of first occurrences (the sort is stable: a run's first element
is its value's first occurrence in ``x``), the counts (the distances between starts), and
the inverse indices (each element's run number, scattered back to its place in ``x``).

Uniqueness is the standard's value equality: every NaN is distinct (a count of one each,
sorted last, in their order in ``x``), ``-0.0`` and ``0.0`` are one value (the first
occurring of them). The values come sorted ascending (the standard leaves their order
open). On a device built for finite math (NaN undefined) NaNs have no defined place.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, NamedTuple

from zyx.array.custom import both, flat_item, group_size
from zyx.array.dtypes import DEFAULT_INDEX
from zyx.array.elementwise import not_equal, subtract
from zyx.array.indexing import take
from zyx.array.manipulation import concat, reshape
from zyx.array.searching import compact, running_count
from zyx.array.sorting import argsort
from zyx.dtypes import DType, DTypeCapability
from zyx.graph import nodes
from zyx.graph.nodes import Custom, CustomLaunch, Node
from zyx.ir.builder import KernelBuilder
from zyx.ir.ops import INDEX, Kernel, ParamKind
from zyx.tensor import Tensor, array_argument, require, scalar_tensor

if TYPE_CHECKING:
    from zyx.backend import Device

__all__ = ["unique_all", "unique_counts", "unique_inverse", "unique_values"]


class UniqueAllResult(NamedTuple):
    values: Tensor
    indices: Tensor
    inverse_indices: Tensor
    counts: Tensor


class UniqueCountsResult(NamedTuple):
    values: Tensor
    counts: Tensor


class UniqueInverseResult(NamedTuple):
    values: Tensor
    inverse_indices: Tensor


class _Runs(NamedTuple):
    """``x`` flattened, the order that sorts it, and its runs of equal sorted values."""

    flat: Tensor
    order: Tensor
    """The stable ascending ``argsort`` of ``flat`` (realized)."""
    running: Tensor
    """Per sorted position, the number of runs started up to it (realized)."""
    starts: Tensor
    """The sorted positions where runs start."""

    def values(self) -> Tensor:
        return take(self.flat, self.firsts())

    def firsts(self) -> Tensor:
        """The index in ``flat`` of each run's first occurrence."""
        return take(self.order, self.starts)

    def counts(self) -> Tensor:
        if not self.starts.size:
            return self.starts
        # The length as a kernel argument (a Variable), not a constant: shape-generic.
        size = scalar_tensor(self.flat.size, DEFAULT_INDEX, self.flat.device, "counts")
        end = Tensor(nodes.reshape(size.node, (1,)))
        return subtract(concat([self.starts[1:], end]), self.starts)

    def inverse(self, shape: tuple[int, ...]) -> Tensor:
        """Each element's run number, in ``x``'s shape."""
        scatter = _Scatter()
        srcs = (self.running.node, self.order.node)
        ranks = Tensor(
            nodes.custom(scatter, srcs, DEFAULT_INDEX, self.flat.shape, self.flat.device)
        )
        return reshape(subtract(ranks, 1), shape)


def _runs(x: Tensor, name: str) -> _Runs:
    x = array_argument(x, name)
    require(x.device, x.dtype, DTypeCapability.ARITHMETIC, name)
    flat = reshape(x, (x.size,))
    keys = flat.astype(DType.U8) if x.dtype is DType.BOOL else flat  # sort has no bool order
    order = argsort(keys).realize()
    ordered = take(flat, order)
    if x.size:
        first = Tensor(nodes.reshape(nodes.const(True, DType.BOOL, x.device), (1,)))
        begins = concat([first, not_equal(ordered[1:], ordered[:-1])])  # NaN != NaN
    else:
        begins = Tensor(nodes.cast(ordered.node, DType.BOOL))
    running = running_count(begins)
    return _Runs(flat, order, running, compact(running))


def unique_all(x: Tensor, /) -> UniqueAllResult:
    runs = _runs(x, "unique_all")
    return UniqueAllResult(runs.values(), runs.firsts(), runs.inverse(x.shape), runs.counts())


def unique_counts(x: Tensor, /) -> UniqueCountsResult:
    runs = _runs(x, "unique_counts")
    return UniqueCountsResult(runs.values(), runs.counts())


def unique_inverse(x: Tensor, /) -> UniqueInverseResult:
    runs = _runs(x, "unique_inverse")
    return UniqueInverseResult(runs.values(), runs.inverse(x.shape))


def unique_values(x: Tensor, /) -> Tensor:
    return _runs(x, "unique_values").values()


class _Scatter(Custom):
    """Sources: values and a permutation of their positions (int64, same length); the
    result holds each value at its position."""

    key = "scatter"

    def launches(self, device: Device, node: Node) -> Sequence[CustomLaunch]:
        kernel = _scatter_kernel(group_size(device))
        return [CustomLaunch(kernel, (("src", 0), ("src", 1), ("out", 0), node.size))]


@cache
def _scatter_kernel(local: int) -> Kernel:
    """Params: values, positions, result; Variable: the length. A position out of range is
    never written (a permutation has none)."""
    kb = KernelBuilder("scatter")
    values, positions = kb.param(INDEX), kb.param(INDEX)
    out = kb.param(INDEX, ParamKind.GLOBAL_MUT)
    n = kb.variable()
    i = flat_item(kb, n, local)
    with kb.if_(i < n):
        at = positions[i]
        with kb.if_(both(kb, at >= 0, at < n)):
            out[at] = values[i]
    return kb.build()
