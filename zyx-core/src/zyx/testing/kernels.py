"""Kernel factories of the conformance suite, for anyone who needs known-good kernels.

Elementwise kernels are built from :class:`Elementwise` parts: each part computes one
output from its own inputs, and knows the input domain where its result is defined (no
``ln`` of a negative, no integer division by zero, no signed overflow, shifts within the
bit width), how far off each float result may be (:func:`ulp_budget`), and what it needs
of the device. Several parts make one kernel, so a whole dtype's ops cost one compile.

Every other factory returns a ``Kernel`` whose params are documented in its docstring.
More sample kernels with their arguments (a tiled matmul among them) are in
:mod:`zyx.testing.examples`; the suite runs those too.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from math import ceil, log2
from typing import TYPE_CHECKING

import ml_dtypes
import numpy as np

from zyx.dtypes import DType, DTypeCapability
from zyx.ir import INDEX, BOp, Kernel, KernelBuilder, ParamKind, Storage, UOp, Value, ceil_div
from zyx.testing.numerics import Array, random, spread

if TYPE_CHECKING:
    from zyx.backend import DeviceInfo

LOCAL = 64
"""Work-items per group of the one-dimensional kernels here."""

Sampler = Callable[[np.random.Generator, int], list[Array]]
"""Draws ``n`` random elements for each input of a part."""

ARITHMETIC = DTypeCapability.ARITHMETIC
MATH = DTypeCapability.MATH
STORAGE = DTypeCapability.STORAGE

_BOOL_BINARY = (
    BOp.OR, BOp.AND, BOp.BITXOR, BOp.BITOR, BOp.BITAND, BOp.NOTEQ, BOp.EQ, BOp.DIV, BOp.MOD,
    BOp.ADD, BOp.SUB, BOp.MUL, BOp.MAX, BOp.MIN, BOp.SHL, BOp.SHR, BOp.CMPLT, BOp.CMPGT,
    BOp.CMPGE,
)  # fmt: skip
_NUMERIC_BINARY = (
    BOp.ADD, BOp.SUB, BOp.MUL, BOp.DIV, BOp.MOD, BOp.CMPLT, BOp.CMPGT, BOp.CMPGE, BOp.MAX,
    BOp.MIN, BOp.NOTEQ, BOp.EQ,
)  # fmt: skip
_INT_ONLY_BINARY = (BOp.BITXOR, BOp.BITOR, BOp.BITAND, BOp.SHL, BOp.SHR)
_FLOAT_ONLY_BINARY = tuple(op for op in BOp if op.is_float_only)
_TIES = frozenset(
    {BOp.CMPLT, BOp.CMPGT, BOp.CMPGE, BOp.MAX, BOp.MIN, BOp.NOTEQ, BOp.EQ, BOp.NEXTAFTER}
)


@dataclass(frozen=True)
class Elementwise:
    """``out[i] = compute(in_0[i], in_1[i], ...)`` for ``i < n``: one part of a kernel."""

    name: str
    inputs: tuple[DType, ...]
    output: DType
    compute: Callable[..., Value]
    """Builds the output value from the loaded inputs."""
    sample: Sampler
    """Random inputs from the domain where the result is defined."""
    needs: tuple[tuple[DType, DTypeCapability], ...]
    """What the device must claim for this part to be tested."""
    ulps: float | None = None
    """The most a float result may be off, per element, in ulps of ``output``
    (:func:`~zyx.testing.numerics.ulps`); ``None`` for a result that is not a float."""
    ieee: bool = False
    """Inputs hold NaN, infinities and signed zeros (:func:`special_values`): a float
    result is checked by :func:`~zyx.testing.numerics.assert_ieee`, not by the norm."""
    signed_zeros: bool = True
    """Whether the sign of a zero result is defined (``fmax(-0, +0)`` may give either)."""

    def supported(self, info: DeviceInfo) -> bool:
        """Whether ``info`` claims every capability this part needs."""
        return all(info.supports(dtype, cap) for dtype, cap in self.needs)


def elementwise(name: str, parts: Sequence[Elementwise], local: int = LOCAL) -> Kernel:
    """One kernel computing every part for ``i < n``.

    Params: for each part its inputs (``Global``) then its output (``GlobalMut``); last the
    element count ``n`` (``Variable`` i64). ``ceil(n / local)`` groups of ``local`` items.
    """
    kb = KernelBuilder(name)
    slots = []
    for part in parts:
        inputs = [kb.param(dtype) for dtype in part.inputs]
        slots.append((part, inputs, kb.param(part.output, ParamKind.GLOBAL_MUT)))
    n = kb.variable(INDEX, "n")
    i = kb.group(0, ceil_div(n, local)) * local + kb.local(0, local)
    with kb.if_(i < n):
        for part, inputs, out in slots:
            out[i] = part.compute(*(x[i] for x in inputs))
    return kb.build()


# ---- parts -------------------------------------------------------------------------------


def unary_ops(dtype: DType) -> tuple[UOp, ...]:
    """The unary ops defined on ``dtype``."""
    if dtype is DType.BOOL:
        return (UOp.BITNOT,)
    if dtype.is_float:
        return tuple(op for op in UOp if op is not UOp.BITNOT)
    return (UOp.BITNOT, UOp.NEG, UOp.ABS) if dtype.is_signed else (UOp.BITNOT,)


def binary_ops(dtype: DType) -> tuple[BOp, ...]:
    """The binary ops defined on ``dtype`` (logical ``or``/``and`` only on bools). Bools
    compute as integers, as in C, and a bool result is their nonzero-ness: ``true + true``
    is true, ``x / 0`` and ``x % 0`` are 0 (where C is undefined)."""
    if dtype is DType.BOOL:
        return _BOOL_BINARY
    if dtype.is_float:
        return (*_NUMERIC_BINARY, *_FLOAT_ONLY_BINARY)
    return (*_NUMERIC_BINARY, *_INT_ONLY_BINARY)


_MATH_ULPS: dict[UOp | BOp, float] = {
    UOp.EXP: 3, UOp.EXP2: 3, UOp.LN: 3, UOp.LOG2: 3, UOp.SIN: 4, UOp.COS: 4, BOp.POW: 16,
    UOp.TAN: 5, UOp.TANH: 5, UOp.ASIN: 4, UOp.ACOS: 4, UOp.ATAN: 5, UOp.SINH: 4,
    UOp.COSH: 4, UOp.ASINH: 4, UOp.ACOSH: 4, UOp.ATANH: 5, UOp.EXPM1: 3, UOp.LOG1P: 2,
    UOp.LOG10: 3, BOp.ATAN2: 6, BOp.HYPOT: 4,
}  # fmt: skip
"""The math functions' limits, the same in OpenCL's single and double precision tables."""

F32_ULPS: dict[UOp | BOp, float] = {
    **_MATH_ULPS, UOp.SQRT: 3, UOp.RECIPROCAL: 2.5, BOp.DIV: 2.5,
}  # fmt: skip
"""The largest error of these f32 ops, in ulps, that OpenCL's full profile allows (the
OpenCL C spec's table of "ULP values for single precision built-in math functions");
CUDA's and C libraries' are smaller. Every other float op, and every conversion, must be
correctly rounded (``ceil``, ``rint``, ``min``, ``copysign`` and ``nextafter`` too, which
are exact): at most half an ulp off."""

F64_ULPS: dict[UOp | BOp, float] = dict(_MATH_ULPS)
"""The same for f64 (the spec's "ULP values for double precision built-in math
functions"): there square root, reciprocal and division are correctly rounded."""

F64_REFERENCE_ULPS = 4.0
"""What the float64 reference's own math functions may be off: numpy's (its SIMD ones
are within 4 ulps), against which a device's f64 math is measured."""

REFERENCE_SLACK = 2.0**-16
"""Ulps every budget allows for the reference's own rounding: it computes in float64, so
a u64 converted to f32 is rounded twice there (first to 53 bits)."""


def ulp_budget(op: UOp | BOp | None, dtype: DType) -> float | None:
    """How far off a ``dtype`` result of ``op`` (``None``: a conversion to ``dtype``) may be,
    per element, in ulps of ``dtype``; ``None`` for a result that is not a float.

    f32: :data:`F32_ULPS`, else half an ulp. f16 and bf16 compute in f32 and round once,
    so half an ulp plus the f32 error in their coarser ulps: a result rounded the wrong way
    (truncated, say) is caught. f64: :data:`F64_ULPS` plus the reference's own error
    (:data:`F64_REFERENCE_ULPS`), else half an ulp.
    """
    f32 = F32_ULPS.get(op, 0.5) if op is not None else 0.5
    if dtype is DType.F32:
        return f32 + REFERENCE_SLACK
    if dtype in (DType.F16, DType.BF16):
        coarser = 2.0 ** (ml_dtypes.finfo(dtype.numpy).nmant - 23)
        return 0.5 + f32 * coarser + REFERENCE_SLACK
    if dtype is DType.F64 and op in F64_ULPS:
        return F64_ULPS[op] + F64_REFERENCE_ULPS
    if dtype is DType.F64:
        return 0.5 + REFERENCE_SLACK
    return None


def capability(op: UOp | BOp) -> DTypeCapability:
    """What an op needs of its dtype: MATH for the float-only ops, else ARITHMETIC."""
    return MATH if op.is_float_only else ARITHMETIC


def unary(op: UOp, dtype: DType) -> Elementwise:
    """``out = op(x)``, on inputs where ``op`` is defined."""
    return Elementwise(
        name=f"{op.value}_{dtype}",
        inputs=(dtype,),
        output=dtype,
        compute=lambda x: x.builder.unary(op, x),
        sample=_unary_domain(op, dtype),
        needs=((dtype, capability(op)),),
        ulps=ulp_budget(op, dtype),
    )


def binary(op: BOp, dtype: DType) -> Elementwise:
    """``out = op(a, b)`` (bool for comparisons), on inputs where ``op`` is defined."""
    return Elementwise(
        name=f"{op.value}_{dtype}",
        inputs=(dtype, dtype),
        output=DType.BOOL if op.is_comparison else dtype,
        compute=lambda a, b: a.builder.binary(op, a, b),
        sample=_binary_domain(op, dtype),
        needs=((dtype, capability(op)), *([(DType.BOOL, STORAGE)] if op.is_comparison else [])),
        ulps=None if op.is_comparison else ulp_budget(op, dtype),
    )


def where(dtype: DType) -> Elementwise:
    """``out = cond ? a : b``, ``cond`` a bool input: a select that copies either operand
    exactly."""
    choices = _copy_domain(dtype)
    return Elementwise(
        name=f"where_{dtype}",
        inputs=(DType.BOOL, dtype, dtype),
        output=dtype,
        compute=lambda cond, a, b: a.builder.where(cond, a, b),
        sample=lambda rng, n: [random(rng, DType.BOOL, n), *choices(rng, n), *choices(rng, n)],
        needs=((dtype, STORAGE), (DType.BOOL, STORAGE)),
        ulps=0.5 if dtype.is_float else None,
    )


def fma(dtype: DType) -> Elementwise:
    """``out = a * b + c`` rounded once (``zyx.ir.Fma``), f32 or f64. Half the addends
    nearly cancel the product (``-(a * b)`` rounded, and nudged): there a multiply and an
    add, rounded each, are many ulps off the one-rounding result."""

    def sample(rng: np.random.Generator, n: int) -> list[Array]:
        a, b, c = (random(rng, dtype, n) for _ in range(3))
        near = rng.random(n) < 0.5
        m = int(near.sum())
        nudge = 1 + rng.choice([-1.0, 1.0], m) * 2.0 ** -rng.integers(1, 40, m).astype(float)
        c[near] = (-(a[near] * b[near]) * nudge).astype(dtype.numpy)
        return [a, b, c]

    return Elementwise(
        name=f"fma_{dtype}",
        inputs=(dtype, dtype, dtype),
        output=dtype,
        compute=lambda a, b, c: a.builder.fma(a, b, c),
        sample=sample,
        needs=((dtype, ARITHMETIC),),
        ulps=ulp_budget(BOp.ADD, dtype),
    )


def nextafter_steps(dtype: DType, special: bool = False) -> Elementwise:
    """``nextafter(a, b)`` for every pair of float ``dtype``'s edges: the least subnormal,
    the largest subnormal and the least normal, 1 and its neighbours, the largest finite
    value, of both signs; ``special`` adds both zeros, the infinities and NaN. Every step
    is exact, in ``dtype``'s own ulps (f16 and bf16 compute in float32, whose steps are
    smaller); a zero result's sign is defined only where ``special``."""
    info = ml_dtypes.finfo(dtype.numpy)
    least, normal = float(info.smallest_subnormal), float(info.smallest_normal)
    eps, top = float(info.eps), float(info.max)
    edges = [least, normal - least, normal, 1.0 - eps / 2, 1.0, 1.0 + eps, 0.5, 3.0, top]
    edges += [-x for x in edges]
    edges += [0.0, -0.0, np.inf, -np.inf, np.nan] if special else []
    a, b = (np.array(pairs, dtype.numpy) for pairs in zip(*itertools.product(edges, edges)))

    def sample(rng: np.random.Generator, n: int) -> list[Array]:
        if n < len(a):
            raise ValueError(f"{len(a)} pairs of edges need {len(a)} elements, not {n}")
        return [np.resize(a, n), np.resize(b, n)]

    return Elementwise(
        name=f"nextafter_steps{'_ieee' if special else ''}_{dtype}",
        inputs=(dtype, dtype),
        output=dtype,
        compute=lambda x, y: x.builder.binary(BOp.NEXTAFTER, x, y),
        sample=sample,
        needs=((dtype, MATH),),
        ulps=0.5,
        ieee=True,
        signed_zeros=special,
    )


def division_edges(op: BOp, dtype: DType) -> Elementwise:
    """Integer ``a / b`` or ``a % b`` (``op``) where C is undefined but the IR is not: a
    zero divisor gives 0, MIN / -1 wraps to MIN and MIN % -1 is 0. Divisors are 0, 1 and
    (signed) -1; half the dividends of -1 are MIN."""
    if op not in (BOp.DIV, BOp.MOD) or not dtype.is_int:
        raise ValueError(f"division_edges is for integer div and mod, not {op.value} on {dtype}")
    divisors = np.array([0, 1, -1] if dtype.is_signed else [0, 1], dtype.numpy)

    def sample(rng: np.random.Generator, n: int) -> list[Array]:
        a, b = random(rng, dtype, n), rng.choice(divisors, n)
        a[(b == -1) & (rng.random(n) < 0.5)] = np.iinfo(dtype.numpy).min
        return [a, b]

    return Elementwise(
        name=f"{op.value}_edges_{dtype}",
        inputs=(dtype, dtype),
        output=dtype,
        compute=lambda a, b: a.builder.binary(op, a, b),
        sample=sample,
        needs=((dtype, ARITHMETIC),),
    )


def division_by_constants(op: BOp, dtype: DType) -> Elementwise:
    """Integer ``a / c`` or ``a % c`` (``op``) for constants ``c``, one per element, picked
    by the second input: 0 and -1 (which need the guard a variable divisor gets), 1, 7,
    MIN and MAX, and ones past the dtype's range that wrap to 0, -1, 7 and MIN (a renderer
    that tests the unwrapped value divides by zero: SIGFPE). A fifth of the dividends are
    MIN."""
    if op not in (BOp.DIV, BOp.MOD) or not dtype.is_int:
        raise ValueError(f"division_by_constants is for integer div and mod, not {op} on {dtype}")
    low, high = dtype.int_range
    span = high - low + 1
    past = (span, span - 1, span + 7, span // 2 if dtype.is_signed else -span)
    constants = tuple(dict.fromkeys((0, -1, 1, 7, low, high, *past)))  # unsigned: 0 is MIN

    def sample(rng: np.random.Generator, n: int) -> list[Array]:
        a = random(rng, dtype, n)
        a[rng.random(n) < 0.2] = low
        return [a, rng.integers(0, len(constants), n).astype(dtype.numpy)]

    def compute(a: Value, pick: Value) -> Value:
        kb = a.builder
        terms = [
            pick.eq(k).cast(dtype) * kb.binary(op, a, kb.const(c, dtype))
            for k, c in enumerate(constants)
        ]
        return functools.reduce(operator.add, terms)

    return Elementwise(
        name=f"{op.value}_by_constants_{dtype}",
        inputs=(dtype, dtype),
        output=dtype,
        compute=compute,
        sample=sample,
        needs=((dtype, ARITHMETIC),),
    )


WRAPPING_BINARY = (BOp.ADD, BOp.SUB, BOp.MUL, BOp.SHL)
WRAPPING_UNARY = (UOp.NEG, UOp.ABS)
"""The integer ops that may leave their type's range, where the IR wraps: C leaves it
undefined for signed types (and for the u8 and u16 products and shifts it computes in int),
and compilers optimize on that."""


def wrapping(op: UOp | BOp, dtype: DType) -> Elementwise:
    """``r + (test ? 1 : 0)``, where ``r`` is integer ``op`` on operands from ``dtype``'s
    whole range (shift counts within its width), a quarter of them at its ends, so that
    many results wrap (``MAX + 1`` is ``MIN``, ``-MIN`` and ``abs(MIN)`` are ``MIN``), and
    ``test`` is what a compiler folds if it assumes no overflow: ``a + b < a`` to ``b < 0``,
    ``a - b > a`` to ``b < 0``, ``(a << b) >> b == a`` to true, ``-a > 0`` to ``a < 0``,
    ``abs(a) >= 0`` to true (none for ``*``)."""
    info = np.iinfo(dtype.numpy)
    ends = np.array([info.min, info.max, info.min + 1, info.max - 1], dtype.numpy)

    def operand(rng: np.random.Generator, n: int) -> Array:
        x = random(rng, dtype, n)
        at_end = rng.random(n) < 0.25
        x[at_end] = rng.choice(ends, int(at_end.sum()))
        return x

    def sample(rng: np.random.Generator, n: int) -> list[Array]:
        if isinstance(op, UOp):
            return [operand(rng, n)]
        if op is BOp.SHL:
            counts = rng.integers(0, dtype.itemsize * 8, n).astype(dtype.numpy)
            return [operand(rng, n), counts]
        return [operand(rng, n), operand(rng, n)]

    def compute(*operands: Value) -> Value:
        a, b = operands[0], operands[-1]  # b is a again for a unary op
        r = a.builder.unary(op, a) if isinstance(op, UOp) else a.builder.binary(op, a, b)
        return r + _FOLDED[op](r, a, b).cast(dtype)

    inputs = (dtype,) if isinstance(op, UOp) else (dtype, dtype)
    return Elementwise(
        name=f"{op.value}_wraps_{dtype}",
        inputs=inputs,
        output=dtype,
        compute=compute,
        sample=sample,
        needs=((dtype, ARITHMETIC),),
    )


_FOLDED: dict[UOp | BOp, Callable[..., Value]] = {
    BOp.ADD: lambda r, a, b: r < a,
    BOp.SUB: lambda r, a, b: r > a,
    BOp.MUL: lambda r, a, b: r.builder.const(False, DType.BOOL),
    BOp.SHL: lambda r, a, b: (r >> b).eq(a),
    UOp.NEG: lambda r, a, b: r > 0,
    UOp.ABS: lambda r, a, b: r >= 0,
}
"""Per op, a test of its result that a compiler assuming no overflow folds away."""


def cast(src: DType, dst: DType) -> Elementwise:
    """``out = (dst) x``, on values across ``src``'s range where C defines the conversion
    (zeros included, for bool)."""
    return Elementwise(
        name=f"cast_{src}_to_{dst}",
        inputs=(src,),
        output=dst,
        compute=lambda x: x.cast(dst),
        sample=_cast_domain(src, dst),
        needs=((src, ARITHMETIC), (dst, ARITHMETIC)),
        ulps=ulp_budget(None, dst),
    )


def copy(dtype: DType) -> Elementwise:
    """``out = x``: load and store only. Floats are finite, so any copy is bit-exact."""
    return Elementwise(
        name=f"copy_{dtype}",
        inputs=(dtype,),
        output=dtype,
        compute=lambda x: x,
        sample=_copy_domain(dtype),
        needs=((dtype, STORAGE),),
    )


def _copy_domain(dtype: DType) -> Sampler:
    low, high = (-100, 100) if dtype.is_float else (None, None)
    return lambda rng, n: [random(rng, dtype, n, low, high)]


def _unary_domain(op: UOp, dtype: DType) -> Sampler:
    if op is UOp.RECIPROCAL:
        return lambda rng, n: [_signed(rng, dtype, n, 0.25, 4)]
    if op is UOp.RINT:
        return lambda rng, n: [_with_ties(rng, random(rng, dtype, n, -20.0, 20.0))]
    if op in (UOp.NEG, UOp.ABS) and not dtype.is_float:
        top = int(np.iinfo(dtype.numpy).max)  # not the minimum: its negation overflows
        return lambda rng, n: [random(rng, dtype, n, -top, top)]
    if not dtype.is_float:
        return lambda rng, n: [random(rng, dtype, n)]
    low, high = _FLOAT_DOMAINS.get(op, (-4.0, 4.0))
    return lambda rng, n: [random(rng, dtype, n, low, high)]


_FLOAT_DOMAINS = {
    UOp.LN: (0.05, 20.0), UOp.LOG2: (0.05, 20.0), UOp.SQRT: (0.05, 20.0),
    UOp.SIN: (-6.0, 6.0), UOp.COS: (-6.0, 6.0), UOp.FLOOR: (-20.0, 20.0),
    UOp.TRUNC: (-20.0, 20.0), UOp.TAN: (-6.0, 6.0), UOp.ASIN: (-1.0, 1.0),
    UOp.ACOS: (-1.0, 1.0), UOp.SINH: (-10.0, 10.0), UOp.COSH: (-10.0, 10.0),
    UOp.ASINH: (-20.0, 20.0), UOp.ACOSH: (1.0, 20.0), UOp.ATANH: (-0.99, 0.99),
    UOp.LOG1P: (-0.95, 20.0), UOp.LOG10: (0.05, 20.0), UOp.CEIL: (-20.0, 20.0),
}  # fmt: skip
"""Where each float function is defined (and its result finite in f16), ``[-4, 4]`` for
the others."""


def _with_ties(rng: np.random.Generator, x: Array) -> Array:
    """``x`` with a quarter of its values moved halfway between two integers (``rint``
    rounds those to the even one)."""
    ties = rng.random(len(x)) < 0.25
    x[ties] = np.floor(x[ties].astype(np.float64)) + 0.5
    return x


def _binary_domain(op: BOp, dtype: DType) -> Sampler:
    """Operands where ``op`` is defined in C; comparisons and max get ties (``a == b``)."""
    draw = _float_operands(op, dtype) if dtype.is_float else _int_operands(op, dtype)

    def sample(rng: np.random.Generator, n: int) -> list[Array]:
        a, b = draw(rng, n)
        if op in _TIES:
            ties = rng.random(n) < 0.25
            b[ties] = a[ties]
        return [a, b]

    return sample


def _float_operands(op: BOp, dtype: DType) -> Sampler:
    if op is BOp.DIV:
        return lambda rng, n: [random(rng, dtype, n), _signed(rng, dtype, n, 0.25, 4)]
    if op is BOp.MOD:
        return lambda rng, n: [random(rng, dtype, n, -8, 8), _signed(rng, dtype, n, 0.5, 4)]
    if op is BOp.POW:
        return lambda rng, n: [random(rng, dtype, n, 0.5, 2), random(rng, dtype, n, -2, 2)]
    return lambda rng, n: [random(rng, dtype, n), random(rng, dtype, n)]


def _int_operands(op: BOp, dtype: DType) -> Sampler:  # noqa: C901 - one domain per op
    """Operands of an integer (or bool) op: no overflow, no division by zero or of the
    minimum by -1, shifts within the width and of non-negative values."""
    if dtype is DType.BOOL:
        return lambda rng, n: [random(rng, dtype, n), random(rng, dtype, n)]
    bits, top = dtype.itemsize * 8, int(np.iinfo(dtype.numpy).max)
    half = 1 << (bits // 2)
    signed = dtype.is_signed
    if op in (BOp.ADD, BOp.SUB) and signed:
        quarter = 1 << (bits - 2)
        return lambda rng, n: [random(rng, dtype, n, -quarter, quarter - 1) for _ in "ab"]
    if op is BOp.MUL:
        limit = half // 2 - 1 if signed else half - 1
        low = -limit if signed else 1
        return lambda rng, n: [random(rng, dtype, n, low, limit) for _ in "ab"]
    if op in (BOp.DIV, BOp.MOD):
        dividend = (-top, top) if signed else (1, top)  # not the minimum: min / -1 overflows
        return lambda rng, n: [random(rng, dtype, n, *dividend), _signed(rng, dtype, n, 1, half)]
    if op is BOp.SHL:
        # a << b stays under 2**(bits - 1): no signed overflow.
        return lambda rng, n: [
            random(rng, dtype, n, 1, half // 2 - 1),
            rng.integers(0, bits // 2, n, endpoint=True).astype(dtype.numpy),
        ]
    if op is BOp.SHR:
        return lambda rng, n: [
            random(rng, dtype, n, 1, top),
            rng.integers(0, bits - 1, n, endpoint=True).astype(dtype.numpy),
        ]
    return lambda rng, n: [random(rng, dtype, n), random(rng, dtype, n)]


def _cast_domain(src: DType, dst: DType) -> Sampler:
    """Values across ``src``'s range (:func:`spread`) where C defines the conversion to
    ``dst``, an eighth of them zero."""
    top, signed = _cast_bound(src, dst)

    def sample(rng: np.random.Generator, n: int) -> list[Array]:
        if src is DType.BOOL:
            return [random(rng, src, n)]
        x = spread(rng, src, n, top, signed)
        x[rng.random(n) < 0.125] = 0
        return [x]

    return sample


def _cast_bound(src: DType, dst: DType) -> tuple[float, bool]:
    """The magnitudes below which C defines the conversion of a ``src`` value to ``dst``,
    and whether for negative values: any value of an integer to an integer (narrowing wraps
    modulo 2**bits) and to bool; to a float, values within its finite range; a float to an
    integer, values whose truncation the integer holds (none negative, for unsigned)."""
    top = _end(src)
    if dst.is_float:
        return min(top, _end(dst)), src.is_signed
    if src.is_float and dst.is_int:
        return min(top, _end(dst)), dst.is_signed
    return top, src.is_signed


def _end(dtype: DType) -> float:
    """The smallest magnitude past ``dtype``'s range: the largest finite float (whose own
    conversion is left out), or the largest integer plus one."""
    if dtype.is_float:
        return float(ml_dtypes.finfo(dtype.numpy).max)
    return dtype.int_range[1] + 1


def _signed(rng: np.random.Generator, dtype: DType, n: int, low: float, high: float) -> Array:
    """Magnitudes in ``[low, high]`` with random signs (signed dtypes only)."""
    x = random(rng, dtype, n, low, high)
    if dtype.is_signed:
        x[rng.random(n) < 0.5] *= -1
    return x


# ---- IEEE 754 special values ---------------------------------------------------------------


def special_values(dtype: DType) -> Array:
    """The values of float ``dtype`` that IEEE 754 gives rules of their own: NaN, the
    infinities, both zeros, the largest finite values, and ±1 (``pow``'s special cases)."""
    top = float(ml_dtypes.finfo(dtype.numpy).max)
    return np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, top, -top, 1.0, -1.0], dtype.numpy)


def subnormal_values(dtype: DType) -> Array:
    """Float ``dtype``'s subnormals at both ends, and its smallest normals, of both signs."""
    info = ml_dtypes.finfo(dtype.numpy)
    least, normal = float(info.smallest_subnormal), float(info.smallest_normal)
    return np.array([least, normal - least, normal, -least, least - normal, -normal], dtype.numpy)


def with_special_values(
    part: Elementwise, *, signed_zeros: bool = True, subnormals: bool = False
) -> Elementwise:
    """``part`` (a float op, or a cast from a float) on inputs half of which (of its float
    inputs) are
    :func:`special_values` (:func:`subnormal_values` where ``subnormals``), those its
    output can hold (C leaves a conversion past a float's range undefined), checked by
    :func:`~zyx.testing.numerics.assert_ieee`. ``signed_zeros``: whether the sign of a zero
    result is defined."""
    values = subnormal_values if subnormals else special_values
    return replace(
        part,
        name=f"{part.name}_{'subnormal' if subnormals else 'ieee'}",
        sample=lambda rng, n: [
            _with_specials(rng, d, part.output, n, values(d) if d.is_float else None)
            for d in part.inputs
        ],
        ieee=True,
        signed_zeros=signed_zeros,
    )


def _with_specials(
    rng: np.random.Generator, dtype: DType, target: DType, n: int, specials: Array | None
) -> Array:
    """Random values of ``dtype``, half of them replaced by ``specials`` that ``target``
    can hold (a finite one past ``target``'s range is left out); ``None``: none replaced
    (the condition of a ``where``)."""
    values = random(rng, dtype, n)
    if specials is None:
        return values
    if target.is_float:
        held = np.abs(specials.astype(np.float64)) <= _end(target)
        specials = specials[held | ~np.isfinite(specials.astype(np.float64))]
    chosen = rng.random(n) < 0.5
    values[chosen] = rng.choice(specials, int(chosen.sum()))
    return values


# ---- kernels with more structure ---------------------------------------------------------


def axpb(dtype: DType, local: int = LOCAL) -> Kernel:
    """``y[i] = x[i] * alpha + beta`` for ``i < n``.

    Params: ``x`` (Global), ``y`` (GlobalMut), ``alpha``, ``beta`` (Variable ``dtype``),
    ``n`` (Variable i64).
    """
    kb = KernelBuilder(f"axpb_{dtype}")
    x, y = kb.param(dtype), kb.param(dtype, ParamKind.GLOBAL_MUT)
    alpha, beta, n = kb.variable(dtype, "alpha"), kb.variable(dtype, "beta"), kb.variable()
    i = kb.group(0, ceil_div(n, local)) * local + kb.local(0, local)
    with kb.if_(i < n):
        y[i] = x[i] * alpha + beta
    return kb.build()


def group_sum(dtype: DType, local: int = LOCAL) -> Kernel:
    """Per work-group sums by a tree reduction in local memory, with a barrier per level.

    Params: ``x`` (Global), ``partial`` (GlobalMut, one element per group), ``n`` (Variable
    i64). ``ceil(n / local)`` groups; ``local`` must be a power of two.
    """
    if local & (local - 1):
        raise ValueError(f"local size {local} is not a power of two")
    kb = KernelBuilder(f"group_sum_{dtype}")
    x, partial, n = kb.param(dtype), kb.param(dtype, ParamKind.GLOBAL_MUT), kb.variable()
    group, item = kb.group(0, ceil_div(n, local)), kb.local(0, local)
    i = group * local + item
    loaded = kb.define(dtype)
    loaded[0] = 0
    with kb.if_(i < n):
        loaded[0] = x[i]
    tree = kb.define(dtype, local, Storage.LOCAL)
    tree[item] = loaded[0]
    kb.barrier()
    with kb.loop(int(log2(local))) as level:
        stride = kb.const(local // 2, INDEX) >> level
        with kb.if_(item < stride):
            tree[item] = tree[item] + tree[item + stride]
        kb.barrier()
    with kb.if_(item.eq(0)):
        partial[group] = tree[0]
    return kb.build()


def positive_prefix_sums(dtype: DType, local: int = LOCAL) -> Kernel:
    """Row ``r`` of ``x`` (``rows × cols``): ``y[r]`` = the sum of the positive values among
    its first ``cols - r % 4`` elements. A register accumulator, a loop whose trip count
    differs between work-items, and an ``If`` inside the loop.

    Params: ``x`` (Global), ``y`` (GlobalMut), ``rows``, ``cols`` (Variable i64).
    """
    kb = KernelBuilder(f"positive_prefix_sums_{dtype}")
    x, y = kb.param(dtype), kb.param(dtype, ParamKind.GLOBAL_MUT)
    rows, cols = kb.variable(INDEX, "rows"), kb.variable(INDEX, "cols")
    r = kb.group(0, ceil_div(rows, local)) * local + kb.local(0, local)
    with kb.if_(r < rows):
        acc = kb.define(dtype)
        acc[0] = 0
        with kb.loop(cols - r % 4) as j:
            v = x[r * cols + j]
            with kb.if_(v > 0):
                acc[0] = acc[0] + v
        y[r] = acc[0]
    return kb.build()


def grid3d(shape: tuple[int, int, int], local: tuple[int, int, int]) -> Kernel:
    """``out[i] = a[i] + x + 100 y + 10000 z`` over a ``(nz, ny, nx)`` i32 array, where
    ``i = (z ny + y) nx + x``: three group axes and three local axes (``local`` is per
    axis ``(x, y, z)``), so a swapped or mis-sized axis shows in the values.

    Params: ``a`` (Global i32), ``out`` (GlobalMut i32).
    """
    nz, ny, nx = shape
    kb = KernelBuilder("grid3d")
    a, out = kb.param(DType.I32), kb.param(DType.I32, ParamKind.GLOBAL_MUT)
    x, y, z = (
        kb.group(axis, ceil(size / items)) * items + kb.local(axis, items)
        for axis, (size, items) in enumerate(zip((nx, ny, nz), local))
    )
    with kb.if_((x < nx) & (y < ny) & (z < nz)):
        i = (z * ny + y) * nx + x
        out[i] = a[i] + (x + y * 100 + z * 10000).cast(DType.I32)
    return kb.build()


def local_threads(sizes: tuple[int, int]) -> Kernel:
    """Each of ``sizes[0] × sizes[1]`` work-items of one group writes its flat index.

    Params: ``out`` (GlobalMut i64, ``sizes[0] * sizes[1]`` elements).
    """
    kb = KernelBuilder("local_threads")
    out = kb.param(INDEX, ParamKind.GLOBAL_MUT)
    x, y = kb.local(0, sizes[0]), kb.local(1, sizes[1])
    i = y * sizes[0] + x
    out[i] = i
    return kb.build()


def local_memory(nbytes: int) -> Kernel:
    """One work-item fills ``nbytes`` of local memory (rounded up to f32s) and copies its
    last element out.

    Params: ``out`` (GlobalMut f32, one element).
    """
    length = -(-nbytes // 4)
    kb = KernelBuilder("local_memory")
    out = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    kb.local(0, 1)
    scratch = kb.define(DType.F32, length, Storage.LOCAL)
    with kb.loop(length) as j:
        scratch[j] = j.cast(DType.F32)
    kb.barrier()
    out[0] = scratch[length - 1]
    return kb.build()


def store_variables(dtypes: Sequence[DType]) -> Kernel:
    """``out_k[0] = v_k`` for each of ``dtypes``: ``Variable``s stored as they came.

    Params: an output per dtype (GlobalMut, one element), then a ``Variable`` per dtype in
    the same order. One work-item.
    """
    kb = KernelBuilder("store_variables")
    outs = [kb.param(dtype, ParamKind.GLOBAL_MUT) for dtype in dtypes]
    values = [kb.variable(dtype) for dtype in dtypes]
    kb.local(0, 1)
    for out, value in zip(outs, values):
        out[0] = value
    return kb.build()


def reverse_in_local_memory(length: int, local: int = LOCAL) -> Kernel:
    """``out[k] = x[length - 1 - k]`` through an f32 array of ``length`` in local memory:
    ``local`` work-items of one group each stage every ``local``-th element, wait at a
    barrier, and write every ``local``-th element from the other end.

    Params: ``x`` (Global f32), ``out`` (GlobalMut f32), each ``length`` elements or more.
    """
    kb = KernelBuilder("reverse_in_local_memory")
    x, out = kb.param(DType.F32), kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    item = kb.local(0, local)
    scratch = kb.define(DType.F32, length, Storage.LOCAL)
    with kb.loop(ceil(length / local)) as j:
        k = j * local + item
        with kb.if_(k < length):
            scratch[k] = x[k]
    kb.barrier()
    with kb.loop(ceil(length / local)) as j:
        k = j * local + item
        with kb.if_(k < length):
            out[k] = scratch[kb.const(length - 1, INDEX) - k]
    return kb.build()


def local_memory_in_scopes(blocks: int, local: int = LOCAL) -> Kernel:
    """Block ``j`` of ``x`` reversed into ``out`` through local memory declared inside the
    loop over blocks, then the first block copied through local memory declared inside an
    ``If``: a ``Define`` in a scope is local memory all the same (OpenCL C declares it only
    at the kernel's top).

    Params: ``x`` (Global f32, ``blocks * local``), ``out`` (GlobalMut f32, ``(blocks + 1)
    * local``). One group of ``local`` work-items.
    """
    kb = KernelBuilder("local_memory_in_scopes")
    x, out = kb.param(DType.F32), kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    item = kb.local(0, local)
    last = kb.const(local - 1, INDEX)
    with kb.loop(blocks) as j:
        tile = kb.define(DType.F32, local, Storage.LOCAL)
        tile[item] = x[j * local + item]
        kb.barrier()
        out[j * local + item] = tile[last - item]
        kb.barrier()
    with kb.if_(item < local):
        again = kb.define(DType.F32, local, Storage.LOCAL)
        again[item] = x[item]
        out[kb.const(blocks * local, INDEX) + item] = again[item]
    return kb.build()


def warp_mma(dtype: DType, warps: int = 2) -> Kernel:
    """``c[w] += a[w] @ b[w]`` for each warp ``w`` of one group by one ``Mma``: params
    ``(a, b, c)``, ``a`` of ``warps`` row-major 16 x 16 matrices of ``dtype`` (f16 or
    bf16), ``b`` of 16 x 8 ones, ``c`` of 16 x 8 in f32, each lane's fragments loaded and
    stored by its documented layout (``zyx.ir.Mma``)."""
    kb = KernelBuilder(f"warp_mma_{dtype}")
    a, b = kb.param(dtype, name="a"), kb.param(dtype, name="b")
    c = kb.param(DType.F32, ParamKind.GLOBAL_MUT, name="c")
    lid = kb.local(0, 32 * warps)
    lane, warp = lid % 32, lid / 32
    g, t = lane / 4, lane % 4
    fa, fb, fc = kb.define(dtype, 8), kb.define(dtype, 4), kb.define(DType.F32, 4)
    for i in range(8):
        fa[i] = a[warp * 256 + (g + i // 2 % 2 * 8) * 16 + t * 2 + i % 2 + i // 4 * 8]
    c_at = [warp * 128 + (g + i // 2 * 8) * 8 + t * 2 + i % 2 for i in range(4)]
    for i in range(4):
        fb[i] = b[warp * 128 + (t * 2 + i % 2 + i // 2 * 8) * 8 + g]
        fc[i] = c[c_at[i]]
    kb.mma(fc, fa, fb)
    for i in range(4):
        c[c_at[i]] = fc[i]
    return kb.build()


def warp_ldmatrix(dtype: DType, count: int = 4, trans: bool = False) -> Kernel:
    """One warp's ``LdMatrix`` of ``count`` 8 x 8 matrices: params ``(x, out)``, ``x`` the
    matrices row-major one after the other (``64 * count`` elements of ``dtype``, f16 or
    bf16), copied into local memory with rows 16 elements apart; ``out[l * 2 * count + i]``
    is element ``i`` that lane ``l`` holds after it (``zyx.ir.LdMatrix``)."""
    kb = KernelBuilder(f"warp_ldmatrix_{dtype}_x{count}{'_trans' if trans else ''}")
    x = kb.param(dtype, name="x")
    out = kb.param(dtype, ParamKind.GLOBAL_MUT, name="out")
    lane = kb.local(0, 32)
    tile = kb.define(dtype, 128 * count, Storage.LOCAL)
    for q in range(2 * count):  # 32 lanes copy 64 * count elements
        element = lane + q * 32
        tile[element / 8 * 16 + element % 8] = x[element]
    kb.barrier()
    held = kb.define(dtype, 2 * count)
    kb.ldmatrix(held, tile, lane % (8 * count) * 16, count, trans)
    for i in range(2 * count):
        out[lane * (2 * count) + i] = held[i]
    return kb.build()


COPY_ITEMS = 32
"""Work-items of ``staged_copies``' group."""


def staged_copies(
    dtype: DType, count: int, tiles: int, stages: int, pending: int | None = None
) -> Kernel:
    """``out = x`` with x's elements reversed in each tile of ``COPY_ITEMS * count``
    (``staged_copies_expected``), through ``stages`` tiles in local memory filled by
    ``CopyAsync`` ``stages - 1`` tiles ahead, as a matmul's pipeline fills them: each
    work-item copies ``count`` elements of a tile and stores elements another copied (after
    the wait and a barrier). ``pending`` overrides the wait's count (a wrong one reads a
    stage before its copies completed). Past the last tile the copies are of zeros (their
    condition false), as a matmul's past k."""
    kb = KernelBuilder(f"staged_{dtype}_{count}_{tiles}_{stages}")
    x = kb.param(dtype, name="x")
    out = kb.param(dtype, ParamKind.GLOBAL_MUT, name="out")
    lid = kb.local(0, COPY_ITEMS)
    width = COPY_ITEMS * count
    tile = kb.define(dtype, stages * width, Storage.LOCAL)

    def issue(t: Value | int) -> None:
        step = kb.value(t, INDEX)
        start = kb.minimum(step, tiles - 1) * width + lid * count
        kb.copy_async(tile, step % stages * width + lid * count, x, start, count, step < tiles)
        kb.commit_copies()

    for ahead in range(stages - 1):
        issue(ahead)
    with kb.loop(tiles) as t:
        kb.wait_copies(stages - 2 if pending is None else pending)
        kb.barrier()
        issue(t + (stages - 1))
        for j in range(count):
            mine = lid * count + j
            out[t * width + mine] = tile[t % stages * width + (width - 1 - mine)]
    kb.wait_copies(0)
    return kb.build()


def staged_copies_expected(x: Array, count: int) -> Array:
    """What ``staged_copies`` stores of ``x``."""
    reversed_: Array = x.reshape(-1, COPY_ITEMS * count)[:, ::-1].ravel()
    return reversed_
