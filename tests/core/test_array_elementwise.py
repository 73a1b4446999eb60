"""Elementwise functions against numpy in float64: every function on every dtype of its
kind that the device claims, through non-contiguous views and broadcasting, with size-0
and size-1 dims; the standard's special cases (NaN, infinities, signed zeros) where the
device computes them; Python scalars; and the errors the standard defines, raised at the
op."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from array_support import (
    ARITHMETIC,
    FLOATS,
    INTEGERS,
    MATH,
    MATH_PACK,
    NUMERIC,
    Expect,
    claimed,
    data,
    on,
    reference,
    require_special_values,
    strided,
)

import zyx
from zyx.backend import Device
from zyx.dtypes import DType
from zyx.graph.nodes import Op
from zyx.ir.ops import BOp, UOp
from zyx.testing.kernels import ulp_budget

SHAPE = (3, 1, 5)
"""The shape most tests use: a size-1 dim among others (sizes of 1 are structural)."""


def ulps(op: UOp | BOp | None, dtype: DType) -> float | None:
    return None if op is None else ulp_budget(op, dtype)


# ---- unary functions of floats: name -> numpy's function, input domain, IR op ---------------

FLOAT_UNARY: dict[str, tuple[Callable[[Any], Any], float, float, UOp | None]] = {
    "acos": (np.arccos, -0.95, 0.95, UOp.ACOS),
    "acosh": (np.arccosh, 1.05, 4.0, UOp.ACOSH),
    "asin": (np.arcsin, -0.95, 0.95, UOp.ASIN),
    "asinh": (np.arcsinh, -4.0, 4.0, UOp.ASINH),
    "atan": (np.arctan, -4.0, 4.0, UOp.ATAN),
    "atanh": (np.arctanh, -0.95, 0.95, UOp.ATANH),
    "cos": (np.cos, -4.0, 4.0, UOp.COS),
    "cosh": (np.cosh, -4.0, 4.0, UOp.COSH),
    "exp": (np.exp, -4.0, 4.0, UOp.EXP),
    "expm1": (np.expm1, -4.0, 4.0, UOp.EXPM1),
    "log": (np.log, 0.05, 4.0, UOp.LN),
    "log1p": (np.log1p, -0.9, 4.0, UOp.LOG1P),
    "log2": (np.log2, 0.05, 4.0, UOp.LOG2),
    "log10": (np.log10, 0.05, 4.0, UOp.LOG10),
    "sin": (np.sin, -4.0, 4.0, UOp.SIN),
    "sinh": (np.sinh, -4.0, 4.0, UOp.SINH),
    "sqrt": (np.sqrt, 0.05, 4.0, UOp.SQRT),
    "tan": (np.tan, -1.4, 1.4, UOp.TAN),
    "tanh": (np.tanh, -4.0, 4.0, UOp.TANH),
    "reciprocal": (np.reciprocal, -4.0, 4.0, UOp.RECIPROCAL),
}


@pytest.mark.parametrize("name", sorted(FLOAT_UNARY))
def test_float_functions_match_numpy_on_every_float_dtype(array_device: Device, name: str) -> None:
    function, low, high, op = FLOAT_UNARY[name]
    rng = np.random.default_rng(len(name))
    with Expect(array_device, per_kernel=MATH_PACK) as expect:
        for dtype in claimed(array_device, FLOATS, MATH):
            x = data(rng, SHAPE, dtype, low, high)
            got = getattr(zyx, name)(strided(array_device, x))
            expect(
                got, function(reference(x)), dtype, f"{name} {dtype.value}", ulps=ulps(op, dtype)
            )


# ---- unary functions of numbers: name -> numpy's function, IR op; integers exact -----------

NUMERIC_UNARY: dict[str, tuple[Callable[[Any], Any], UOp | BOp | None]] = {
    "abs": (np.abs, UOp.ABS),
    "negative": (np.negative, UOp.NEG),
    "positive": (np.positive, None),
    "square": (np.square, BOp.MUL),
    "sign": (np.sign, None),
    "ceil": (np.ceil, UOp.CEIL),
    "floor": (np.floor, UOp.FLOOR),
    "trunc": (np.trunc, UOp.TRUNC),
    "round": (np.round, UOp.RINT),  # ties to even; integers stay integers
}
PREDICATES = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite}


def _numbers(rng: np.random.Generator, dtype: DType) -> Any:
    """Random numbers of ``dtype``; the signed integers without their minimum (its ``abs``
    and negation are implementation-defined)."""
    low = dtype.int_range[0] + 1 if dtype.is_int and dtype.is_signed else None
    return data(rng, SHAPE, dtype, low)


@pytest.mark.parametrize("name", sorted(NUMERIC_UNARY))
def test_numeric_functions_match_numpy_on_every_numeric_dtype(
    array_device: Device, name: str
) -> None:
    function, op = NUMERIC_UNARY[name]
    rng = np.random.default_rng(len(name))
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, NUMERIC, ARITHMETIC):
            x = _numbers(rng, dtype)
            got = getattr(zyx, name)(strided(array_device, x))
            with np.errstate(over="ignore"):
                want = function(reference(x))
            expect(got, want, dtype, f"{name} {dtype.value}", ulps=ulps(op, dtype))


def test_rounding_functions_keep_halves_to_even_and_integers_as_they_are(
    array_device: Device,
) -> None:
    halves = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -3.7, 3.2], np.float32)
    with Expect(array_device) as expect:
        expect(zyx.round(on(array_device, halves)), np.rint(halves), DType.F32, "round")
        expect(zyx.ceil(on(array_device, halves)), np.ceil(halves), DType.F32, "ceil")
        big = np.array([2**40 + 1, -(2**40) - 3], np.int64)  # a float would round these
        for name in ("round", "ceil", "floor", "trunc"):
            expect(getattr(zyx, name)(on(array_device, big)), big, DType.I64, name)


@pytest.mark.parametrize("name", sorted(PREDICATES))
def test_predicates_are_bool_on_every_numeric_dtype(array_device: Device, name: str) -> None:
    rng = np.random.default_rng(3)
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, NUMERIC, ARITHMETIC):
            x = data(rng, SHAPE, dtype)
            got = getattr(zyx, name)(strided(array_device, x))
            expect(got, PREDICATES[name](reference(x)), DType.BOOL, f"{name} {dtype.value}")


def test_signbit_is_the_sign_of_every_float(array_device: Device) -> None:
    rng = np.random.default_rng(4)
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, FLOATS, ARITHMETIC):
            x = data(rng, SHAPE, dtype)
            got = zyx.signbit(strided(array_device, x))
            expect(got, np.signbit(reference(x)), DType.BOOL, f"signbit {dtype.value}")


def test_logical_not_and_bitwise_invert(array_device: Device) -> None:
    rng = np.random.default_rng(5)
    flags = data(rng, SHAPE, DType.BOOL)
    with Expect(array_device) as expect:
        expect(zyx.logical_not(strided(array_device, flags)), ~flags, DType.BOOL, "logical_not")
        expect(zyx.bitwise_invert(on(array_device, flags)), ~flags, DType.BOOL, "invert bool")
        for dtype in claimed(array_device, INTEGERS, ARITHMETIC):
            x = data(rng, SHAPE, dtype)
            got = zyx.bitwise_invert(strided(array_device, x))
            expect(got, np.invert(x), dtype, f"bitwise_invert {dtype.value}")


def test_real_and_conj_are_the_identity_on_real_arrays_and_imag_is_refused(
    array_device: Device,
) -> None:
    x = np.array([1.5, -2.0], np.float32)
    with Expect(array_device) as expect:
        expect(zyx.real(on(array_device, x)), x, DType.F32, "real")
        expect(zyx.conj(on(array_device, x)), x, DType.F32, "conj")
    with pytest.raises(TypeError, match="complex"):
        zyx.imag(on(array_device, x))


# ---- binary functions: name -> numpy's function, dtypes, input domains, IR op --------------


class Binary:
    """How to test one binary function: its numpy counterpart, the dtypes it takes, and
    the domain of its operands (``None``: the dtype's default)."""

    def __init__(
        self,
        numpy: Callable[[Any, Any], Any],
        dtypes: tuple[DType, ...],
        op: BOp | None = None,
        first: tuple[float | None, float | None] = (None, None),
        second: tuple[float | None, float | None] = (None, None),
        native: bool = False,
        approx: float = 0.5,
    ) -> None:
        self.numpy, self.dtypes, self.op = numpy, dtypes, op
        self.first, self.second = first, second
        self.native = native
        """Compute the reference in the operands' own dtype (``nextafter``)."""
        self.approx = approx
        """Ulps a result may be off where ``op`` says nothing (a composition of ops)."""

    def ulps(self, dtype: DType) -> float:
        return ulps(self.op, dtype) or self.approx

    def domain(self, dtype: DType, which: tuple[float | None, float | None]) -> tuple[Any, Any]:
        low, high = which
        if not dtype.is_float:
            lo, hi = dtype.int_range
            low = lo + 1 if low is None else max(lo, int(low))  # MIN // -1 overflows
            high = hi if high is None else min(hi, int(high))
        return low, high


def _nextafter(x1: Any, x2: Any) -> Any:
    """numpy's ``nextafter``, but ``x2`` where the operands are equal (the standard and C:
    +0 towards -0 is -0; numpy's float16 keeps ``x1``)."""
    return np.where(x1 == x2, x2, np.nextafter(x1, x2))


BOOL_AND_INTEGERS = (DType.BOOL, *INTEGERS)
EVERY = (DType.BOOL, *NUMERIC)
SMALL = (-100.0, 100.0)
BINARY: dict[str, Binary] = {
    "add": Binary(np.add, NUMERIC, BOp.ADD),
    "subtract": Binary(np.subtract, NUMERIC, BOp.SUB),
    "multiply": Binary(np.multiply, NUMERIC, BOp.MUL),
    "divide": Binary(np.divide, FLOATS, BOp.DIV),
    "floor_divide": Binary(np.floor_divide, NUMERIC),
    "remainder": Binary(np.remainder, NUMERIC),
    "pow": Binary(np.power, NUMERIC, BOp.POW, first=(0.5, 4.0), second=(-3.0, 3.0)),
    "maximum": Binary(np.maximum, NUMERIC, BOp.MAX),
    "minimum": Binary(np.minimum, NUMERIC, BOp.MIN),
    "atan2": Binary(np.arctan2, FLOATS, BOp.ATAN2),
    "hypot": Binary(np.hypot, FLOATS, BOp.HYPOT),
    "copysign": Binary(np.copysign, FLOATS, BOp.COPYSIGN),
    "nextafter": Binary(_nextafter, FLOATS, BOp.NEXTAFTER, native=True),
    "logaddexp": Binary(np.logaddexp, FLOATS, approx=8.0),  # exp, log1p, add
    "equal": Binary(np.equal, EVERY),
    "not_equal": Binary(np.not_equal, EVERY),
    "less": Binary(np.less, NUMERIC),
    "less_equal": Binary(np.less_equal, NUMERIC),
    "greater": Binary(np.greater, NUMERIC),
    "greater_equal": Binary(np.greater_equal, NUMERIC),
    "logical_and": Binary(np.logical_and, (DType.BOOL,)),
    "logical_or": Binary(np.logical_or, (DType.BOOL,)),
    "logical_xor": Binary(np.logical_xor, (DType.BOOL,)),
    "bitwise_and": Binary(np.bitwise_and, BOOL_AND_INTEGERS),
    "bitwise_or": Binary(np.bitwise_or, BOOL_AND_INTEGERS),
    "bitwise_xor": Binary(np.bitwise_xor, BOOL_AND_INTEGERS),
    "bitwise_left_shift": Binary(np.left_shift, INTEGERS, second=(0.0, 7.0)),
    "bitwise_right_shift": Binary(np.right_shift, INTEGERS, second=(0.0, 7.0)),
}
COMPARISONS = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}


