"""Elementwise functions (the standard's "Element-wise Functions").

Each takes arrays (or, where the standard allows, one Python scalar and an array),
checks their dtypes against the standard's kinds, promotes, broadcasts, and records one
node per IR op. Functions the IR has no op for are compositions here, of ops every
backend has, written to match the standard's special cases (NaN propagation of
``maximum``, ``floor_divide`` rounding toward negative infinity, ...).

Where the standard leaves a result unspecified, zyx's choice is documented at the
function: integer division by zero gives 0 (the IR's rule), ``pow`` of an integer to a
negative integer gives 0, shifts by a count at or past the bit width give 0 (or -1 for
``>>`` of a negative number).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from zyx.array.dtypes import dtype_name, promote
from zyx.array.manipulation import broadcast_node, broadcast_shapes
from zyx.dtypes import DType, DTypeCapability
from zyx.graph import nodes
from zyx.graph.nodes import Node, Op
from zyx.graph.views import View
from zyx.ir.ops import BOp, UOp
from zyx.tensor import Tensor, array_argument, is_scalar, require, same_device, scalar_node

__all__ = [
    "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and",
    "bitwise_left_shift", "bitwise_invert", "bitwise_or", "bitwise_right_shift", "bitwise_xor",
    "ceil", "clip", "conj", "copysign", "cos", "cosh", "divide", "equal", "exp", "expm1",
    "floor", "floor_divide", "greater", "greater_equal", "hypot", "imag", "isfinite", "isinf",
    "isnan", "less", "less_equal", "log", "log1p", "log2", "log10", "logaddexp",
    "logical_and", "logical_not", "logical_or", "logical_xor", "maximum", "minimum",
    "multiply", "negative", "nextafter", "not_equal", "positive", "pow", "real",
    "reciprocal", "remainder", "round", "sign", "signbit", "sin", "sinh", "square", "sqrt",
    "subtract", "tan", "tanh", "trunc",
]  # fmt: skip

# The standard's dtype kinds an argument should have.
BOOL, INTEGER, FLOAT = "boolean", "integer", "floating-point"
NUMERIC = (INTEGER, FLOAT)
INTEGER_OR_BOOL = (INTEGER, BOOL)
ANY = (BOOL, INTEGER, FLOAT)
Kinds = tuple[str, ...] | str


def _kind(dtype: DType) -> str:
    return BOOL if dtype is DType.BOOL else FLOAT if dtype.is_float else INTEGER


_KIND = {dtype: _kind(dtype) for dtype in DType}
"""``_kind`` of each dtype, looked up: every op checks its operands' kinds."""


def _check_kind(name: str, dtype: DType, kinds: Kinds) -> None:
    kind = _KIND[dtype]
    if kind != kinds if isinstance(kinds, str) else kind not in kinds:
        kinds = (kinds,) if isinstance(kinds, str) else kinds
        raise TypeError(f"{name} takes {' or '.join(kinds)} arrays, got {dtype_name(dtype)}")


_MATH, _ARITHMETIC = DTypeCapability.MATH, DTypeCapability.ARITHMETIC
"""What an op needs of its dtype, read once: reading an enum's member off its class costs a
Python call (``EnumType.__getattr__`` in Python 3.11), and every op asks."""


# ---- node-level helpers: the compositions below are written with these ----------------------


def _const(value: bool | int | float, like: Node, dtype: DType | None = None) -> Node:
    dtype = dtype or like.dtype
    node = nodes.const(value, dtype, like.device)
    return nodes.view(node, View(like.shape, (), ()))


def _bin(op: BOp, a: Node, b: Node) -> Node:
    return nodes.binary(op, a, b, DType.BOOL if op.is_comparison else a.dtype)


def _un(op: UOp, x: Node) -> Node:
    return nodes.unary(op, x)


def _where(c: Node, a: Node, b: Node) -> Node:
    return nodes.where(c, a, b)


def _isnan(x: Node) -> Node:
    return _bin(BOp.NOTEQ, x, x)


