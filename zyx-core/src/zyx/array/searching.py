"""Searching functions (the standard's "Searching Functions").

``argmax``/``argmin`` return the first index of the extreme value (a NaN counts as the
extreme: the first NaN's index where there is one, as numpy's). ``where`` is a select.

``nonzero`` has a data-dependent shape: a prefix sum of the mask is realized to count the
selected elements, then a compaction kernel writes each selected element's flat index at
its running count (``running_count`` and ``compact``, which the set functions share).
``searchsorted`` is a binary search kernel, a work-item per value searched; it orders
values as ``sort`` does (NaN after every number), so a value inserted at its index keeps
``x1`` sorted.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from zyx.array.custom import before, both, flat_item, group_size
from zyx.array.dtypes import DEFAULT_INDEX, dtype_name, promote
from zyx.array.manipulation import broadcast_node, broadcast_shapes, normalize_axis
from zyx.array.statistical import reduce
from zyx.dtypes import DType, DTypeCapability
from zyx.graph import nodes
from zyx.graph.nodes import Custom, CustomLaunch, Node, ReduceOp
from zyx.graph.views import View
from zyx.ir.builder import KernelBuilder
from zyx.ir.ops import INDEX, BOp, Kernel, ParamKind
from zyx.tensor import Tensor, array_argument, is_scalar, require, same_device, scalar_tensor

if TYPE_CHECKING:
    from zyx.backend import Device

__all__ = ["argmax", "argmin", "count_nonzero", "nonzero", "searchsorted", "where"]


def _arg(x: Tensor, op: ReduceOp, axis: int | None, keepdims: bool, name: str) -> Tensor:
    x = array_argument(x, name)
    if x.dtype is DType.BOOL:
        raise TypeError(f"{name} takes numeric arrays, got bool")
    if axis is None:
        flat = Tensor(nodes.reshape(x.node, (x.size,)))
        out = reduce(flat, op, 0, keepdims=False, dtype=DEFAULT_INDEX, name=name)
        return Tensor(nodes.reshape(out.node, (1,) * x.ndim)) if keepdims else out
    d = normalize_axis(axis, x.ndim, name)
    return reduce(x, op, d, keepdims, DEFAULT_INDEX, name)


def argmax(x: Tensor, /, *, axis: int | None = None, keepdims: bool = False) -> Tensor:
    return _arg(x, ReduceOp.ARGMAX, axis, keepdims, "argmax")


def argmin(x: Tensor, /, *, axis: int | None = None, keepdims: bool = False) -> Tensor:
    return _arg(x, ReduceOp.ARGMIN, axis, keepdims, "argmin")


def where(condition: Tensor, x1: Any, x2: Any, /) -> Tensor:
    """``x1`` where ``condition`` is true, else ``x2`` (either may be a Python scalar)."""
    if not isinstance(condition, Tensor) or condition.dtype is not DType.BOOL:
        raise TypeError("where: the condition must be a bool array")
    if not isinstance(x1, Tensor) and not isinstance(x2, Tensor):
        raise TypeError("where: at least one of x1 and x2 must be an array (the standard)")
    if is_scalar(x1):
        x1 = scalar_tensor(x1, x2.dtype, x2.device, "where")
    if is_scalar(x2):
        x2 = scalar_tensor(x2, x1.dtype, x1.device, "where")
    same_device("where", condition, x1, x2)
    dtype = promote(x1.dtype, x2.dtype)
    shape = broadcast_shapes(condition.shape, x1.shape, x2.shape, what="where")
    a = broadcast_node(nodes.cast(x1.node, dtype), shape)
    b = broadcast_node(nodes.cast(x2.node, dtype), shape)
    return Tensor(nodes.where(broadcast_node(condition.node, shape), a, b))


def count_nonzero(
    x: Tensor, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False
) -> Tensor:
    from zyx.array.statistical import _check, _truth

    # The truth values summed as int64 (sum itself takes no bool arrays).
    truth = _truth(_check(x, "count_nonzero", numeric=False))
    return reduce(truth, ReduceOp.SUM, axis, keepdims, DEFAULT_INDEX, "count_nonzero")


def nonzero(x: Tensor, /) -> tuple[Tensor, ...]:
    """The indices of the non-zero (true) elements of ``x``, one int64 array per dim, in
    row-major order. Realizes the count (the standard's data-dependent shape)."""
    from zyx.array.statistical import _truth

    x = array_argument(x, "nonzero")
    if x.ndim == 0:
        raise ValueError("nonzero of a 0-D array is an error (the standard); reshape it to (1,)")
    require(x.device, x.dtype, DTypeCapability.ARITHMETIC, "nonzero")
    flat = compact(running_count(Tensor(nodes.reshape(_truth(x).node, (x.size,)))))
    return tuple(_coordinate(flat, x.shape, d) for d in range(x.ndim))


def _coordinate(flat: Tensor, shape: tuple[int, ...], d: int) -> Tensor:
    """Dim ``d``'s index of each flat (row-major) index in ``flat``."""
    stride = 1
    for n in shape[d + 1 :]:
        stride *= n
    index = flat.node
    if stride != 1:
        index = nodes.binary(BOp.DIV, index, _index_scalar(stride, flat), DEFAULT_INDEX)
    if d:  # dim 0 needs no remainder: the flat index is in range
        index = nodes.binary(BOp.MOD, index, _index_scalar(shape[d], flat), DEFAULT_INDEX)
    return Tensor(index)


def _index_scalar(value: int, like: Tensor) -> Node:
    return nodes.view(nodes.scalar(value, DEFAULT_INDEX, like.device), View(like.shape, (), ()))


def running_count(mask: Tensor) -> Tensor:
    """The running count (int64, inclusive) of the 1-D bool ``mask``, realized: its last
    element is the length of ``compact``'s result."""
    from zyx.array.scans import cumulative

    return cumulative(mask, ReduceOp.SUM, 0, DEFAULT_INDEX, include_initial=False).realize()


def compact(counts: Tensor) -> Tensor:
    """The positions (int64, ascending) where a mask is true, from its ``running_count``:
    a kernel writes each selected position at its count."""
    count = int(counts[-1]) if counts.size else 0
    return Tensor(nodes.custom(_Compact(), (counts.node,), DEFAULT_INDEX, (count,), counts.device))


class _Compact(Custom):
    """Source 0: the running count of a mask; the result: the positions it counts."""

    key = "compact"

    def launches(self, device: Device, node: Node) -> Sequence[CustomLaunch]:
        kernel = _compact_kernel(group_size(device))
        return [CustomLaunch(kernel, (("src", 0), ("out", 0), node.srcs[0].size, node.size))]


@cache
def _compact_kernel(local: int) -> Kernel:
    """Params: the running count, the positions; Variables: the mask's length, the count."""
    kb = KernelBuilder("compact")
    ends = kb.param(INDEX)
    out = kb.param(INDEX, ParamKind.GLOBAL_MUT)
    n, count = kb.variable(), kb.variable()
    i = flat_item(kb, n, local)
    with kb.if_(i < n):
        end = ends[i]
        previous = kb.define(INDEX)
        previous[0] = kb.const(0, INDEX)
        with kb.if_(i > 0):
            previous[0] = ends[i - 1]
        # Selected where the count steps; a count out of [1, count] is never written.
        with kb.if_(both(kb, both(kb, end > previous[0], end >= 1), count >= end)):
            out[end - 1] = i
    return kb.build()


def searchsorted(
    x1: Tensor,
    x2: Tensor,
    /,
    *,
    side: Literal["left", "right"] = "left",
    sorter: Tensor | None = None,
) -> Tensor:
    """For each value of ``x2``, the index of ``x1`` (1-D, ascending, or ascending through
    ``sorter``) before which it would be inserted: after the smaller elements (``"left"``)
    or after the smaller and equal ones (``"right"``). Compared in the two dtypes'
    promotion; NaN sorts after every number, as in ``sort``. A ``sorter`` index out of
    range reads a clamped valid element (the standard leaves it undefined)."""
    for name, a in (("x1", x1), ("x2", x2)):
        if not isinstance(a, Tensor):
            raise TypeError(f"searchsorted: {name} must be an array, got {type(a).__name__}")
        if a.dtype is DType.BOOL:
            raise TypeError(f"searchsorted: {name} must be real numeric (the standard), got bool")
    if x1.ndim != 1:
        raise ValueError(f"searchsorted: x1 must be 1-D, got shape {x1.shape}")
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r:.40}")
    dtype = promote(x1.dtype, x2.dtype)
    srcs = [x1, x2]
    if sorter is not None:
        if not isinstance(sorter, Tensor) or sorter.dtype.is_float or sorter.dtype is DType.BOOL:
            raise TypeError("searchsorted: sorter must be an integer array")
        if sorter.shape != x1.shape:
            raise ValueError(
                f"searchsorted: sorter has shape {sorter.shape}, x1 has shape {x1.shape}"
            )
        srcs.append(sorter)
    device = same_device("searchsorted", *srcs)
    require(device, dtype, DTypeCapability.ARITHMETIC, f"searchsorted in {dtype_name(dtype)}")
    search = _Search(side == "right", dtype)
    return Tensor(
        nodes.custom(search, tuple(a.node for a in srcs), DEFAULT_INDEX, x2.shape, device)
    )


