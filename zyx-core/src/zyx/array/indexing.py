"""Indexing (the standard's "Indexing" and "Indexing Functions"): ``x[key]``,
``x[key] = value``, ``take`` and ``take_along_axis``.

Basic indexing (integers, slices with any step, ``...``, ``None``) is a view. Integer
array indexing and ``take`` gather: the index arrays are read inside the kernel that
reads the result, negative indices count from the end, and an index out of range reads
a clamped valid element (the standard leaves it unspecified; zyx never reads outside
memory). A boolean mask selects a data-dependent number of elements: ``x[mask]``
realizes the mask to count them.

``x[key] = value`` replaces the selected region in ``x`` alone: zyx arrays do not share
memory, so no other array sees the change (the standard leaves views' aliasing to the
implementation).
"""

from __future__ import annotations

import operator
from typing import Any

from zyx.array.dtypes import DEFAULT_INDEX
from zyx.array.manipulation import broadcast_node, broadcast_shapes, normalize_axis
from zyx.dtypes import DType
from zyx.graph import nodes
from zyx.graph.nodes import Gather
from zyx.graph.views import View
from zyx.ir.ops import BOp
from zyx.tensor import Tensor, array_argument, is_scalar, same_device, scalar_tensor

__all__ = ["take", "take_along_axis"]


def _is_integer_array(key: Any) -> bool:
    return isinstance(key, Tensor) and key.dtype.is_int


def _region(x: Tensor, key: tuple[Any, ...]) -> View:
    """The view that basic index ``key`` selects of ``x``."""
    if sum(k is Ellipsis for k in key) > 1:
        raise IndexError("an index can have only one ellipsis (...)")
    used = sum(k is not None and k is not Ellipsis for k in key)
    if used > x.ndim:
        raise IndexError(f"too many indices ({used}) for a {x.ndim}-D array of shape {x.shape}")
    if Ellipsis not in key:
        key = key + (Ellipsis,)
    at = key.index(Ellipsis)
    key = key[:at] + (slice(None),) * (x.ndim - used) + key[at + 1 :]
    # ``dim``: the dim of x indexed; ``at``: where it is in the view (integers drop theirs);
    # ``shape``: the result's, where each None adds a size-1 dim at the end.
    v, dim, at = View.identity(x.shape), 0, 0
    shape: list[int] = []
    for k in key:
        if k is None:
            shape.append(1)
            continue
        n = v.shape[at]
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            size = len(range(start, stop, step))
            v = v.slice(at, start, step, size)
            shape.append(size)
            at += 1
        else:
            i = _integer(k, n, dim)
            v = v.slice(at, i, 0, 1)
            v = v.squeeze_to(v.shape[:at] + v.shape[at + 1 :])  # type: ignore[assignment]
        dim += 1
    out = v
    if tuple(shape) != out.shape:
        squeezed = out.squeeze_to(tuple(shape))
        assert squeezed is not None
        out = squeezed
    return out


def _integer(k: Any, n: int, dim: int) -> int:
    try:
        i = operator.index(k)
    except TypeError:
        raise IndexError(
            f"index {k!r:.40} is not valid: use ints, slices, ..., None, integer arrays or a "
            "boolean array"
        ) from None
    if not -n <= i < n:
        raise IndexError(f"index {i} is out of bounds for axis {dim} of size {n}")
    return i % n


def getitem(x: Tensor, key: Any) -> Tensor:
    key = key if isinstance(key, tuple) else (key,)
    if any(isinstance(k, Tensor) and k.dtype is DType.BOOL for k in key):
        if len(key) != 1:
            raise IndexError("a boolean array index must be the only index (the standard)")
        return _masked(x, key[0])
    if any(_is_integer_array(k) for k in key):
        return _gather_index(x, key)
    return Tensor(nodes.view(x.node, _region(x, key)))


def _masked(x: Tensor, mask: Tensor) -> Tensor:
    from zyx.array.searching import nonzero

    same_device("x[mask]", x, mask)
    if mask.shape != x.shape[: mask.ndim]:
        raise IndexError(f"a boolean index of shape {mask.shape} does not fit shape {x.shape}")
    if not mask.ndim:  # a new leading dim, of one element where the mask holds, else none
        return x[None] if bool(mask) else x[None][:0]
    positions = nonzero(mask)
    return _gather_index(x, tuple(positions))


def _gather_index(x: Tensor, key: tuple[Any, ...]) -> Tensor:
    """``x[i0, i1, ...]`` for integer arrays and ints: one gather of the flattened leading
    dims at the combined index."""
    from zyx.array.manipulation import reshape

    if any(not (_is_integer_array(k) or _is_int(k)) for k in key):
        raise IndexError("integer array indices cannot be mixed with slices, ... or None in zyx")
    if len(key) > x.ndim:
        raise IndexError(f"too many indices ({len(key)}) for a {x.ndim}-D array")
    arrays = [k for k in key if isinstance(k, Tensor)]
    same_device("x[indices]", x, *arrays)
    shape = broadcast_shapes(*(a.shape for a in arrays), what="integer array indexing")
    combined = None
    for d, k in enumerate(key):
        n = x.shape[d]
        index = _normalized(k, n, shape, x)
        if combined is None:
            combined = index
        else:
            scaled = nodes.binary(BOp.MUL, combined, _full(n, shape, x), DEFAULT_INDEX)
            combined = nodes.binary(BOp.ADD, scaled, index, DEFAULT_INDEX)
    assert combined is not None
    lead = 1
    for n in x.shape[: len(key)]:
        lead *= n
    flat = reshape(x, (lead,) + x.shape[len(key) :])
    g = Gather(0, along=False)
    return Tensor(nodes.gather(flat.node, combined, g, shape + x.shape[len(key) :]))