def _or(a: Node, b: Node) -> Node:
    return _bin(BOp.OR, a, b)


def _and(a: Node, b: Node) -> Node:
    return _bin(BOp.AND, a, b)


# ---- applying a function to arrays ---------------------------------------------------------


def _unary(name: str, x: Any, kinds: Kinds, math_op: bool = False) -> Tensor:
    array = array_argument(x, name)
    _check_kind(name, array.dtype, kinds)
    require(array.device, array.dtype, _MATH if math_op else _ARITHMETIC, name)
    return array


def _binary(
    name: str, x1: Any, x2: Any, kinds: Kinds, math_op: bool = False
) -> tuple[Node, Node, DType]:
    """Both operands as nodes of one dtype and one (broadcast) shape."""
    if not isinstance(x1, Tensor) and not isinstance(x2, Tensor):
        raise TypeError(f"{name} needs at least one array, got {type(x1).__name__} and "
                        f"{type(x2).__name__}")  # fmt: skip
    if not isinstance(x1, Tensor):
        a, b = _scalar_operand(name, x1, x2), x2.node
    elif not isinstance(x2, Tensor):
        a, b = x1.node, _scalar_operand(name, x2, x1)
    else:
        a, b = x1.node, x2.node
        if a.device is not b.device:
            same_device(name, x1, x2)
    if a.dtype is b.dtype:
        dtype = a.dtype
    else:
        try:
            dtype = promote(a.dtype, b.dtype)
        except TypeError as error:
            raise TypeError(f"{name}: {error}") from None
        a, b = nodes.cast(a, dtype), nodes.cast(b, dtype)
    _check_kind(name, dtype, kinds)
    cap = _MATH if math_op else _ARITHMETIC
    require(a.device, dtype, cap, name)
    if a.shape != b.shape:
        shape = broadcast_shapes(a.shape, b.shape, what=name)
        a, b = broadcast_node(a, shape), broadcast_node(b, shape)
    return a, b, dtype


def _scalar_operand(name: str, value: Any, other: Tensor) -> Node:
    """A Python scalar beside the array ``other``: a 0-D node of ``other``'s dtype."""
    if not is_scalar(value):
        raise TypeError(f"{name} takes arrays and Python scalars, got {type(value).__name__}")
    return scalar_node(value, other.dtype, other.device, name)


def _elementwise_unary(
    name: str, kinds: Kinds, build: Callable[[Node], Node], math_op: bool = False
) -> Callable[[Tensor], Tensor]:
    def function(x: Tensor, /) -> Tensor:
        return Tensor(build(_unary(name, x, kinds, math_op).node))

    function.__name__ = function.__qualname__ = name
    return function


def _elementwise_binary(
    name: str, kinds: Kinds, build: Callable[[Node, Node], Node], math_op: bool = False
) -> Callable[[Any, Any], Tensor]:
    def function(x1: Any, x2: Any, /) -> Tensor:
        a, b, _ = _binary(name, x1, x2, kinds, math_op)
        return Tensor(build(a, b))

    function.__name__ = function.__qualname__ = name
    return function


def _uop(op: UOp) -> Callable[[Node], Node]:
    return lambda x: _un(op, x)


def _bop(op: BOp, swap: bool = False) -> Callable[[Node, Node], Node]:
    """``_bin`` of ``op``, its result's dtype rule decided here rather than at every call."""
    binary = nodes.binary
    if op.is_comparison:
        boolean = DType.BOOL
        if swap:
            return lambda a, b: binary(op, b, a, boolean)
        return lambda a, b: binary(op, a, b, boolean)
    if swap:
        return lambda a, b: binary(op, b, a, b.dtype)
    return lambda a, b: binary(op, a, b, a.dtype)


# ---- compositions ----------------------------------------------------------------------------


def _negative(x: Node) -> Node:
    if x.dtype.is_signed:
        return _un(UOp.NEG, x)
    return _bin(BOp.SUB, _const(0, x), x)  # unsigned negation wraps, as numpy's


