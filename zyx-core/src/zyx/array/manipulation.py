"""Manipulation functions (the standard's "Manipulation Functions").

Every one of them is a view (index arithmetic, no copy) or a fused select of views:
``concat`` and ``stack`` pad each input to the output's extent and pick, per element,
the input whose region it is in; ``roll`` is a ``concat`` of two slices; ``tile`` and
scalar ``repeat`` broadcast and reshape.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from functools import lru_cache
from math import prod
from typing import Any

from zyx.dtypes import DType
from zyx.graph import nodes
from zyx.graph.nodes import Node
from zyx.graph.views import Term, View, indexable
from zyx.tensor import Tensor, array_argument, same_device

__all__ = [
    "broadcast_arrays", "broadcast_to", "concat", "expand_dims", "flip", "moveaxis",
    "permute_dims", "repeat", "reshape", "roll", "squeeze", "stack", "tile", "unstack",
    "matrix_transpose",
]  # fmt: skip


def normalize_axis(axis: Any, ndim: int, what: str) -> int:
    """``axis`` as a non-negative dim of an ``ndim``-D array; an ``IndexError`` past it."""
    try:
        index = operator.index(axis)
    except TypeError:
        raise TypeError(f"{what}: an axis must be an int, got {axis!r:.40}") from None
    if not -ndim <= index < ndim:
        raise IndexError(f"{what}: axis {index} is out of range for a {ndim}-D array")
    return index % ndim


def normalize_axes(axis: Any, ndim: int, what: str) -> tuple[int, ...]:
    """``None`` (every dim), an int or a tuple of ints, as sorted, unique dims."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if not isinstance(axis, (tuple, list)) else tuple(axis)
    dims = [normalize_axis(a, ndim, what) for a in axes]
    if len(set(dims)) != len(dims):
        raise ValueError(f"{what}: repeated axis in {axis}")
    return tuple(sorted(dims))


def broadcast_shapes(*shapes: tuple[int, ...], what: str = "broadcast") -> tuple[int, ...]:
    """The standard's broadcast of ``shapes``; an error naming them where they do not."""
    if len(shapes) == 2 and (shapes[0] == shapes[1] or not shapes[1]):
        return shapes[0]
    return _broadcast(shapes, what)