def _exponents(dtype: DType, case: Binary) -> tuple[Any, Any]:
    """Integer ``pow``: exponents 0 to 5 (a negative one is unspecified); shifts: counts
    below the bit width."""
    if case.numpy is np.power and not dtype.is_float:
        return 0, 5
    if case.second == (0.0, 7.0):
        return 0, 8 * dtype.itemsize - 1
    return case.domain(dtype, case.second)


def _expected_dtype(name: str, dtype: DType) -> DType:
    return DType.BOOL if name in COMPARISONS else dtype


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_functions_match_numpy_broadcast_and_strided(
    array_device: Device, name: str
) -> None:
    case = BINARY[name]
    rng = np.random.default_rng(len(name) + 7)
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, case.dtypes, ARITHMETIC):
            low, high = case.domain(dtype, case.first)
            x1 = data(rng, SHAPE, dtype, low, high)
            x2 = data(rng, (4, 1), dtype, *_exponents(dtype, case))
            got = getattr(zyx, name)(strided(array_device, x1), on(array_device, x2))
            ref = (x1, x2) if case.native or not dtype.is_float else (reference(x1), reference(x2))
            with np.errstate(all="ignore"):
                want = case.numpy(*ref)
            out = _expected_dtype(name, dtype)
            budget = ulps(case.op, out) if out.is_float else None
            expect(got, want, out, f"{name} {dtype.value}", ulps=budget)