def _abs(x: Node) -> Node:
    return _un(UOp.ABS, x) if x.dtype.is_signed else x


def _sign(x: Node) -> Node:
    one, minus = _const(1, x), _const(-1, x) if x.dtype.is_signed else _const(0, x)
    if x.dtype.is_float:  # zero stays signed zero, NaN stays NaN
        return _where(
            _bin(BOp.CMPGT, x, _const(0, x)),
            one,
            _where(_bin(BOp.CMPLT, x, _const(0, x)), minus, x),
        )
    positive = _where(_bin(BOp.CMPGT, x, _const(0, x)), one, _const(0, x))
    return _where(_bin(BOp.CMPLT, x, _const(0, x)), minus, positive)


def _signbit(x: Node) -> Node:
    return _bin(BOp.CMPLT, _bin(BOp.COPYSIGN, _const(1.0, x), x), _const(0.0, x))


def _isinf(x: Node) -> Node:
    if not x.dtype.is_float:
        return _const(False, x, DType.BOOL)
    return _bin(BOp.EQ, _un(UOp.ABS, x), _const(math.inf, x))


def _isfinite(x: Node) -> Node:
    if not x.dtype.is_float:
        return _const(True, x, DType.BOOL)
    return _bin(BOp.CMPLT, _un(UOp.ABS, x), _const(math.inf, x))


def _isnan_any(x: Node) -> Node:
    return _isnan(x) if x.dtype.is_float else _const(False, x, DType.BOOL)


def _identity_for_ints(op: UOp) -> Callable[[Node], Node]:
    """A rounding function: integers are already integral."""
    return lambda x: _un(op, x) if x.dtype.is_float else x


def _extremum(op: BOp) -> Callable[[Node, Node], Node]:
    """``maximum``/``minimum``: NaN in either operand gives NaN (the standard)."""

    def build(a: Node, b: Node) -> Node:
        plain = _bin(op, a, b)
        if not a.dtype.is_float:
            return plain
        if _number(b):  # maximum(x, 0): where(isnan(x), x, max(x, 0)), relu as claims see it
            return _where(_isnan(a), a, plain)
        if _number(a):
            return _where(_isnan(b), b, plain)
        return _where(_isnan(a), a, _where(_isnan(b), b, plain))

    return build


def _number(x: Node) -> bool:
    """Whether ``x`` is a constant that is not NaN, broadcast: no NaN guard needed."""
    source = x.srcs[0] if x.op is Op.VIEW else x
    return source.op is Op.CONST and source.arg == source.arg


def _remainder(a: Node, b: Node) -> Node:
    """``a - floor(a / b) * b``: the sign of the divisor (Python's ``%``)."""
    r = _bin(BOp.MOD, a, b)  # C's fmod / %: the sign of the dividend
    zero = _const(0, a)
    if not a.dtype.is_signed:
        return r
    fix = _and(
        _bin(BOp.NOTEQ, r, zero),
        _bin(BOp.NOTEQ, _bin(BOp.CMPLT, r, zero), _bin(BOp.CMPLT, b, zero)),
    )
    fixed = _where(fix, _bin(BOp.ADD, r, b), r)
    if a.dtype.is_float:  # a zero remainder takes the divisor's sign
        return _where(_bin(BOp.EQ, fixed, zero), _bin(BOp.COPYSIGN, zero, b), fixed)
    return fixed