@lru_cache(maxsize=4096)
def _broadcast(shapes: tuple[tuple[int, ...], ...], what: str) -> tuple[int, ...]:
    """``broadcast_shapes`` of shapes that differ, memoized: every op between a row and a
    matrix (``x - max(x, axis=1, keepdims=True)``) asks again for the same shapes."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(ndim):
        sizes = {s[len(s) - ndim + d] for s in shapes if len(s) - ndim + d >= 0} - {1}
        if len(sizes) > 1:
            listed = " and ".join(str(s) for s in shapes)
            raise ValueError(f"{what}: shapes {listed} do not broadcast (dim {d - ndim})")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_node(node: Node, shape: tuple[int, ...]) -> Node:
    """``node`` broadcast to ``shape`` (a view; ``node`` itself where the shape is its own)."""
    if node.shape == shape:
        return node
    return nodes.view(node, broadcast_view(node.shape, shape))


@lru_cache(maxsize=4096)
def broadcast_view(source: tuple[int, ...], shape: tuple[int, ...]) -> View:
    """The view broadcasting ``source`` to ``shape``; memoized, as the views are (every
    binary op with a scalar, every matmul, broadcasts)."""
    lead = len(shape) - len(source)
    indexable(shape)
    terms = tuple(
        Term(lead + j) if n == shape[lead + j] else Term(None, 0, 0) for j, n in enumerate(source)
    )
    return View(shape, source, terms)


def _view(x: Tensor, v: View) -> Tensor:
    return Tensor(nodes.view(x.node, v))


def _identity(x: Tensor) -> View:
    return View.identity(x.shape)


def broadcast_to(x: Tensor, /, shape: tuple[int, ...]) -> Tensor:
    x = array_argument(x, "broadcast_to")
    shape = tuple(operator.index(n) for n in shape)
    if broadcast_shapes(x.shape, shape, what="broadcast_to") != shape:
        raise ValueError(f"broadcast_to: shape {x.shape} does not broadcast to {shape}")
    return Tensor(broadcast_node(x.node, shape))


def broadcast_arrays(*arrays: Tensor) -> list[Tensor]:
    arrays = tuple(array_argument(a, "broadcast_arrays") for a in arrays)
    shape = broadcast_shapes(*(a.shape for a in arrays), what="broadcast_arrays")
    return [Tensor(broadcast_node(a.node, shape)) for a in arrays]


def reshape(x: Tensor, /, shape: tuple[int, ...], *, copy: bool | None = None) -> Tensor:
    """``x`` in ``shape`` (one dim may be -1). Never copies; ``copy=True`` is a new array
    object over the same lazy value, which is a copy as far as anyone can tell."""
    x = array_argument(x, "reshape")
    shape = _resolve_shape(tuple(operator.index(n) for n in shape), x.size, x.shape)
    return Tensor(nodes.reshape(x.node, shape))


def _resolve_shape(shape: tuple[int, ...], size: int, old: tuple[int, ...]) -> tuple[int, ...]:
    if shape.count(-1) > 1 or any(n < -1 for n in shape):
        raise ValueError(f"reshape: invalid shape {shape}")
    if -1 in shape:
        known = prod(n for n in shape if n != -1)
        if known == 0 or size % known:
            raise ValueError(f"reshape: cannot reshape {old} into {shape}")
        shape = tuple(size // known if n == -1 else n for n in shape)
    if prod(shape) != size:
        raise ValueError(f"reshape: cannot reshape {old} ({size} elements) into {shape}")
    return shape


def permute_dims(x: Tensor, /, axes: tuple[int, ...]) -> Tensor:
    x = array_argument(x, "permute_dims")
    order = tuple(normalize_axis(a, x.ndim, "permute_dims") for a in axes)
    if sorted(order) != list(range(x.ndim)):
        raise ValueError(f"permute_dims: {axes} is not a permutation of {x.ndim} dims")
    return _view(x, _identity(x).permute(order))


def matrix_transpose(x: Tensor, /) -> Tensor:
    x = array_argument(x, "matrix_transpose")
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose needs at least 2 dims, got shape {x.shape}")
    order = (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2)
    return permute_dims(x, order)


def expand_dims(x: Tensor, /, axis: int | tuple[int, ...] = 0) -> Tensor:
    x = array_argument(x, "expand_dims")
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    ndim = x.ndim + len(axes)
    dims = normalize_axes(axes, ndim, "expand_dims")
    shape, old = [], iter(x.shape)
    for d in range(ndim):
        shape.append(1 if d in dims else next(old))
    return Tensor(nodes.reshape(x.node, tuple(shape)))


def squeeze(x: Tensor, /, axis: int | tuple[int, ...]) -> Tensor:
    x = array_argument(x, "squeeze")
    dims = normalize_axes(axis, x.ndim, "squeeze")
    for d in dims:
        if x.shape[d] != 1:
            raise ValueError(f"squeeze: axis {d} of shape {x.shape} has size {x.shape[d]}, not 1")
    return Tensor(nodes.reshape(x.node, tuple(n for d, n in enumerate(x.shape) if d not in dims)))


def flip(x: Tensor, /, *, axis: int | tuple[int, ...] | None = None) -> Tensor:
    x = array_argument(x, "flip")
    v = _identity(x)
    for d in normalize_axes(axis, x.ndim, "flip"):
        v = v.flip(d)
    return _view(x, v)


def moveaxis(
    x: Tensor, source: int | tuple[int, ...], destination: int | tuple[int, ...], /
) -> Tensor:
    x = array_argument(x, "moveaxis")
    src = [normalize_axis(a, x.ndim, "moveaxis") for a in _tuple(source)]
    dst = [normalize_axis(a, x.ndim, "moveaxis") for a in _tuple(destination)]
    if len(src) != len(dst) or len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"moveaxis: source {source} and destination {destination} do not pair up")
    order = [d for d in range(x.ndim) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute_dims(x, tuple(order))


def _tuple(axis: int | tuple[int, ...]) -> tuple[int, ...]:
    return tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)


def padded(x: Node, axis: int, before: int, after: int) -> Node:
    """``x`` with ``before`` and ``after`` zeros around it along ``axis`` (a masked view)."""
    return nodes.view(x, View.identity(x.shape).pad(axis, before, after))


def concat(arrays: Sequence[Tensor], /, *, axis: int | None = 0) -> Tensor:
    """``arrays`` joined along ``axis`` (``None``: flattened first), in one fused select."""
    from zyx.array.dtypes import result_type

    arrays = [array_argument(a, "concat") for a in arrays]
    if not arrays:
        raise ValueError("concat needs at least one array")
    same_device("concat", *arrays)
    dtype = result_type(*arrays)
    if axis is None:
        arrays = [reshape(a, (-1,)) for a in arrays]
        axis = 0
    ndim = arrays[0].ndim
    if any(a.ndim != ndim for a in arrays):
        raise ValueError(f"concat: arrays of shapes {[a.shape for a in arrays]} differ in rank")
    d = normalize_axis(axis, ndim, "concat")
    rest = {a.shape[:d] + a.shape[d + 1 :] for a in arrays}
    if len(rest) > 1:
        raise ValueError(f"concat: shapes {[a.shape for a in arrays]} differ off axis {d}")
    total = sum(a.shape[d] for a in arrays)
    out: Node | None = None
    start = 0
    for a in arrays:
        size = a.shape[d]
        part = padded(nodes.cast(a.node, dtype), d, start, total - start - size)
        if out is None:
            out = part
        else:
            inside = padded(_true(a.node, a.shape), d, start, total - start - size)
            out = nodes.where(inside, part, out)
        start += size
    assert out is not None
    return Tensor(out)


def _true(like: Node, shape: tuple[int, ...]) -> Node:
    return nodes.view(nodes.const(True, DType.BOOL, like.device), View(shape, (), ()))


def stack(arrays: Sequence[Tensor], /, *, axis: int = 0) -> Tensor:
    arrays = [array_argument(a, "stack") for a in arrays]
    if not arrays:
        raise ValueError("stack needs at least one array")
    if len({a.shape for a in arrays}) > 1:
        raise ValueError(f"stack: arrays of shapes {[a.shape for a in arrays]} differ")
    d = normalize_axis(axis, arrays[0].ndim + 1, "stack")
    return concat([expand_dims(a, axis=d) for a in arrays], axis=d)


def unstack(x: Tensor, /, *, axis: int = 0) -> tuple[Tensor, ...]:
    x = array_argument(x, "unstack")
    d = normalize_axis(axis, x.ndim, "unstack")
    return tuple(x[(slice(None),) * d + (i,)] for i in range(x.shape[d]))


def roll(
    x: Tensor, /, shift: int | tuple[int, ...], *, axis: int | tuple[int, ...] | None = None
) -> Tensor:
    x = array_argument(x, "roll")
    if axis is None:
        flat = reshape(x, (-1,))
        return reshape(roll(flat, shift, axis=0), x.shape)
    shifts, axes = _tuple(shift), _tuple(axis)
    if len(shifts) != len(axes):
        raise ValueError(f"roll: {len(shifts)} shifts for {len(axes)} axes")
    out = x
    for s, a in zip(shifts, axes):
        d = normalize_axis(a, x.ndim, "roll")
        n = x.shape[d]
        if n == 0:
            continue
        k = operator.index(s) % n
        if k:
            head = (slice(None),) * d
            out = concat(
                [out[head + (slice(n - k, None),)], out[head + (slice(0, n - k),)]], axis=d
            )
    return out


def tile(x: Tensor, repetitions: tuple[int, ...], /) -> Tensor:
    x = array_argument(x, "tile")
    reps = tuple(operator.index(r) for r in repetitions)
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: negative repetitions {reps}")
    ndim = max(len(reps), x.ndim)
    reps = (1,) * (ndim - len(reps)) + reps
    shape = (1,) * (ndim - x.ndim) + x.shape
    base = reshape(x, tuple(v for n in shape for v in (1, n)))
    wide = broadcast_to(base, tuple(v for r, n in zip(reps, shape) for v in (r, n)))
    return reshape(wide, tuple(r * n for r, n in zip(reps, shape)))


def repeat(x: Tensor, repeats: int | Tensor, /, *, axis: int | None = None) -> Tensor:
    """Each element ``repeats`` times along ``axis`` (``None``: of the flattened array)."""
    x = array_argument(x, "repeat")
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    d = normalize_axis(axis, x.ndim, "repeat")
    if isinstance(repeats, Tensor):
        from zyx.array.indexing import repeat_by_array

        return repeat_by_array(x, repeats, d)
    k = operator.index(repeats)
    if k < 0:
        raise ValueError(f"repeat: negative repeats {k}")
    shape = x.shape[: d + 1] + (1,) + x.shape[d + 1 :]
    wide = shape[: d + 1] + (k,) + shape[d + 2 :]
    out = x.shape[:d] + (x.shape[d] * k,) + x.shape[d + 1 :]
    return reshape(broadcast_to(reshape(x, shape), wide), out)
