"""Creation functions (the standard's "Creation Functions").

``asarray`` copies host data to the device at once. Everything else is lazy and costs no
memory until realized: ``zeros``, ``ones``, ``full`` and ``empty`` are a broadcast
constant, and ``arange``, ``linspace``, ``eye``, ``tril``, ``triu`` are index arithmetic
fused into whatever reads them.

Default dtypes: ``float32`` for Python floats, ``int64`` for Python ints (see
``zyx.array.dtypes.DEFAULT_FLOAT``).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from zyx.array.dtypes import DEFAULT_FLOAT, DEFAULT_INT, check_dtype, dtype_name
from zyx.array.manipulation import broadcast_to, reshape
from zyx.dtypes import DType, DTypeCapability
from zyx.graph import nodes
from zyx.graph.views import View, indexable
from zyx.ir.ops import BOp
from zyx.tensor import Tensor, array_argument, require, resolve_device

if TYPE_CHECKING:
    from zyx.backend import Device
    from zyx.graph.nodes import Node

__all__ = [
    "arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like",
    "linspace", "meshgrid", "ones", "ones_like", "tril", "triu", "zeros", "zeros_like",
]  # fmt: skip


def _shape(shape: int | Sequence[int]) -> tuple[int, ...]:
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    out = tuple(operator.index(n) for n in dims)
    if any(n < 0 for n in out):
        raise ValueError(f"negative dimensions are not allowed: {out}")
    return indexable(out)


def _scalar_dtype(value: Any) -> DType:
    if isinstance(value, bool):
        return DType.BOOL
    if isinstance(value, int):
        return DEFAULT_INT
    if isinstance(value, float):
        return DEFAULT_FLOAT
    if isinstance(value, complex):
        raise TypeError("complex values are not supported by zyx")
    raise TypeError(f"a Python bool, int or float is needed, got {type(value).__name__}")


def asarray(
    obj: Any, /, *, dtype: DType | None = None, device: Any = None, copy: bool | None = None
) -> Tensor:
    """An array from a zyx array, a numpy array (or anything numpy reads: buffers, nested
    sequences of numbers), a Python scalar, or a DLPack producer."""
    if dtype is not None:
        check_dtype(dtype)
    if isinstance(obj, Tensor):
        out = obj.to_device(device) if device is not None else obj
        if dtype is not None and dtype is not out.dtype:
            if copy is False:
                raise ValueError("asarray: a dtype change needs a copy, and copy=False")
            return out.astype(dtype)
        return Tensor(out.node) if copy else out
    target = resolve_device(device)
    if copy is False:
        raise ValueError("asarray: zyx copies host data to the device; copy=False cannot be met")
    data = _host_data(obj, dtype)
    return Tensor(_upload(data, target))


def _host_data(obj: Any, dtype: DType | None) -> Any:
    import numpy as np

    if hasattr(obj, "__dlpack__") and not isinstance(obj, np.ndarray):
        obj = np.from_dlpack(obj)
    python = not isinstance(obj, np.ndarray) and not isinstance(obj, np.generic)
    try:
        data = np.asarray(obj)
    except (ValueError, TypeError, OverflowError) as error:
        raise TypeError(f"asarray: cannot make an array of {obj!r:.60}: {error}") from None
    if data.dtype.kind == "c":
        raise TypeError("asarray: complex data is not supported by zyx")
    if data.dtype.kind not in "biuf" and data.dtype != DType.BF16.numpy:
        raise TypeError(f"asarray: numbers are needed, got data of numpy dtype {data.dtype}")
    if dtype is None:
        dtype = DType.from_numpy(data.dtype)
        if python and dtype is DType.F64:
            dtype = DEFAULT_FLOAT  # Python floats: the default float dtype
    if data.dtype != dtype.numpy:
        halves = dtype in (DType.F16, DType.BF16) and data.dtype.kind == "f"
        if python and not dtype.is_float:  # numpy's checks: 300 for uint8, NaN for int32
            data = _python_as(obj, dtype)
        else:  # as the devices' astype: an overflow to inf is no warning, nor a NaN to an int
            with np.errstate(all="ignore"):
                data = dtype.round_array(data) if halves else data.astype(dtype.numpy)
    # Not np.ascontiguousarray: it makes a 0-D array 1-D.
    return (data if data.flags.c_contiguous else np.ascontiguousarray(data)), dtype


def _python_as(obj: Any, dtype: DType) -> Any:
    """Python numbers ``obj`` as integer ``dtype``, converted by numpy from the numbers
    themselves: an integer out of ``dtype``'s range, or a NaN or infinity, is an error (as
    in array-api-strict), where a cast of their array would wrap them."""
    import numpy as np

    try:
        return np.asarray(obj, dtype=dtype.numpy)
    except (ValueError, OverflowError) as error:
        raise type(error)(f"asarray: {obj!r:.60} as {dtype_name(dtype)}: {error}") from None


def _upload(data_and_dtype: Any, device: Any) -> nodes.Node:
    from zyx.runtime import runtime

    data, dtype = data_and_dtype
    require(device, dtype, DTypeCapability.STORAGE, "asarray")
    return runtime.upload(data, dtype, device)


def from_dlpack(x: Any, /, *, device: Any = None, copy: bool | None = None) -> Tensor:
    """An array from a DLPack producer: zero-copy where zyx can hold its memory (host
    memory on the host device, CUDA memory on a CUDA device), else a copy."""
    from zyx.array.interop import from_dlpack as import_dlpack

    return import_dlpack(x, device=device, copy=copy)


def full(
    shape: int | Sequence[int], fill_value: bool | int | float, *, dtype: DType | None = None,
    device: Any = None,
) -> Tensor:  # fmt: skip
    return _filled(shape, fill_value, dtype, device, "full", nodes.scalar)


def _filled(
    shape: int | Sequence[int], value: bool | int | float, dtype: DType | None, device: Any,
    what: str, make: Callable[[bool | int | float, DType, Device], Node] = nodes.const,
) -> Tensor:  # fmt: skip
    """``value`` broadcast to ``shape``, no memory until realized: a constant kernels fold
    (zeros, ones), or for ``full`` a scalar argument, so that other values reuse the
    kernels."""
    dims = _shape(shape)
    dtype = check_dtype(dtype) if dtype is not None else _scalar_dtype(value)
    target = resolve_device(device)
    require(target, dtype, DTypeCapability.STORAGE, what)
    node = make(_as_dtype(value, dtype, what), dtype, target)
    return Tensor(nodes.view(node, View(dims, (), ())))


def _as_dtype(value: Any, dtype: DType, what: str) -> bool | int | float:
    if dtype is DType.BOOL:
        return bool(value)
    if dtype.is_float:
        return float(value)
    if isinstance(value, float):
        raise TypeError(f"{what}: a float value {value} for the integer dtype {dtype_name(dtype)}")
    low, high = dtype.int_range
    if not low <= value <= high:
        raise OverflowError(
            f"{what}: {value} is out of {dtype_name(dtype)}'s range [{low}, {high}]"
        )
    return int(value)


def zeros(shape: int | Sequence[int], *, dtype: DType | None = None, device: Any = None) -> Tensor:
    return _filled(shape, 0, dtype or DEFAULT_FLOAT, device, "zeros")


def ones(shape: int | Sequence[int], *, dtype: DType | None = None, device: Any = None) -> Tensor:
    return _filled(shape, 1, dtype or DEFAULT_FLOAT, device, "ones")


def empty(shape: int | Sequence[int], *, dtype: DType | None = None, device: Any = None) -> Tensor:
    """An array whose values are unspecified (the standard); zyx gives zeros."""
    return _filled(shape, 0, dtype or DEFAULT_FLOAT, device, "empty")


def _like(x: Tensor, dtype: DType | None, device: Any) -> tuple[DType, Any]:
    return (dtype or x.dtype), (device if device is not None else x.device)


def zeros_like(x: Tensor, /, *, dtype: DType | None = None, device: Any = None) -> Tensor:
    x = array_argument(x, "zeros_like")
    return _filled(x.shape, 0, *_like(x, dtype, device), "zeros_like")


def ones_like(x: Tensor, /, *, dtype: DType | None = None, device: Any = None) -> Tensor:
    x = array_argument(x, "ones_like")
    return _filled(x.shape, 1, *_like(x, dtype, device), "ones_like")


def empty_like(x: Tensor, /, *, dtype: DType | None = None, device: Any = None) -> Tensor:
    x = array_argument(x, "empty_like")
    return _filled(x.shape, 0, *_like(x, dtype, device), "empty_like")


def full_like(
    x: Tensor, /, fill_value: bool | int | float, *, dtype: DType | None = None, device: Any = None
) -> Tensor:
    x = array_argument(x, "full_like")
    return _filled(x.shape, fill_value, *_like(x, dtype, device), "full_like", nodes.scalar)


def _index(shape: tuple[int, ...], dim: int, device: Any) -> nodes.Node:
    return nodes.iota(shape, dim, device)


def _affine(index: nodes.Node, dtype: DType, start: float, step: float, what: str) -> nodes.Node:
    """``start + index * step`` in ``dtype``."""
    shape, device = index.shape, index.device
    value = nodes.cast(index, dtype)
    step_node = _full_node(_as_dtype(step, dtype, what), dtype, shape, device)
    start_node = _full_node(_as_dtype(start, dtype, what), dtype, shape, device)
    scaled = nodes.binary(BOp.MUL, value, step_node, dtype)
    return nodes.binary(BOp.ADD, scaled, start_node, dtype)


def arange(
    start: int | float, /, stop: int | float | None = None, step: int | float = 1, *,
    dtype: DType | None = None, device: Any = None,
) -> Tensor:  # fmt: skip
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError("arange: step must not be zero")
    floats = any(isinstance(v, float) for v in (start, stop, step))
    if floats and not all(math.isfinite(v) for v in (start, stop, step)):
        bounds = f"{start}, {stop}, {step}"
        raise ValueError(f"arange: start, stop and step must be finite, got {bounds}")
    dtype = check_dtype(dtype) if dtype is not None else DEFAULT_FLOAT if floats else DEFAULT_INT
    size = indexable((max(0, math.ceil((stop - start) / step)),), "arange's shape")[0]
    target = resolve_device(device)
    require(target, dtype, DTypeCapability.ARITHMETIC, "arange")
    if dtype.is_int:
        for v in (start, stop - step if size else start):
            _as_dtype(int(v), dtype, "arange")
    return Tensor(_affine(_index((size,), 0, target), dtype, start, step, "arange"))


def linspace(
    start: int | float, stop: int | float, /, num: int, *, dtype: DType | None = None,
    device: Any = None, endpoint: bool = True,
) -> Tensor:  # fmt: skip
    dtype = check_dtype(dtype) if dtype is not None else DEFAULT_FLOAT
    if not dtype.is_float:
        raise TypeError(f"linspace makes floating arrays, got dtype {dtype}")
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"linspace: num must be non-negative, got {num}")
    indexable((num,), "linspace's shape")
    target = resolve_device(device)
    require(target, dtype, DTypeCapability.ARITHMETIC, "linspace")
    div = (num - 1) if endpoint else num
    step = (stop - start) / div if div > 0 else 0.0
    index = _index((num,), 0, target)
    values = _affine(index, dtype, float(start), step, "linspace")
    if endpoint and num > 1:  # the last value is ``stop`` exactly, as numpy's
        last = nodes.binary(
            BOp.EQ, index, _full_node(num - 1, DType.I64, (num,), target), DType.BOOL
        )
        values = nodes.where(last, _full_node(float(stop), dtype, (num,), target), values)
    return Tensor(values)


def _full_node(value: Any, dtype: DType, shape: tuple[int, ...], device: Any) -> nodes.Node:
    return nodes.view(nodes.scalar(value, dtype, device), View(shape, (), ()))


def eye(
    n_rows: int, n_cols: int | None = None, /, *, k: int = 0, dtype: DType | None = None,
    device: Any = None,
) -> Tensor:  # fmt: skip
    rows = operator.index(n_rows)
    cols = rows if n_cols is None else operator.index(n_cols)
    dtype = check_dtype(dtype) if dtype is not None else DEFAULT_FLOAT
    target = resolve_device(device)
    require(target, dtype, DTypeCapability.STORAGE, "eye")
    shape = _shape((rows, cols))
    diagonal = _band(shape, target, k, BOp.EQ)
    return Tensor(nodes.cast(diagonal, dtype))


def _band(shape: tuple[int, ...], device: Any, k: int, op: BOp) -> nodes.Node:
    """``col - row  op  k`` over the last two dims of ``shape``: the diagonal (``EQ``) or
    what is on or below it (``tril``), as a bool node."""
    row, col = _index(shape, len(shape) - 2, device), _index(shape, len(shape) - 1, device)
    offset = nodes.binary(BOp.SUB, col, row, DType.I64)
    kk = _full_node(operator.index(k), DType.I64, shape, device)
    if op is BOp.EQ:
        return nodes.binary(BOp.EQ, offset, kk, DType.BOOL)
    return nodes.binary(BOp.CMPGE, kk, offset, DType.BOOL)  # col - row <= k


def _triangle(x: Tensor, k: int, lower: bool, what: str) -> Tensor:
    x = array_argument(x, what)
    if x.ndim < 2:
        raise ValueError(f"{what} needs at least 2 dims, got shape {x.shape}")
    below = _band(x.shape, x.device, k if lower else k - 1, BOp.CMPGE)
    zero = nodes.view(
        nodes.const(_as_dtype(0, x.dtype, what), x.dtype, x.device), View(x.shape, (), ())
    )
    keep, drop = (x.node, zero) if lower else (zero, x.node)
    return Tensor(nodes.where(below, keep, drop))


def tril(x: Tensor, /, *, k: int = 0) -> Tensor:
    return _triangle(x, k, lower=True, what="tril")


def triu(x: Tensor, /, *, k: int = 0) -> Tensor:
    return _triangle(x, k, lower=False, what="triu")


def meshgrid(*arrays: Tensor, indexing: str = "xy") -> list[Tensor]:
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    arrays = tuple(array_argument(a, "meshgrid") for a in arrays)
    if any(a.ndim != 1 for a in arrays):
        raise ValueError(f"meshgrid takes 1-D arrays, got shapes {[a.shape for a in arrays]}")
    if len({a.dtype for a in arrays}) > 1:
        raise TypeError("meshgrid: the arrays must have one dtype (the standard)")
    sizes = [a.shape[0] for a in arrays]
    if indexing == "xy" and len(arrays) >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, a in enumerate(arrays):
        axis = (1 - i if i < 2 else i) if indexing == "xy" and len(arrays) >= 2 else i
        shape = [1] * len(arrays)
        shape[axis] = a.shape[0]
        out.append(broadcast_to(reshape(a, tuple(shape)), tuple(sizes)))
    return out
