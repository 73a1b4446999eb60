"""Statistical functions (the standard's "Statistical Functions"), and the utility
functions ``all``, ``any`` and ``diff``.

Reductions keep the reduced dims as size 1 in the graph; ``keepdims=False`` drops them
with a view. ``mean``, ``var`` and ``std`` of float16 and bfloat16 accumulate and divide
in float32 and round once at the end. ``var`` is two passes over the data (the mean, then
the squared deviations), which the scheduler fuses into one kernel.
"""

from __future__ import annotations

import builtins
from typing import Any

from zyx.array.dtypes import DEFAULT_INT, check_dtype, dtype_name
from zyx.array.manipulation import broadcast_node, normalize_axes, normalize_axis
from zyx.dtypes import DType, DTypeCapability
from zyx.graph import nodes
from zyx.graph.nodes import Node, ReduceOp
from zyx.graph.views import View
from zyx.ir.ops import BOp, UOp
from zyx.tensor import Tensor, array_argument, require

__all__ = [
    "cumulative_prod", "cumulative_sum", "max", "mean", "min", "prod", "std", "sum", "var",
    "all", "any", "diff",
]  # fmt: skip


# Read once: reading an enum's member off its class costs a Python call (Python 3.11), and
# every reduction reads these.
_BOOL, _ARITHMETIC = DType.BOOL, DTypeCapability.ARITHMETIC
_SUM_OR_PROD = (ReduceOp.SUM, ReduceOp.PROD)


def _check(x: Any, name: str, numeric: bool = True) -> Tensor:
    array = array_argument(x, name)
    if numeric and array.dtype is _BOOL:
        raise TypeError(f"{name} takes numeric arrays, got bool")
    require(array.device, array.dtype, _ARITHMETIC, name)
    return array


def _finish(node: Node, axes: tuple[int, ...], keepdims: bool) -> Tensor:
    if keepdims:
        return Tensor(node)
    return Tensor(nodes.reshape(node, tuple(n for d, n in enumerate(node.shape) if d not in axes)))


def reduce(x: Tensor, op: ReduceOp, axis: Any, keepdims: bool, dtype: DType, name: str) -> Tensor:
    """``op`` over ``axis`` of ``x``, its result of ``dtype``."""
    axes = normalize_axes(axis, x.ndim, name)
    source = nodes.cast(x.node, dtype) if op in _SUM_OR_PROD else x.node
    if not axes:
        return Tensor(nodes.cast(source, dtype))
    empty = builtins.any(x.shape[d] == 0 for d in axes)
    if empty and op not in _SUM_OR_PROD:
        raise ValueError(
            f"{name} of an empty selection (shape {x.shape}, axis {axis}) is undefined"
        )
    return _finish(nodes.reduce(op, source, axes, dtype), axes, keepdims)


def _sum_dtype(x: Tensor, dtype: DType | None, name: str) -> DType:
    if dtype is not None:
        return check_dtype(dtype, f"{name}'s dtype")
    if x.dtype is DType.BOOL or (x.dtype.is_int and x.dtype.is_signed):
        return DEFAULT_INT
    if x.dtype.is_int:
        return DType.U64
    return x.dtype


def sum(
    x: Tensor, /, *, axis: Any = None, dtype: DType | None = None, keepdims: bool = False
) -> Tensor:  # noqa: A001
    _check(x, "sum")
    return reduce(x, ReduceOp.SUM, axis, keepdims, _sum_dtype(x, dtype, "sum"), "sum")


def prod(
    x: Tensor, /, *, axis: Any = None, dtype: DType | None = None, keepdims: bool = False
) -> Tensor:
    _check(x, "prod")
    return reduce(x, ReduceOp.PROD, axis, keepdims, _sum_dtype(x, dtype, "prod"), "prod")


