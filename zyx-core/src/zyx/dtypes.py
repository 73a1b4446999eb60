"""zyx's 13 element types and the per-dtype capability flags a device reports."""

from __future__ import annotations

import math
import struct
from enum import Enum, Flag, auto
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


class DTypeCapability(Flag):
    """What a device can do with one dtype. A dtype with no flags is unsupported."""

    __hash__ = object.__hash__  # members (combinations too) are singletons; Enum's hash is Python

    NONE = 0
    STORAGE = auto()
    """Buffers of it can be allocated, loaded and stored."""
    ARITHMETIC = auto()
    """Add, mul, compare, cast and the other non-transcendental ops."""
    MATH = auto()
    """Transcendental unary ops: exp, ln, sin, sqrt, ... (floats only)."""
    TENSOR_CORE = auto()
    """Matrix units accept it as an input."""

    FULL = STORAGE | ARITHMETIC | MATH


class DType(Enum):
    """An element type. The value is zyx's short name."""

    __hash__ = object.__hash__  # members are singletons; Enum's hash runs Python code

    BOOL = "bool"
    U8 = "u8"
    U16 = "u16"
    U32 = "u32"
    U64 = "u64"
    I8 = "i8"
    I16 = "i16"
    I32 = "i32"
    I64 = "i64"
    F16 = "f16"
    BF16 = "bf16"
    F32 = "f32"
    F64 = "f64"

    # Plain attributes, set once below: the array front end reads them on every op, and a
    # property on an Enum member costs a call and a hash per read.
    itemsize: int
    is_float: bool
    is_signed: bool
    is_int: bool

    @property
    def int_range(self) -> tuple[int, int]:
        """The smallest and largest value of an integer (or bool) dtype."""
        if self.is_float:
            raise ValueError(f"{self} is not an integer dtype")
        if self is DType.BOOL:
            return 0, 1
        bits = 8 * self.itemsize
        return (
            (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if self.is_signed else (0, (1 << bits) - 1)
        )

    def wrap(self, value: int) -> int:
        """``value`` as an integer (or bool) dtype holds it: modulo 2**bits (how the IR
        defines a constant past its dtype's range); a bool is nonzero-ness."""
        if self is DType.BOOL:
            return int(value != 0)
        low, high = self.int_range
        return (value - low) % (high - low + 1) + low

    def round_array(self, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """Float array ``x`` rounded to this float dtype as the IR rounds (``round_to``): to
        f16 once, to bf16 through float32 (ml_dtypes rounds a float64 to bf16 once since
        0.7); held as ``self.numpy``."""
        through = x.astype("float32") if self is DType.BF16 else x
        return through.astype(self.numpy)

    @cached_property
    def numpy(self) -> np.dtype[Any]:
        """The numpy dtype (bf16 through ml_dtypes). Imports numpy on first use."""
        import numpy as np

        if self is DType.BF16:
            import ml_dtypes

            bf16: np.dtype[Any] = np.dtype(ml_dtypes.bfloat16)
            return bf16
        return np.dtype(_NUMPY_NAME[self])

    @classmethod
    def from_numpy(cls, dtype: Any) -> DType:
        import numpy as np

        dt = np.dtype(dtype)
        # By name first: the loop makes every member's numpy dtype, bf16's by importing
        # ml_dtypes (half a second here), which an array of a standard dtype never needs.
        named = _BY_NUMPY_NAME.get(dt.name)
        if named is not None and named.numpy == dt:
            return named
        for member in cls:
            if member.numpy == dt:
                return member
        raise TypeError(f"numpy dtype {dt} has no zyx dtype; use one of {[d.value for d in cls]}")

    def __str__(self) -> str:
        return str(self.value)


_ITEMSIZE = {
    DType.BOOL: 1, DType.U8: 1, DType.U16: 2, DType.U32: 4, DType.U64: 8,
    DType.I8: 1, DType.I16: 2, DType.I32: 4, DType.I64: 8,
    DType.F16: 2, DType.BF16: 2, DType.F32: 4, DType.F64: 8,
}  # fmt: skip

_NUMPY_NAME = {
    DType.BOOL: "bool", DType.U8: "uint8", DType.U16: "uint16", DType.U32: "uint32",
    DType.U64: "uint64", DType.I8: "int8", DType.I16: "int16", DType.I32: "int32",
    DType.I64: "int64", DType.F16: "float16", DType.F32: "float32", DType.F64: "float64",
}  # fmt: skip

_BY_NUMPY_NAME = {name: member for member, name in _NUMPY_NAME.items()}


for _member in DType:
    _member.itemsize = _ITEMSIZE[_member]
    _member.is_float = _member in (DType.F16, DType.BF16, DType.F32, DType.F64)
    _member.is_signed = _member.is_float or _member in (DType.I8, DType.I16, DType.I32, DType.I64)
    _member.is_int = not _member.is_float and _member is not DType.BOOL


def round_to(value: float, dtype: DType) -> float:
    """``value`` rounded to the nearest ``dtype`` float (ties to even), as a Python float;
    past the dtype's range, an infinity."""
    try:
        return _round_to(float(value), dtype)  # an int converts first: struct refuses big ones
    except OverflowError:
        return math.copysign(math.inf, value)


def _round_to(value: float, dtype: DType) -> float:
    if dtype is DType.F32:
        return float(struct.unpack("<f", struct.pack("<f", value))[0])
    if dtype is DType.F16:
        return float(struct.unpack("<e", struct.pack("<e", value))[0])
    if dtype is DType.BF16:
        bits = struct.unpack("<I", struct.pack("<f", value))[0]
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return float(struct.unpack("<f", struct.pack("<I", bits))[0])
    return value