def test_size_zero_dims_broadcast_to_empty_results(array_device: Device) -> None:
    empty = on(array_device, np.zeros((0, 3), np.float32))
    row = on(array_device, np.ones((1, 3), np.float32))
    assert zyx.add(empty, row).shape == (0, 3)
    assert zyx.multiply(on(array_device, np.ones((2, 1, 3), np.float32)), empty).shape == (2, 0, 3)
    assert zyx.exp(empty).numpy().shape == (0, 3)
    assert zyx.less(empty, row).numpy().dtype == np.bool_


def test_one_element_dims_broadcast_against_each_other(array_device: Device) -> None:
    rng = np.random.default_rng(8)
    a, b = data(rng, (1, 4, 1), DType.F32), data(rng, (3, 1, 1), DType.F32)
    c = data(rng, (1,), DType.F32)
    with Expect(array_device) as expect:
        expect(
            zyx.add(on(array_device, a), on(array_device, b)), reference(a) + b, DType.F32, "a + b"
        )
        expect(
            zyx.multiply(on(array_device, a), on(array_device, c)),
            reference(a) * c,
            DType.F32,
            "a * c",
        )
        one = on(array_device, np.float32(2.5))
        expect(zyx.subtract(one, on(array_device, a)), 2.5 - reference(a), DType.F32, "0-D - a")


