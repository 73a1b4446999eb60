"""Searching functions (the standard's "Searching Functions").

``argmax``/``argmin`` return the first index of the extreme value (a NaN counts as the
extreme: the first NaN's index where there is one, as numpy's). ``where`` is a select.
"""

from __future__ import annotations

from typing import Any

from zyx.array.dtypes import DEFAULT_INDEX, promote
from zyx.array.manipulation import broadcast_node, broadcast_shapes, normalize_axis
from zyx.array.statistical import reduce
from zyx.dtypes import DType
from zyx.graph import nodes
from zyx.graph.nodes import ReduceOp
from zyx.tensor import Tensor, is_scalar, same_device, scalar_tensor

__all__ = ["argmax", "argmin", "count_nonzero", "where"]


def _arg(x: Tensor, op: ReduceOp, axis: int | None, keepdims: bool, name: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} takes an array, got {type(x).__name__}")
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
    from zyx.array.statistical import _truth, sum

    return sum(_truth(x), axis=axis, dtype=DEFAULT_INDEX, keepdims=keepdims)