def max(x: Tensor, /, *, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    _check(x, "max")
    return reduce(x, ReduceOp.MAX, axis, keepdims, x.dtype, "max")


def min(x: Tensor, /, *, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    _check(x, "min")
    return reduce(x, ReduceOp.MIN, axis, keepdims, x.dtype, "min")


def all(x: Tensor, /, *, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    _check(x, "all", numeric=False)
    return (
        reduce(_truth(x), ReduceOp.MIN, axis, keepdims, DType.BOOL, "all")
        if x.size
        else _empty_truth(x, axis, keepdims, True)
    )


def any(x: Tensor, /, *, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    _check(x, "any", numeric=False)
    return (
        reduce(_truth(x), ReduceOp.MAX, axis, keepdims, DType.BOOL, "any")
        if x.size
        else _empty_truth(x, axis, keepdims, False)
    )


def _truth(x: Tensor) -> Tensor:
    if x.dtype is DType.BOOL:
        return x
    zero = nodes.view(
        nodes.const(0.0 if x.dtype.is_float else 0, x.dtype, x.device), View(x.shape, (), ())
    )
    return Tensor(nodes.binary(BOp.NOTEQ, x.node, zero, DType.BOOL))


def _empty_truth(x: Tensor, axis: Any, keepdims: bool, value: bool) -> Tensor:
    """``all``/``any`` over no elements: True and False, the identities."""
    from zyx.array.creation import full

    axes = normalize_axes(axis, x.ndim, "all" if value else "any")
    shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape))
    if not keepdims:
        shape = tuple(n for d, n in enumerate(shape) if d not in axes)
    return full(shape, value, dtype=DType.BOOL, device=x.device)


def _float(x: Tensor, name: str) -> DType:
    """The dtype ``mean``-like functions compute in: float32 for the 16-bit floats."""
    _check(x, name)
    if not x.dtype.is_float:
        raise TypeError(f"{name} takes floating arrays, got {dtype_name(x.dtype)}")
    return DType.F32 if x.dtype in (DType.F16, DType.BF16) else x.dtype


def _count(x: Tensor, axes: tuple[int, ...]) -> int:
    count = 1
    for d in axes:
        count *= x.shape[d]
    return count


def _scalar_like(value: float, like: Node) -> Node:
    return nodes.view(nodes.scalar(value, like.dtype, like.device), View(like.shape, (), ()))


def mean(x: Tensor, /, *, axis: Any = None, keepdims: bool = False) -> Tensor:
    compute = _float(x, "mean")
    axes = normalize_axes(axis, x.ndim, "mean")
    total = (
        nodes.reduce(ReduceOp.SUM, nodes.cast(x.node, compute), axes, compute)
        if axes
        else nodes.cast(x.node, compute)
    )
    n = _count(x, axes)
    value = nodes.binary(BOp.DIV, total, _scalar_like(float(n) if n else 0.0, total), compute)
    return _finish(nodes.cast(value, x.dtype), axes, keepdims)


def var(
    x: Tensor, /, *, axis: Any = None, correction: float = 0.0, keepdims: bool = False
) -> Tensor:
    compute = _float(x, "var")
    axes = normalize_axes(axis, x.ndim, "var")
    return _finish(nodes.cast(_variance(x, axes, correction, compute), x.dtype), axes, keepdims)


def std(
    x: Tensor, /, *, axis: Any = None, correction: float = 0.0, keepdims: bool = False
) -> Tensor:
    compute = _float(x, "std")
    axes = normalize_axes(axis, x.ndim, "std")
    root = nodes.unary(UOp.SQRT, _variance(x, axes, correction, compute))
    return _finish(nodes.cast(root, x.dtype), axes, keepdims)


def _variance(x: Tensor, axes: tuple[int, ...], correction: float, dtype: DType) -> Node:
    value = nodes.cast(x.node, dtype)
    n = _count(x, axes)
    if not axes:
        return nodes.binary(BOp.SUB, value, value, dtype)
    total = nodes.reduce(ReduceOp.SUM, value, axes, dtype)
    mean_ = nodes.binary(BOp.DIV, total, _scalar_like(float(n), total), dtype)
    deviation = nodes.binary(BOp.SUB, value, broadcast_node(mean_, x.shape), dtype)
    squares = nodes.reduce(
        ReduceOp.SUM, nodes.binary(BOp.MUL, deviation, deviation, dtype), axes, dtype
    )
    return nodes.binary(BOp.DIV, squares, _scalar_like(float(n - correction), squares), dtype)


def cumulative_sum(
    x: Tensor,
    /,
    *,
    axis: int | None = None,
    dtype: DType | None = None,
    include_initial: bool = False,
) -> Tensor:
    from zyx.array.scans import cumulative

    _check(x, "cumulative_sum")
    return cumulative(
        x, ReduceOp.SUM, axis, _sum_dtype(x, dtype, "cumulative_sum"), include_initial
    )


def cumulative_prod(
    x: Tensor,
    /,
    *,
    axis: int | None = None,
    dtype: DType | None = None,
    include_initial: bool = False,
) -> Tensor:
    from zyx.array.scans import cumulative

    _check(x, "cumulative_prod")
    return cumulative(
        x, ReduceOp.PROD, axis, _sum_dtype(x, dtype, "cumulative_prod"), include_initial
    )


def diff(
    x: Tensor, /, *, axis: int = -1, n: int = 1, prepend: Tensor | None = None,
    append: Tensor | None = None,
) -> Tensor:  # fmt: skip
    """The ``n``-th discrete difference along ``axis`` (views and one fused subtraction)."""
    from zyx.array.elementwise import not_equal, subtract
    from zyx.array.manipulation import concat

    x = array_argument(x, "diff")
    if x.ndim == 0:
        raise ValueError("diff needs at least a 1-D array")
    d = normalize_axis(axis, x.ndim, "diff")
    if n < 0:
        raise ValueError(f"diff: n must be non-negative, got {n}")
    parts = [p for p in (prepend, x, append) if p is not None]
    out = concat(parts, axis=d) if len(parts) > 1 else x
    head = (slice(None),) * d
    for _ in range(n):
        later, earlier = out[head + (slice(1, None),)], out[head + (slice(None, -1),)]
        out = not_equal(later, earlier) if out.dtype is DType.BOOL else subtract(later, earlier)
    return out