class _Search(Custom):
    """Sources: the sorted array, the values, and optionally the sorter."""

    def __init__(self, right: bool, dtype: DType) -> None:
        self.right, self.dtype = right, dtype
        self.key = ("searchsorted", right, dtype)

    def launches(self, device: Device, node: Node) -> Sequence[CustomLaunch]:
        sorted_, values, *sorter = (s.dtype for s in node.srcs)
        kernel = _search_kernel(
            sorted_, values, sorter[0] if sorter else None, self.dtype, group_size(device)
        )
        m = node.srcs[0].size
        bufs = tuple(("src", i) for i in range(len(node.srcs)))
        args: tuple[tuple[str, int] | int, ...] = (
            *bufs,
            ("out", 0),
            m,
            node.size,
            m.bit_length(),
            int(self.right),
        )
        return [CustomLaunch(kernel, args)]


@cache
def _search_kernel(
    sorted_: DType, values: DType, sorter: DType | None, dtype: DType, local: int
) -> Kernel:
    """Params: the sorted array, the values, the sorter (where given), the result;
    Variables: the sorted array's length, the values' count, the search's steps
    (``bit_length`` of the length: each halves the interval), ``right`` (0 or 1)."""
    kb = KernelBuilder("searchsorted" if sorter is None else "searchsorted_sorter")
    x1, x2 = kb.param(sorted_), kb.param(values)
    order = kb.param(sorter) if sorter is not None else None
    out = kb.param(INDEX, ParamKind.GLOBAL_MUT)
    m, count, steps, right = kb.variable(), kb.variable(), kb.variable(), kb.variable()
    q = flat_item(kb, count, local)
    with kb.if_(q < count):
        v = x2[q].cast(dtype)
        low, high = kb.define(INDEX), kb.define(INDEX)
        low[0], high[0] = kb.const(0, INDEX), m
        with kb.loop(steps):
            lo, hi = low[0], high[0]
            mid = (lo + hi) >> 1
            at = kb.minimum(mid, m - 1)  # in range: the interval may be empty
            if order is not None:
                at = kb.maximum(kb.minimum(order[at].cast(INDEX), m - 1), 0)
            a = x1[at].cast(dtype)
            # Past ``mid`` where x1[mid] sorts before v ("left") or not after it ("right").
            later = kb.where(right.ne(0), ~before(kb, v, a), before(kb, a, v))
            moves = both(kb, lo < hi, later)
            low[0] = kb.where(moves, mid + 1, lo)
            high[0] = kb.where(both(kb, lo < hi, ~later), mid, hi)
        out[q] = low[0]
    return kb.build()