# ---- Python scalars ------------------------------------------------------------------------


def _with_scalar(x: Any, scalar: Any, op: Callable[[Any, Any], Any]) -> Any:
    """numpy's ``op(x, scalar)`` in float64 for floats, in ``x``'s dtype for integers."""
    if x.dtype.kind == "f" or x.dtype.name == "bfloat16":
        return op(reference(x), scalar)
    with np.errstate(over="ignore"):
        return op(x, np.asarray(scalar, x.dtype))


def test_python_scalars_take_the_arrays_dtype_on_either_side(array_device: Device) -> None:
    rng = np.random.default_rng(9)
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, NUMERIC, ARITHMETIC):
            x = data(rng, (2, 3), dtype)
            t, scalar = on(array_device, x), (1.5 if dtype.is_float else 3)
            what = f"{dtype.value} and {scalar!r}"
            expect(zyx.add(t, scalar), _with_scalar(x, scalar, np.add), dtype, f"{what}: x + s")
            expect(
                zyx.subtract(scalar, t), _with_scalar(x, scalar, lambda a, s: s - a), dtype,
                f"{what}: s - x",
            )  # fmt: skip
            expect(zyx.less(t, scalar), _with_scalar(x, scalar, np.less), DType.BOOL, f"{what}: <")
        for dtype in claimed(array_device, FLOATS, ARITHMETIC):  # an int with a float array
            f = data(rng, (4,), dtype)
            want = np.maximum(2, reference(f))
            expect(zyx.maximum(2, on(array_device, f)), want, dtype, f"max(2, {dtype.value})")
        flags = data(rng, (4,), DType.BOOL)
        expect(zyx.logical_and(on(array_device, flags), True), flags, DType.BOOL, "bool & True")


