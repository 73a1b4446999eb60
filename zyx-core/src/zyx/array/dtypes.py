"""Data types and data type functions (the standard's "Data Types" and "Data Type
Functions"): the dtype objects, type promotion, ``astype``, ``can_cast``, ``finfo``,
``iinfo``, ``isdtype`` and ``result_type``.

The dtype objects are zyx's own ``DType`` members (``zyx.float32 is DType.F32``). Besides
the standard's real dtypes zyx has ``bfloat16``, which promotes as a float between
``float16`` and ``float32``: with either of them it gives ``float32``. Complex dtypes are
not supported.

Promotion follows the standard's tables. Where the standard leaves it unspecified, zyx
raises ``TypeError``: mixing integer and floating arrays (numpy would pick a float), a
bool with a number, ``uint64`` with a signed integer.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zyx.dtypes import DType, DTypeCapability

if TYPE_CHECKING:
    from zyx.tensor import Tensor

__all__ = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64",
    "astype", "can_cast", "finfo", "iinfo", "isdtype", "result_type",
]  # fmt: skip

bool = DType.BOOL  # noqa: A001 - the standard's name
int8, int16, int32, int64 = DType.I8, DType.I16, DType.I32, DType.I64
uint8, uint16, uint32, uint64 = DType.U8, DType.U16, DType.U32, DType.U64
float16, bfloat16, float32, float64 = DType.F16, DType.BF16, DType.F32, DType.F64

_NAMES = {
    DType.BOOL: "bool", DType.I8: "int8", DType.I16: "int16", DType.I32: "int32",
    DType.I64: "int64", DType.U8: "uint8", DType.U16: "uint16", DType.U32: "uint32",
    DType.U64: "uint64", DType.F16: "float16", DType.BF16: "bfloat16", DType.F32: "float32",
    DType.F64: "float64",
}  # fmt: skip

DEFAULT_FLOAT = DType.F32
"""The default floating dtype on every device (as in JAX and PyTorch; numpy's is float64):
a GPU computes float32 many times faster, and not every device has float64."""
DEFAULT_INT = DType.I64
DEFAULT_INDEX = DType.I64


def dtype_name(dtype: DType) -> str:
    """The standard's name of a dtype (``float32``)."""
    return _NAMES[dtype]


def check_dtype(dtype: Any, what: str = "dtype") -> DType:
    """``dtype`` if it is a zyx dtype, else a ``TypeError`` naming the accepted ones."""
    if isinstance(dtype, DType):
        return dtype
    raise TypeError(
        f"{what} must be a zyx dtype (zyx.float32, ...), got {dtype!r:.60}"
        + ("; complex dtypes are not supported" if "complex" in str(dtype) else "")
    )


def _rank(dtype: DType) -> int:
    return dtype.itemsize


def promote(a: DType, b: DType) -> DType:
    """The result dtype of an op on arrays of ``a`` and ``b`` (the standard's tables)."""
    if a is b:
        return a
    if a.is_float and b.is_float:
        if {a, b} == {DType.F16, DType.BF16}:
            return DType.F32
        return a if _rank(a) > _rank(b) else b
    if a.is_int and b.is_int:
        if a.is_signed == b.is_signed:
            return a if _rank(a) > _rank(b) else b
        signed, unsigned = (a, b) if a.is_signed else (b, a)
        if _rank(signed) > _rank(unsigned):
            return signed
        if unsigned is DType.U64:
            raise TypeError("uint64 and a signed integer have no common dtype (the standard)")
        return {1: DType.I16, 2: DType.I32, 4: DType.I64}[_rank(unsigned)]
    raise TypeError(
        f"{dtype_name(a)} and {dtype_name(b)} do not promote (the standard defines no "
        "promotion between bool, integer and floating dtypes); convert one with astype"
    )


def result_type(*arrays_and_dtypes: Any) -> DType:
    """The dtype promotion of arrays and dtypes (Python scalars take the others' dtype)."""
    from zyx.tensor import Tensor, check_scalar, is_scalar

    dtypes = [
        a.dtype if isinstance(a, Tensor) else a for a in arrays_and_dtypes if not is_scalar(a)
    ]
    scalars = [a for a in arrays_and_dtypes if is_scalar(a)]
    if not dtypes:
        raise TypeError("result_type needs at least one array or dtype")
    out = check_dtype(dtypes[0])
    for d in dtypes[1:]:
        out = promote(out, check_dtype(d))
    for s in scalars:
        check_scalar(s, out, "result_type")
    return out


def can_cast(from_: DType | Tensor, to: DType, /) -> builtins.bool:
    """Whether the standard's promotion rules allow ``from_`` to become ``to``."""
    from zyx.tensor import Tensor

    source = from_.dtype if isinstance(from_, Tensor) else check_dtype(from_)
    try:
        return promote(source, check_dtype(to)) is to
    except TypeError:
        return False


def astype(x: Tensor, dtype: DType, /, *, copy: builtins.bool = True, device: Any = None) -> Tensor:
    from zyx.graph import nodes
    from zyx.tensor import Tensor, array_argument, require

    x = array_argument(x, "astype")
    check_dtype(dtype)
    if device is not None:
        x = x.to_device(device)
    if dtype is x.dtype:
        return Tensor(x.node) if copy else x
    require(x.device, dtype, DTypeCapability.STORAGE, "astype")
    return Tensor(nodes.cast(x.node, dtype))


@dataclass(frozen=True)
class finfo_object:  # noqa: N801 - the standard's name
    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: DType


@dataclass(frozen=True)
class iinfo_object:  # noqa: N801 - the standard's name
    bits: int
    max: int
    min: int
    dtype: DType


_FINFO = {  # bits, mantissa bits, exponent bits
    DType.F16: (16, 10, 5), DType.BF16: (16, 7, 8), DType.F32: (32, 23, 8), DType.F64: (64, 52, 11),
}  # fmt: skip


def finfo(type: DType | Tensor, /) -> finfo_object:  # noqa: A002 - the standard's name
    from zyx.tensor import Tensor

    dtype = type.dtype if isinstance(type, Tensor) else check_dtype(type)
    if not dtype.is_float:
        raise TypeError(f"finfo needs a floating dtype, got {dtype_name(dtype)}")
    bits, mantissa, exponent = _FINFO[dtype]
    bias = (1 << (exponent - 1)) - 1
    largest = (2 - 2.0**-mantissa) * 2.0**bias
    return finfo_object(bits, 2.0**-mantissa, largest, -largest, 2.0 ** (1 - bias), dtype)


def iinfo(type: DType | Tensor, /) -> iinfo_object:  # noqa: A002 - the standard's name
    from zyx.tensor import Tensor

    dtype = type.dtype if isinstance(type, Tensor) else check_dtype(type)
    if not dtype.is_int:
        raise TypeError(f"iinfo needs an integer dtype, got {dtype_name(dtype)}")
    low, high = dtype.int_range
    return iinfo_object(8 * dtype.itemsize, high, low, dtype)


_KINDS: dict[str, Callable[[DType], builtins.bool]] = {
    "bool": lambda d: d is DType.BOOL,
    "signed integer": lambda d: d.is_int and d.is_signed,
    "unsigned integer": lambda d: d.is_int and not d.is_signed,
    "integral": lambda d: d.is_int,
    "real floating": lambda d: d.is_float,
    "complex floating": lambda d: False,
    "numeric": lambda d: d is not DType.BOOL,
}


def isdtype(dtype: DType, kind: Any) -> builtins.bool:
    """Whether ``dtype`` is of ``kind``: a dtype, a kind name, or a tuple of them."""
    check_dtype(dtype)
    if isinstance(kind, tuple):
        return any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, DType):
        return dtype is kind
    test = _KINDS.get(kind) if isinstance(kind, str) else None
    if test is None:
        raise ValueError(f"isdtype: unknown kind {kind!r}; one of {sorted(_KINDS)} or a dtype")
    return test(dtype)