def _floor_divide(a: Node, b: Node) -> Node:
    zero = _const(0, a)
    if not a.dtype.is_float:
        q = _bin(BOp.DIV, a, b)  # truncates
        if not a.dtype.is_signed:
            return q
        r = _bin(BOp.MOD, a, b)
        fix = _and(
            _bin(BOp.NOTEQ, r, zero),
            _bin(BOp.NOTEQ, _bin(BOp.CMPLT, r, zero), _bin(BOp.CMPLT, b, zero)),
        )
        return _where(fix, _bin(BOp.SUB, q, _const(1, a)), q)
    # numpy's npy_divmod: exact where floor(a / b) would round the quotient first.
    mod = _bin(BOp.MOD, a, b)
    div = _bin(BOp.DIV, _bin(BOp.SUB, a, mod), b)
    fix = _and(
        _bin(BOp.NOTEQ, mod, zero),
        _bin(BOp.NOTEQ, _bin(BOp.CMPLT, b, zero), _bin(BOp.CMPLT, mod, zero)),
    )
    div = _where(fix, _bin(BOp.SUB, div, _const(1, a)), div)
    floor = _un(UOp.FLOOR, div)
    floor = _where(
        _bin(BOp.CMPGT, _bin(BOp.SUB, div, floor), _const(0.5, a)),
        _bin(BOp.ADD, floor, _const(1, a)),
        floor,
    )
    signed_zero = _bin(BOp.COPYSIGN, zero, _bin(BOp.DIV, a, b))
    exact = _where(_bin(BOp.EQ, div, zero), signed_zero, floor)
    return _where(_bin(BOp.EQ, b, zero), _bin(BOp.DIV, a, b), exact)


_UNSIGNED = {1: DType.U8, 2: DType.U16, 4: DType.U32, 8: DType.U64}


def _pow(a: Node, b: Node) -> Node:
    if a.dtype.is_float:
        return _bin(BOp.POW, a, b)
    if a.dtype.is_signed:
        # In the unsigned type of the same width, whose products wrap to the same bits, with
        # a Python scalar base made unsigned here: gcc 12 took minutes (at -O1 already) on
        # the chain of squares of a signed int32 or int64 kernel argument, or of its cast.
        unsigned = _UNSIGNED[a.dtype.itemsize]
        base = nodes.cast(a, unsigned)
        if a.op is Op.VIEW and a.srcs[0].op is Op.SCALAR:
            value = unsigned.wrap(a.srcs[0].arg)
            base = nodes.view(nodes.scalar(value, unsigned, a.device), a.arg)
        wrapped = nodes.cast(_pow(base, nodes.cast(b, unsigned)), a.dtype)
        return _where(_bin(BOp.CMPLT, b, _const(0, a)), _const(0, a), wrapped)
    # Square and multiply, one step per bit of the exponent.
    result, base, e = _const(1, a), a, b
    one = _const(1, a)
    for _ in range(8 * a.dtype.itemsize):
        odd = _bin(BOp.NOTEQ, _bin(BOp.BITAND, e, one), _const(0, a))
        result = _where(odd, _bin(BOp.MUL, result, base), result)
        base = _bin(BOp.MUL, base, base)
        e = _bin(BOp.SHR, e, one)
    return result


def _shift(op: BOp) -> Callable[[Node, Node], Node]:
    def build(a: Node, b: Node) -> Node:
        bits = 8 * a.dtype.itemsize
        inside = _and(_bin(BOp.CMPGE, b, _const(0, a)), _bin(BOp.CMPLT, b, _const(bits, a)))
        past = _const(0, a)
        if op is BOp.SHR and a.dtype.is_signed:
            past = _where(_bin(BOp.CMPLT, a, _const(0, a)), _const(-1, a), past)
        return _where(inside, _bin(op, a, _where(inside, b, _const(0, a))), past)

    return build


def _logaddexp(a: Node, b: Node) -> Node:
    """``max(a, b) + log1p(exp(-|a - b|))``. float16 and bfloat16 compute it in float32 and
    round once: rounded after each of its ops, bfloat16 came out 12 ulps off."""
    if a.dtype in (DType.F16, DType.BF16):
        wide = _logaddexp(nodes.cast(a, DType.F32), nodes.cast(b, DType.F32))
        return nodes.cast(wide, a.dtype)
    big = _extremum(BOp.MAX)(a, b)
    gap = _un(UOp.ABS, _bin(BOp.SUB, a, b))
    tail = _bin(BOp.ADD, big, _un(UOp.LOG1P, _un(UOp.EXP, _un(UOp.NEG, gap))))
    return _where(_bin(BOp.EQ, a, b), _bin(BOp.ADD, a, _const(math.log(2), a)), tail)