def test_zero_is_a_constant_and_its_sign_is_kept(array_device: Device) -> None:
    """A Python 0 is part of the graph (maximum(x, 0) needs no NaN guard for it, relu as
    claims see it); -0.0 is not, or x + -0.0 (x itself) would reuse x + 0.0's plan,
    which turns -0.0 into 0.0. Other numbers are kernel arguments: one plan for all."""
    x = on(array_device, np.array([-0.0, 1.5, math.nan, -2.0], np.float32))
    # A finite-math build (OpenCL's) leaves the sign of zero and NaN undefined.
    defined = [1, 3] if array_device.info.finite_math else [0, 1, 2, 3]
    if not array_device.info.finite_math:
        assert np.signbit((x + 0.0).numpy()[0]) == False  # noqa: E712
        assert np.signbit((x + -0.0).numpy()[0]) == True  # noqa: E712
    for got, want in [
        (zyx.maximum(x, 0.0), [0.0, 1.5, math.nan, 0.0]),
        (zyx.maximum(0, x), [0.0, 1.5, math.nan, 0.0]),
        (zyx.minimum(x, 0.0), [-0.0, 0.0, math.nan, -2.0]),
    ]:
        np.testing.assert_array_equal(got.numpy()[defined], np.array(want)[defined])
    guard = zyx.maximum(x, 0.0).node
    assert guard.op is Op.WHERE and guard.srcs[2].op is Op.BINARY  # one guard: x's
    before = zyx.stats()
    for s in (0.25, 3.0, -1.0):
        (x * s).numpy()
    ran = zyx.stats() - before
    assert ran.plans_built <= 1 and ran.plans_reused >= 2, ran


@pytest.mark.parametrize(
    ("name", "x", "scalar", "error"),
    [
        ("add", np.array([1, 2], np.int32), 1.5, "Python float does not mix with a int32"),
        ("logical_and", np.array([True]), 1, "Python int does not mix with a bool"),
        ("add", np.array([1.0], np.float32), True, "Python bool does not mix with a float32"),
    ],
)
def test_a_python_scalar_of_another_kind_is_a_type_error(
    array_device: Device, name: str, x: Any, scalar: Any, error: str
) -> None:
    with pytest.raises(TypeError, match=error):
        getattr(zyx, name)(on(array_device, x), scalar)


def test_a_python_int_out_of_the_dtypes_range_is_an_overflow_error(array_device: Device) -> None:
    with pytest.raises(OverflowError, match=r"300 is out of uint8's range \[0, 255\]"):
        zyx.add(on(array_device, np.array([1], np.uint8)), 300)


# ---- special values --------------------------------------------------------------------------


def special_values(dtype: DType) -> np.ndarray[Any, Any]:
    """NaN, the infinities, both zeros, the largest and smallest normal numbers, and
    numbers around the integers and halves that the special cases single out."""
    info = zyx.finfo(dtype)
    values = [
        math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.5, 3.0,
        0.75, -1.25, info.max, -info.max, info.smallest_normal, -info.smallest_normal,
    ]  # fmt: skip
    return dtype.round_array(np.array(values))


SPECIAL_UNARY = {
    **{name: (f, op) for name, (f, _, _, op) in FLOAT_UNARY.items()},
    **{name: (f, op) for name, (f, op) in NUMERIC_UNARY.items()},
}


@pytest.mark.parametrize("name", sorted(SPECIAL_UNARY))
def test_unary_special_cases(array_device: Device, name: str) -> None:
    require_special_values(array_device)
    function, op = SPECIAL_UNARY[name]
    with Expect(array_device, per_kernel=MATH_PACK) as expect:
        for dtype in claimed(array_device, FLOATS, MATH):
            x = special_values(dtype)
            with np.errstate(all="ignore"):
                want = function(reference(x))
            expect(
                getattr(zyx, name)(on(array_device, x)), want, dtype, f"{name} {dtype.value}",
                ulps=ulps(op, dtype) or 0.5, ieee=True, signed_zeros=name != "sign",
            )  # fmt: skip


def _preferred_floor_divide(x1: Any, x2: Any, python: Any) -> Any:
    """``python`` (numpy's ``floor_divide``, which follows Python) with, where the standard
    also allows it (one operand infinite, the other finite), ``floor(x1 / x2)``, which it
    prefers: an infinity for an infinite dividend, -0 for -1 over an infinite divisor."""
    one_infinite = np.isinf(x1) != np.isinf(x2)
    finite_other = np.isfinite(x1) | np.isfinite(x2)
    with np.errstate(all="ignore"):
        return np.where(one_infinite & finite_other, np.floor(np.divide(x1, x2)), python)