def _is_int(k: Any) -> bool:
    return isinstance(k, int) and not isinstance(k, bool)


def _full(value: int, shape: tuple[int, ...], like: Tensor) -> nodes.Node:
    return nodes.view(nodes.scalar(value, DEFAULT_INDEX, like.device), View(shape, (), ()))


def _normalized(k: Any, n: int, shape: tuple[int, ...], x: Tensor) -> nodes.Node:
    """An index along a dim of size ``n``, as int64 in ``[0, n)`` (negative ones wrapped
    once, out-of-range ones clamped), broadcast to ``shape``."""
    if not isinstance(k, Tensor):
        return _full(_integer(k, n, 0), shape, x)
    index = broadcast_node(nodes.cast(k.node, DEFAULT_INDEX), shape)
    zero, size = _full(0, shape, x), _full(n, shape, x)
    negative = nodes.binary(BOp.CMPLT, index, zero, DType.BOOL)
    index = nodes.where(negative, nodes.binary(BOp.ADD, index, size, DEFAULT_INDEX), index)
    index = nodes.where(nodes.binary(BOp.CMPLT, index, zero, DType.BOOL), zero, index)
    last = _full(max(n - 1, 0), shape, x)
    return nodes.where(nodes.binary(BOp.CMPLT, index, size, DType.BOOL), index, last)


def setitem(x: Tensor, key: Any, value: Any) -> Tensor:
    """``x`` with ``x[key]`` replaced by ``value`` (cast to ``x``'s dtype)."""
    key = key if isinstance(key, tuple) else (key,)
    if is_scalar(value):
        value = scalar_tensor(value, x.dtype, x.device, "x[key] = value")
    if not isinstance(value, Tensor):
        raise TypeError(
            f"x[key] = value takes an array or a Python scalar, got {type(value).__name__}"
        )
    same_device("x[key] = value", x, value)
    fill = nodes.cast(value.node, x.dtype)
    if len(key) == 1 and isinstance(key[0], Tensor) and key[0].dtype is DType.BOOL:
        mask = key[0]
        if mask.shape != x.shape[: mask.ndim] or value.size != 1:
            raise IndexError(
                "x[mask] = value takes a mask of x's leading shape and a scalar or a "
                "one-element value"
            )
        cond = broadcast_node(
            nodes.reshape(mask.node, mask.shape + (1,) * (x.ndim - mask.ndim)), x.shape
        )
        return Tensor(nodes.where(cond, broadcast_node(nodes.reshape(fill, ()), x.shape), x.node))
    if any(isinstance(k, Tensor) for k in key):
        raise IndexError("x[key] = value takes basic indices or a boolean mask")
    region = _region(x, key)
    shape = broadcast_shapes(region.shape, value.shape, what="x[key] = value")
    if shape != region.shape:
        raise ValueError(
            f"x[key] = value: a value of shape {value.shape} does not fit {region.shape}"
        )
    return Tensor(nodes.scatter(x.node, broadcast_node(fill, region.shape), region))


def take(x: Tensor, indices: Tensor, /, *, axis: int | None = None) -> Tensor:
    x = array_argument(x, "take")
    if not _is_integer_array(indices):
        raise TypeError("take: indices must be an integer array")
    if axis is None:
        if x.ndim != 1:
            raise ValueError("take: axis is required unless x is 1-D (the standard)")
        axis = 0
    d = normalize_axis(axis, x.ndim, "take")
    same_device("take", x, indices)
    index = _normalized(indices, x.shape[d], indices.shape, x)
    shape = x.shape[:d] + indices.shape + x.shape[d + 1 :]
    return Tensor(nodes.gather(x.node, index, Gather(d, along=False), shape))


def take_along_axis(x: Tensor, indices: Tensor, /, *, axis: int = -1) -> Tensor:
    x = array_argument(x, "take_along_axis")
    if not _is_integer_array(indices):
        raise TypeError("take_along_axis: indices must be an integer array")
    if indices.ndim != x.ndim:
        raise ValueError(f"take_along_axis: indices have {indices.ndim} dims, x has {x.ndim}")
    d = normalize_axis(axis, x.ndim, "take_along_axis")
    same_device("take_along_axis", x, indices)
    others = broadcast_shapes(
        x.shape[:d] + x.shape[d + 1 :], indices.shape[:d] + indices.shape[d + 1 :],
        what="take_along_axis",
    )  # fmt: skip
    shape = others[:d] + (indices.shape[d],) + others[d:]
    index = _normalized(Tensor(broadcast_node(indices.node, shape)), x.shape[d], shape, x)
    source = broadcast_node(x.node, others[:d] + (x.shape[d],) + others[d:])
    return Tensor(nodes.gather(source, index, Gather(d, along=True), shape))


def repeat_by_array(x: Tensor, repeats: Tensor, axis: int) -> Tensor:
    """``repeat`` with a count per element: the output's length is their sum (realized),
    and each output position finds its source by a search of the running totals."""
    from zyx.array.creation import arange
    from zyx.array.searching import searchsorted
    from zyx.array.statistical import cumulative_sum, sum

    if not _is_integer_array(repeats):
        raise TypeError("repeat: repeats must be an int or an integer array")
    n = x.shape[axis]
    if repeats.shape not in ((n,), (1,), ()):
        raise ValueError(f"repeat: {repeats.shape} repeats for an axis of size {n}")
    counts = Tensor(broadcast_node(nodes.cast(repeats.node, DEFAULT_INDEX), (n,)))
    total = int(sum(counts))
    ends = cumulative_sum(counts)
    positions = arange(total, dtype=DEFAULT_INDEX, device=x.device)
    source = searchsorted(ends, positions, side="right")
    return take(x, source, axis=axis)