def _logical_xor(a: Node, b: Node) -> Node:
    return _bin(BOp.NOTEQ, a, b)


def _square(x: Node) -> Node:
    return _bin(BOp.MUL, x, x)


# ---- the functions ----------------------------------------------------------------------------

acos = _elementwise_unary("acos", FLOAT, _uop(UOp.ACOS), math_op=True)
acosh = _elementwise_unary("acosh", FLOAT, _uop(UOp.ACOSH), math_op=True)
asin = _elementwise_unary("asin", FLOAT, _uop(UOp.ASIN), math_op=True)
asinh = _elementwise_unary("asinh", FLOAT, _uop(UOp.ASINH), math_op=True)
atan = _elementwise_unary("atan", FLOAT, _uop(UOp.ATAN), math_op=True)
atanh = _elementwise_unary("atanh", FLOAT, _uop(UOp.ATANH), math_op=True)
cos = _elementwise_unary("cos", FLOAT, _uop(UOp.COS), math_op=True)
cosh = _elementwise_unary("cosh", FLOAT, _uop(UOp.COSH), math_op=True)
exp = _elementwise_unary("exp", FLOAT, _uop(UOp.EXP), math_op=True)
expm1 = _elementwise_unary("expm1", FLOAT, _uop(UOp.EXPM1), math_op=True)
log = _elementwise_unary("log", FLOAT, _uop(UOp.LN), math_op=True)
log1p = _elementwise_unary("log1p", FLOAT, _uop(UOp.LOG1P), math_op=True)
log2 = _elementwise_unary("log2", FLOAT, _uop(UOp.LOG2), math_op=True)
log10 = _elementwise_unary("log10", FLOAT, _uop(UOp.LOG10), math_op=True)
sin = _elementwise_unary("sin", FLOAT, _uop(UOp.SIN), math_op=True)
sinh = _elementwise_unary("sinh", FLOAT, _uop(UOp.SINH), math_op=True)
sqrt = _elementwise_unary("sqrt", FLOAT, _uop(UOp.SQRT), math_op=True)
tan = _elementwise_unary("tan", FLOAT, _uop(UOp.TAN), math_op=True)
tanh = _elementwise_unary("tanh", FLOAT, _uop(UOp.TANH), math_op=True)
reciprocal = _elementwise_unary("reciprocal", FLOAT, _uop(UOp.RECIPROCAL))
ceil = _elementwise_unary("ceil", NUMERIC, _identity_for_ints(UOp.CEIL))
floor = _elementwise_unary("floor", NUMERIC, _identity_for_ints(UOp.FLOOR))
trunc = _elementwise_unary("trunc", NUMERIC, _identity_for_ints(UOp.TRUNC))
round = _elementwise_unary("round", NUMERIC, _identity_for_ints(UOp.RINT))  # noqa: A001
abs = _elementwise_unary("abs", NUMERIC, _abs)  # noqa: A001
negative = _elementwise_unary("negative", NUMERIC, _negative)
positive = _elementwise_unary("positive", NUMERIC, lambda x: x)
square = _elementwise_unary("square", NUMERIC, _square)
sign = _elementwise_unary("sign", NUMERIC, _sign)
signbit = _elementwise_unary("signbit", FLOAT, _signbit)
isnan = _elementwise_unary("isnan", NUMERIC, _isnan_any)
isinf = _elementwise_unary("isinf", NUMERIC, _isinf)
isfinite = _elementwise_unary("isfinite", NUMERIC, _isfinite)
logical_not = _elementwise_unary("logical_not", BOOL, _uop(UOp.BITNOT))
bitwise_invert = _elementwise_unary("bitwise_invert", INTEGER_OR_BOOL, _uop(UOp.BITNOT))
conj = _elementwise_unary("conj", NUMERIC, lambda x: x)
real = _elementwise_unary("real", NUMERIC, lambda x: x)