@pytest.mark.parametrize(
    "name", sorted(n for n, c in BINARY.items() if c.dtypes in (FLOATS, NUMERIC, EVERY))
)
def test_binary_special_cases(array_device: Device, name: str) -> None:
    require_special_values(array_device)
    case = BINARY[name]
    with Expect(array_device, per_kernel=MATH_PACK) as expect:
        for dtype in claimed(array_device, FLOATS, MATH):
            values = special_values(dtype)
            x1, x2 = values[:, None], values[None, :]
            ref = (x1, x2) if case.native else (reference(x1), reference(x2))
            with np.errstate(all="ignore"):
                want = case.numpy(*ref)
            out = _expected_dtype(name, dtype)
            allowed = _preferred_floor_divide(*ref, want) if name == "floor_divide" else None
            got = getattr(zyx, name)(on(array_device, x1), on(array_device, x2))
            zeros_signed = name not in ("maximum", "minimum")  # the standard leaves them
            if out.is_float:
                expect(
                    got, want, out, f"{name} {dtype.value}", ulps=case.ulps(out), ieee=True,
                    signed_zeros=zeros_signed, or_else=allowed,
                )  # fmt: skip
            else:
                expect(got, want, out, f"{name} {dtype.value}")


# ---- clip ---------------------------------------------------------------------------------


def test_clip_limits_to_scalar_and_array_bounds_in_xs_dtype(array_device: Device) -> None:
    rng = np.random.default_rng(10)
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, NUMERIC, ARITHMETIC):
            x = data(
                rng, SHAPE, dtype, *((-50, 50) if dtype.is_signed or dtype.is_float else (1, 100))
            )
            low = data(
                rng, (1, 5), dtype, *((-20, 0) if dtype.is_signed or dtype.is_float else (1, 30))
            )
            t = strided(array_device, x)
            top = 10 if not dtype.is_float else 10.0
            expect(
                zyx.clip(t, on(array_device, low), top),
                np.clip(x, low, top),
                dtype,
                f"clip {dtype.value}",
            )
            expect(
                zyx.clip(t, max=top),
                np.minimum(x, top).astype(x.dtype),
                dtype,
                f"clip max {dtype.value}",
            )
            expect(zyx.clip(t), x, dtype, f"clip none {dtype.value}")


def test_clip_refuses_bounds_that_would_change_xs_shape(array_device: Device) -> None:
    x = on(array_device, np.ones((3,), np.float32))
    with pytest.raises(ValueError, match=r"broadcast x of shape \(3,\)"):
        zyx.clip(x, on(array_device, np.zeros((2, 3), np.float32)))


# ---- errors, raised at the op --------------------------------------------------------------


def test_shapes_that_do_not_broadcast_name_both_shapes(array_device: Device) -> None:
    a = on(array_device, np.ones((2, 3), np.float32))
    b = on(array_device, np.ones((4,), np.float32))
    with pytest.raises(ValueError, match=r"add: shapes \(2, 3\) and \(4,\) do not broadcast"):
        zyx.add(a, b)


def test_integer_and_float_arrays_do_not_mix(array_device: Device) -> None:
    a = on(array_device, np.ones(3, np.int32))
    b = on(array_device, np.ones(3, np.float32))
    with pytest.raises(TypeError, match="multiply: int32 and float32 do not promote"):
        zyx.multiply(a, b)


@pytest.mark.parametrize(
    ("name", "dtype", "message"),
    [
        ("sin", np.int32, "sin takes floating-point arrays, got int32"),
        ("divide", np.int64, "divide takes floating-point arrays, got int64"),
        ("add", np.bool_, "add takes integer or floating-point arrays, got bool"),
        ("bitwise_and", np.float32, "bitwise_and takes integer or boolean arrays, got float32"),
        ("logical_or", np.int8, "logical_or takes boolean arrays, got int8"),
        ("less", np.bool_, "less takes integer or floating-point arrays, got bool"),
    ],
)
def test_a_dtype_outside_the_functions_kinds_is_a_type_error(
    array_device: Device, name: str, dtype: Any, message: str
) -> None:
    x = on(array_device, np.ones(2, dtype))
    function = getattr(zyx, name)
    with pytest.raises(TypeError, match=message):
        function(x) if name == "sin" else function(x, x)


def test_arrays_on_different_devices_do_not_mix_and_the_error_names_both() -> None:
    devices = zyx.devices()
    if len(devices) < 2:
        pytest.skip("one device here: nothing to mix")
    a, b = (on(d, np.ones(2, np.float32)) for d in devices[:2])
    with pytest.raises(ValueError, match=f"{devices[0].name} and {devices[1].name}"):
        zyx.add(a, b)
