"""Linear algebra functions of the main namespace (the standard's "Linear Algebra
Functions"): ``matmul``, ``tensordot``, ``vecdot`` (``matrix_transpose`` is a view, in
``zyx.array.manipulation``).

Each is a broadcast product summed over the contracted dims, which the scheduler fuses
into one reduce kernel; operands transposed by views are read in place. The optional
``linalg`` extension is not provided.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

from zyx.array.dtypes import promote
from zyx.array.manipulation import (
    broadcast_node,
    broadcast_shapes,
    broadcast_view,
    normalize_axis,
)
from zyx.dtypes import DType, DTypeCapability
from zyx.graph import nodes
from zyx.graph.nodes import Node, ReduceOp, Reduction
from zyx.graph.views import View
from zyx.ir.ops import BOp
from zyx.tensor import Tensor, require, same_device

__all__ = ["matmul", "tensordot", "vecdot"]


# Read once: reading an enum's member off its class costs a Python call (Python 3.11), and
# these are read by every matmul.
_BOOL, _ARITHMETIC, _MUL, _SUM = DType.BOOL, DTypeCapability.ARITHMETIC, BOp.MUL, ReduceOp.SUM


def _operands(name: str, x1: Tensor, x2: Tensor) -> DType:
    for x in (x1, x2):
        if not isinstance(x, Tensor):
            raise TypeError(f"{name} takes arrays, got {type(x).__name__}")
    a, b = x1.node, x2.node
    if a.device is not b.device:
        same_device(name, x1, x2)
    dtype = a.dtype if a.dtype is b.dtype else promote(a.dtype, b.dtype)
    if dtype is _BOOL:
        raise TypeError(f"{name} takes numeric arrays, got bool")
    require(a.device, dtype, _ARITHMETIC, name)
    return dtype


def _contract(
    a: Node, b: Node, shape: tuple[int, ...], axes: tuple[int, ...], dtype: DType
) -> Node:
    """``sum(a * b)`` over ``axes``, both broadcast to ``shape`` first."""
    product = nodes.binary(BOp.MUL, broadcast_node(a, shape), broadcast_node(b, shape), dtype)
    total = nodes.reduce(ReduceOp.SUM, product, axes, dtype)
    return nodes.reshape(total, tuple(n for d, n in enumerate(shape) if d not in axes))


def _permuted(node: Node, order: tuple[int, ...]) -> Node:
    return nodes.view(node, View.identity(node.shape).permute(order))


def matmul(x1: Tensor, x2: Tensor, /) -> Tensor:
    dtype = _operands("matmul", x1, x2)
    a, b = x1.node, x2.node
    left, right, summed, kept, out = _matmul_parts(a.shape, b.shape)
    a = nodes.view(nodes.cast(a, dtype), left)
    b = nodes.view(nodes.cast(b, dtype), right)
    product = nodes.binary(_MUL, a, b, dtype)
    return Tensor(nodes.view(nodes.reduced(summed, product, kept, dtype), out))


class _Matmul(NamedTuple):
    left: View
    right: View
    summed: Reduction
    """The sum over k, the product's last dim."""
    kept: tuple[int, ...]
    """The sum's shape: k kept as 1."""
    out: View


@lru_cache(maxsize=1024)
def _matmul_parts(shape1: tuple[int, ...], shape2: tuple[int, ...]) -> _Matmul:
    """The views ``matmul`` reads its operands of ``shape1`` and ``shape2`` through, as
    (..., n, 1, k) * (..., 1, m, k), the sum over k, and the view of the sum in the
    result's shape. Memoized: a program multiplies the same shapes again each call, and
    composing the views (a reshape, a transpose and a broadcast each) cost most of
    recording a matmul; making the sum's ``Reduction`` and shape, a fifth of the rest."""
    if not shape1 or not shape2:
        raise ValueError("matmul does not take 0-D arrays (the standard); use multiply")
    a = (1,) + shape1 if len(shape1) == 1 else shape1
    b = shape2 + (1,) if len(shape2) == 1 else shape2
    n, k = a[-2:]
    k2, m = b[-2:]
    if k != k2:
        raise ValueError(f"matmul: shapes {shape1} and {shape2} do not align ({k} != {k2})")
    batch = broadcast_shapes(a[:-2], b[:-2], what="matmul")
    shape = batch + (n, m, k)
    left = _squeezed(View.identity(shape1), a[:-1] + (1, k))
    bt = _squeezed(View.identity(shape2), b).permute(_swap_last(len(b)))
    right = _squeezed(bt, bt.shape[:-2] + (1,) + bt.shape[-2:])
    out = batch + (n, m)
    if len(shape1) == 1:
        out = out[:-2] + out[-1:]
    if len(shape2) == 1:
        out = out[:-1]
    kept = shape[:-1] + (1,)
    return _Matmul(
        _broadcast(left, shape),
        _broadcast(right, shape),
        Reduction(_SUM, (len(shape) - 1,)),
        kept,
        _squeezed(View.identity(kept), out),
    )