def imag(x: Tensor, /) -> Tensor:
    """The imaginary part: zyx has no complex dtypes, and the standard takes only them."""
    x = array_argument(x, "imag")
    raise TypeError(f"imag takes complex arrays, which zyx does not support; got {x.dtype}")


add = _elementwise_binary("add", NUMERIC, _bop(BOp.ADD))
subtract = _elementwise_binary("subtract", NUMERIC, _bop(BOp.SUB))
multiply = _elementwise_binary("multiply", NUMERIC, _bop(BOp.MUL))
divide = _elementwise_binary("divide", FLOAT, _bop(BOp.DIV))
floor_divide = _elementwise_binary("floor_divide", NUMERIC, _floor_divide)
remainder = _elementwise_binary("remainder", NUMERIC, _remainder)
pow = _elementwise_binary("pow", NUMERIC, _pow, math_op=False)  # noqa: A001
atan2 = _elementwise_binary("atan2", FLOAT, _bop(BOp.ATAN2), math_op=True)
copysign = _elementwise_binary("copysign", FLOAT, _bop(BOp.COPYSIGN))
hypot = _elementwise_binary("hypot", FLOAT, _bop(BOp.HYPOT), math_op=True)
nextafter = _elementwise_binary("nextafter", FLOAT, _bop(BOp.NEXTAFTER))
logaddexp = _elementwise_binary("logaddexp", FLOAT, _logaddexp, math_op=True)
maximum = _elementwise_binary("maximum", NUMERIC, _extremum(BOp.MAX))
minimum = _elementwise_binary("minimum", NUMERIC, _extremum(BOp.MIN))
equal = _elementwise_binary("equal", ANY, _bop(BOp.EQ))
not_equal = _elementwise_binary("not_equal", ANY, _bop(BOp.NOTEQ))
less = _elementwise_binary("less", NUMERIC, _bop(BOp.CMPLT))
less_equal = _elementwise_binary("less_equal", NUMERIC, _bop(BOp.CMPGE, swap=True))
greater = _elementwise_binary("greater", NUMERIC, _bop(BOp.CMPGT))
greater_equal = _elementwise_binary("greater_equal", NUMERIC, _bop(BOp.CMPGE))
logical_and = _elementwise_binary("logical_and", BOOL, _bop(BOp.AND))
logical_or = _elementwise_binary("logical_or", BOOL, _bop(BOp.OR))
logical_xor = _elementwise_binary("logical_xor", BOOL, _logical_xor)
bitwise_and = _elementwise_binary("bitwise_and", INTEGER_OR_BOOL, _bop(BOp.BITAND))
bitwise_or = _elementwise_binary("bitwise_or", INTEGER_OR_BOOL, _bop(BOp.BITOR))
bitwise_xor = _elementwise_binary("bitwise_xor", INTEGER_OR_BOOL, _bop(BOp.BITXOR))
bitwise_left_shift = _elementwise_binary("bitwise_left_shift", INTEGER, _shift(BOp.SHL))
bitwise_right_shift = _elementwise_binary("bitwise_right_shift", INTEGER, _shift(BOp.SHR))


def clip(x: Tensor, /, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    """``x`` limited to ``[min, max]`` (either may be None, a scalar or an array); the
    result has ``x``'s dtype and shape (the standard)."""
    _unary("clip", x, NUMERIC)
    out = x
    for bound, op in ((min, BOp.MAX), (max, BOp.MIN)):
        if bound is None:
            continue
        if isinstance(bound, Tensor) and bound.dtype is not x.dtype:
            bound = bound.astype(x.dtype)
        a, b, _ = _binary("clip", out, bound, NUMERIC)
        out = Tensor(_extremum(op)(a, b))
    if out.shape != x.shape:
        raise ValueError(f"clip: bounds of shape {out.shape} broadcast x of shape {x.shape}")
    return out