def _squeezed(view: View, shape: tuple[int, ...]) -> View:
    """``view`` reshaped to ``shape``, which only adds or drops size-1 dims."""
    squeezed = view.squeeze_to(shape)
    assert squeezed is not None
    return squeezed


def _broadcast(view: View, shape: tuple[int, ...]) -> View:
    """``view`` broadcast to ``shape``."""
    return view if view.shape == shape else broadcast_view(view.shape, shape).after(view)


def _swap_last(ndim: int) -> tuple[int, ...]:
    return (*range(ndim - 2), ndim - 1, ndim - 2)


def tensordot(
    x1: Tensor, x2: Tensor, /, *, axes: int | tuple[Sequence[int], Sequence[int]] = 2
) -> Tensor:
    dtype = _operands("tensordot", x1, x2)
    if isinstance(axes, int):
        count = operator.index(axes)
        if count < 0 or count > min(x1.ndim, x2.ndim):
            raise ValueError(f"tensordot: axes={axes} for arrays of {x1.ndim} and {x2.ndim} dims")
        left = tuple(range(x1.ndim - count, x1.ndim))
        right = tuple(range(count))
    else:
        left = tuple(normalize_axis(a, x1.ndim, "tensordot") for a in axes[0])
        right = tuple(normalize_axis(a, x2.ndim, "tensordot") for a in axes[1])
    if len(left) != len(right) or any(x1.shape[i] != x2.shape[j] for i, j in zip(left, right)):
        raise ValueError(f"tensordot: axes {left} of {x1.shape} and {right} of {x2.shape} differ")
    free1 = [d for d in range(x1.ndim) if d not in left]
    free2 = [d for d in range(x2.ndim) if d not in right]
    contracted = tuple(x1.shape[d] for d in left)
    shape = tuple(x1.shape[d] for d in free1) + tuple(x2.shape[d] for d in free2) + contracted
    a = _permuted(nodes.cast(x1.node, dtype), (*free1, *left))
    a = nodes.reshape(a, a.shape[: len(free1)] + (1,) * len(free2) + contracted)
    b = _permuted(nodes.cast(x2.node, dtype), (*free2, *right))
    b = nodes.reshape(b, (1,) * len(free1) + b.shape)
    axes_ = tuple(range(len(free1) + len(free2), len(shape)))
    if not axes_:
        return Tensor(
            nodes.binary(BOp.MUL, broadcast_node(a, shape), broadcast_node(b, shape), dtype)
        )
    return Tensor(_contract(a, b, shape, axes_, dtype))


def vecdot(x1: Tensor, x2: Tensor, /, *, axis: int = -1) -> Tensor:
    dtype = _operands("vecdot", x1, x2)
    shape = broadcast_shapes(x1.shape, x2.shape, what="vecdot")
    d = normalize_axis(axis, len(shape), "vecdot")
    back = d - len(shape)  # the standard counts vecdot's axis from the end of both shapes
    if -back > min(x1.ndim, x2.ndim) or x1.shape[back] != x2.shape[back]:
        raise ValueError(f"vecdot: axis {axis} is not a shared dim of {x1.shape} and {x2.shape}")
    a, b = nodes.cast(x1.node, dtype), nodes.cast(x2.node, dtype)
    return Tensor(_contract(a, b, shape, (d,), dtype))
