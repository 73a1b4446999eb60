"""The IR interpreter: C's semantics for each op, masks, loops, local memory and barriers."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import zyx.ir.interpreter as interpreter
from zyx.dtypes import DType
from zyx.errors import IRError
from zyx.ir import BOp, Kernel, KernelBuilder, ParamKind, Storage, UOp, Value, ceil_div
from zyx.ir.interpreter import interpret

F16, BF16 = np.float16, ml_dtypes.bfloat16


def unary_kernel(src: DType, dst: DType, f: Callable[[Value], Value], local: int = 32) -> Kernel:
    """``out[i] = f(x[i])`` for ``i < n``."""
    kb = KernelBuilder("unary")
    x = kb.param(src)
    out = kb.param(dst, ParamKind.GLOBAL_MUT)
    n = kb.variable()
    i = kb.group(0, ceil_div(n, local)) * local + kb.local(0, local)
    with kb.if_(i < n):
        out[i] = f(x[i])
    return kb.build()


def binary_kernel(src: DType, dst: DType, f: Callable[[Value, Value], Value]) -> Kernel:
    """``out[i] = f(a[i], b[i])`` for ``i < n``."""
    kb = KernelBuilder("binary")
    a, b = kb.param(src), kb.param(src)
    out = kb.param(dst, ParamKind.GLOBAL_MUT)
    n = kb.variable()
    i = kb.group(0, ceil_div(n, 32)) * 32 + kb.local(0, 32)
    with kb.if_(i < n):
        out[i] = f(a[i], b[i])
    return kb.build()


def apply1(kernel: Kernel, x: np.ndarray[Any, Any], dtype: Any, **kw: Any) -> np.ndarray[Any, Any]:
    out = np.zeros(len(x), dtype)
    interpret(kernel, [x, out, len(x)], **kw)
    return out


def apply2(kernel: Kernel, a: Any, b: Any, dtype: Any) -> np.ndarray[Any, Any]:
    a, b = np.asarray(a), np.asarray(b)
    out = np.zeros(len(a), dtype)
    interpret(kernel, [a, b, out, len(a)])
    return out


def test_integer_division_truncates_toward_zero_and_mod_takes_the_dividends_sign() -> None:
    a = np.array([7, -7, 7, -7, 5, 0, -(2**31), 9], np.int32)
    b = np.array([2, 2, -2, -2, 0, 3, -1, -4], np.int32)
    div = apply2(binary_kernel(DType.I32, DType.I32, lambda x, y: x / y), a, b, np.int32)
    mod = apply2(binary_kernel(DType.I32, DType.I32, lambda x, y: x % y), a, b, np.int32)
    # C: 7 / -2 == -3, -7 % 2 == -1; a zero divisor gives 0; INT_MIN / -1 wraps.
    assert div.tolist() == [3, -3, -3, 3, 0, 0, -(2**31), -2]
    assert mod.tolist() == [1, -1, 1, -1, 0, 0, 0, 1]


def test_unsigned_division_and_float_mod() -> None:
    a, b = np.array([7, 200, 5], np.uint8), np.array([2, 3, 0], np.uint8)
    assert apply2(
        binary_kernel(DType.U8, DType.U8, lambda x, y: x / y), a, b, np.uint8
    ).tolist() == [3, 66, 0]
    fa, fb = np.array([5.5, -5.5], np.float32), np.array([2.0, 2.0], np.float32)
    fmod = apply2(binary_kernel(DType.F32, DType.F32, lambda x, y: x % y), fa, fb, np.float32)
    assert fmod.tolist() == [1.5, -1.5]


def test_float_to_int_casts_truncate_and_narrowing_wraps() -> None:
    x = np.array([2.9, -2.9, 0.5, -0.5], np.float32)
    assert apply1(
        unary_kernel(DType.F32, DType.I32, lambda v: v.cast(DType.I32)), x, np.int32
    ).tolist() == [2, -2, 0, 0]
    wide = np.array([300, -1, 255], np.int32)
    narrow = apply1(unary_kernel(DType.I32, DType.U8, lambda v: v.cast(DType.U8)), wide, np.uint8)
    assert narrow.tolist() == [44, 255, 255]


def test_casts_to_and_from_bool() -> None:
    x = np.array([0.0, -0.0, 0.25, np.nan], np.float32)
    to_bool = apply1(unary_kernel(DType.F32, DType.BOOL, lambda v: v.cast(DType.BOOL)), x, np.bool_)
    assert to_bool.tolist() == [False, False, True, True]  # NaN != 0 in C
    flags = np.array([True, False], np.bool_)
    as_float = apply1(
        unary_kernel(DType.BOOL, DType.F32, lambda v: v.cast(DType.F32)), flags, np.float32
    )
    assert as_float.tolist() == [1.0, 0.0]


def test_shifts_and_wrapping_arithmetic() -> None:
    a = np.array([-16, 2**30, 1], np.int32)
    b = np.array([2, 1, 31], np.int32)
    shr = apply2(binary_kernel(DType.I32, DType.I32, lambda x, y: x >> y), a, b, np.int32)
    shl = apply2(binary_kernel(DType.I32, DType.I32, lambda x, y: x << y), a, b, np.int32)
    add = apply2(binary_kernel(DType.I32, DType.I32, lambda x, y: x + x), a, b, np.int32)
    assert shr.tolist() == [-4, 2**29, 0]  # arithmetic shift of negatives
    assert shl.tolist() == [-64, -(2**31), -(2**31)]
    assert add.tolist() == [-32, -(2**31), 2]  # 2^30 + 2^30 wraps


def test_integer_constants_past_their_range_wrap_as_c_converts_them() -> None:
    cases = [(DType.U8, 256, 0), (DType.U8, -1, 255), (DType.I32, 2**32 - 1, -1),
             (DType.I64, 2**64 + 5, 5), (DType.U64, -(2**64) - 1, 2**64 - 1),
             (DType.I8, 2**7, -(2**7))]  # fmt: skip
    assert DType.BOOL.wrap(2) == 1
    for dtype, value, wrapped in cases:
        assert dtype.wrap(value) == wrapped
        kernel = unary_kernel(dtype, dtype, lambda x: x.builder.const(value, dtype))  # noqa: B023
        out = apply1(kernel, np.ones(3, dtype.numpy), dtype.numpy)
        assert out.tolist() == [wrapped] * 3, dtype


def test_bool_ops_are_logical() -> None:
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    assert apply2(
        binary_kernel(DType.BOOL, DType.BOOL, lambda x, y: ~x), a, b, np.bool_
    ).tolist() == [False, False, True, True]
    # C promotes to int: true - true is 0, false - true is -1 (true once stored as bool).
    sub = apply2(binary_kernel(DType.BOOL, DType.BOOL, lambda x, y: x - y), a, b, np.bool_)
    assert sub.tolist() == [False, True, True, False]


def test_max_of_floats_is_fmax() -> None:
    a = np.array([np.nan, 1.0, -3.0], np.float32)
    b = np.array([2.0, np.nan, -4.0], np.float32)
    kernel = binary_kernel(DType.F32, DType.F32, lambda x, y: x.builder.maximum(x, y))
    assert apply2(kernel, a, b, np.float32).tolist() == [2.0, 1.0, -3.0]


def test_min_of_floats_is_fmin_and_of_ints_the_smaller() -> None:
    a = np.array([np.nan, 1.0, -3.0], np.float32)
    b = np.array([2.0, np.nan, -4.0], np.float32)
    kernel = binary_kernel(DType.F32, DType.F32, lambda x, y: x.builder.minimum(x, y))
    assert apply2(kernel, a, b, np.float32).tolist() == [2.0, 1.0, -4.0]
    ints = binary_kernel(DType.I8, DType.I8, lambda x, y: x.builder.minimum(x, y))
    got = apply2(ints, np.array([-128, 5], np.int8), np.array([127, -5], np.int8), np.int8)
    assert got.tolist() == [-128, -5]
    bools = binary_kernel(DType.BOOL, DType.BOOL, lambda x, y: x.builder.minimum(x, y))
    assert apply2(bools, [True, True, False], [True, False, False], np.bool_).tolist() == [
        True,
        False,
        False,
    ]


@pytest.mark.parametrize(
    "op, x, want",
    [
        (UOp.RINT, [0.5, 1.5, 2.5, -0.5, -2.5, 2.4], [0.0, 2.0, 2.0, -0.0, -2.0, 2.0]),
        (UOp.CEIL, [0.5, -0.5, 2.0, -2.1], [1.0, -0.0, 2.0, -2.0]),
        (UOp.EXPM1, [1e-10, -0.0], [math.expm1(1e-10), -0.0]),  # exp(x) - 1 is 1.00000008e-10
        (UOp.LOG1P, [1e-10, -0.0], [math.log1p(1e-10), -0.0]),
        (UOp.LOG10, [1000.0, 0.01], [3.0, -2.0]),
        (UOp.ATANH, [0.0, 1.0], [0.0, np.inf]),
        (UOp.ACOSH, [1.0, 0.5], [0.0, np.nan]),
    ],
    ids=lambda x: getattr(x, "value", ""),
)
def test_new_unary_functions_are_cs(op: UOp, x: list[float], want: list[float]) -> None:
    kernel = unary_kernel(DType.F64, DType.F64, lambda v: v.builder.unary(op, v))
    got = apply1(kernel, np.array(x), np.float64)
    np.testing.assert_array_equal(got, want)
    numbers = ~np.isnan(want)
    assert np.signbit(got[numbers]).tolist() == np.signbit(np.array(want)[numbers]).tolist()


@pytest.mark.parametrize(
    "op, a, b, want",
    [
        (BOp.ATAN2, [0.0, -0.0, 1.0], [-1.0, -1.0, 0.0], [np.pi, -np.pi, np.pi / 2]),
        (BOp.HYPOT, [3.0, np.inf], [4.0, np.nan], [5.0, np.inf]),
        (BOp.COPYSIGN, [1.0, -2.0, np.inf], [-0.0, 3.0, -1.0], [-1.0, 2.0, -np.inf]),
    ],
    ids=lambda x: getattr(x, "value", ""),
)
def test_new_binary_functions_are_cs(
    op: BOp, a: list[float], b: list[float], want: list[float]
) -> None:
    kernel = binary_kernel(DType.F64, DType.F64, lambda x, y: x.builder.binary(op, x, y))
    np.testing.assert_array_equal(apply2(kernel, a, b, np.float64), want)


@pytest.mark.parametrize("dtype", [DType.F16, DType.BF16, DType.F32, DType.F64], ids=str)
def test_nextafter_steps_in_the_operands_own_dtype(dtype: DType) -> None:
    """f16 and bf16 compute in float32, and the reference in float64: the step is still
    one of the dtype's own ulps, also with ``compute=float64``."""
    t = dtype.numpy
    info = ml_dtypes.finfo(t)
    top, least, one = float(info.max), float(info.smallest_subnormal), 1.0
    a = np.array([0.0, 0.0, least, -least, one, one, top, top, np.inf, np.nan, 2.0], t)
    b = np.array([1.0, -1.0, 0.0, 1.0, 2.0, 0.0, np.inf, 0.0, 0.0, 1.0, 2.0], t)
    with np.errstate(over="ignore"):  # the largest finite toward inf: meant
        want = np.nextafter(a, b)
    assert want[0] == least and want[4] == 1 + float(info.eps)  # numpy steps in t itself
    kernel = binary_kernel(dtype, dtype, lambda x, y: x.builder.binary(BOp.NEXTAFTER, x, y))
    native = apply2(kernel, a, b, t)
    np.testing.assert_array_equal(native, want)
    assert np.signbit(native.astype(np.float64)[3])  # -least toward 1 is -0
    wide = np.zeros(len(a))
    args = [a.astype(np.float64), b.astype(np.float64), wide, len(a)]
    interpret(kernel, args, compute=np.float64)
    np.testing.assert_array_equal(wide, want.astype(np.float64))


def test_where_selects_per_item_and_broadcasts_uniform_values() -> None:
    kb = KernelBuilder("where")
    x, out = kb.param(DType.F32), kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    i = kb.local(0, 4)
    v = x[i]
    out[i] = kb.where(v < 0, 0.0, v) + kb.where(kb.const(True, DType.BOOL), 10.0, v)
    got = np.zeros(4, np.float32)
    interpret(kb.build(), [np.array([-1, 2, np.nan, -0.5], np.float32), got])
    np.testing.assert_array_equal(got, [10.0, 12.0, np.nan, 10.0])


def _rounded(x: Fraction, dtype: Any) -> Any:
    """The exact ``x`` rounded to the nearest value of ``dtype``, ties to even (no overflow)."""
    if x == 0:
        return dtype(0.0)
    info = np.finfo(dtype)
    e = x.numerator.bit_length() - x.denominator.bit_length()  # 2**(e - 1) < |x| < 2**(e + 1)
    e -= 1 if abs(x) < Fraction(2) ** e else 0
    step = Fraction(2) ** (max(e, info.minexp) - info.nmant)
    return dtype(float(round(x / step) * step))  # round(): ties to even


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_fma_rounds_once(dtype: Any) -> None:
    """``a * b + c`` as exact rationals rounded once: where the addend nearly cancels the
    product; where the product rounds to a tie and then the wrong way, ``(1 + h)^2 - 1``;
    and f64 past the range of its fast exact path (``zyx.ir.fma``)."""
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal(64).astype(dtype), rng.standard_normal(64).astype(dtype)
    c = (-(a * b) * (1 + rng.choice([-1, 1], 64) * 2.0 ** -rng.integers(1, 60, 64))).astype(dtype)
    h = 2.0 ** -(np.finfo(dtype).nmant // 2 + 1)
    huge = 2.0 ** (1000 if dtype is np.float64 else 100)
    hard = [(1 + h, 1 + h, -1.0), (huge, 1.5, -huge), (2.0**-60, 2.0**-70, 2.0**-148)]
    a, b, c = (np.concatenate([x, np.array(h, dtype)]) for x, h in zip((a, b, c), zip(*hard)))
    kb = KernelBuilder("fma")
    x, y, z = (kb.param(DType.F32 if dtype is np.float32 else DType.F64) for _ in range(3))
    out = kb.param(x.dtype, ParamKind.GLOBAL_MUT)
    i = kb.local(0, len(a))
    out[i] = kb.fma(x[i], y[i], z[i])
    got = np.zeros(len(a), dtype)
    interpret(kb.build(), [a, b, c, got])
    exact = (
        Fraction(float(p)) * Fraction(float(q)) + Fraction(float(r)) for p, q, r in zip(a, b, c)
    )
    np.testing.assert_array_equal(got, np.array([_rounded(e, dtype) for e in exact], dtype))
    assert got[64] != a[64] * b[64] + c[64]  # a multiply and an add round twice


def test_half_precision_rounds_after_every_op_unless_computed_in_float64() -> None:
    x = np.array([1.0, 2048.0], F16)
    kernel = unary_kernel(DType.F16, DType.F16, lambda v: v + 0.0004 + 0.0004)
    # 1 + 0.0004 rounds back to 1 in f16 (half an ulp is 2^-11), so does the second add.
    assert apply1(kernel, x, F16).tolist() == [1.0, 2048.0]
    wide = apply1(kernel, x.astype(np.float64), np.float64, compute=np.float64)
    np.testing.assert_allclose(wide, [1.0008, 2048.0008], rtol=1e-12)
    bf = np.array([1.0], BF16)
    kernel_bf = unary_kernel(DType.BF16, DType.BF16, lambda v: v * 1.00390625)  # 1 + 2^-8
    assert apply1(kernel_bf, bf, BF16).tolist() == [1.0]  # ties to even in bf16 (ulp 2^-7)


def test_a_cast_from_f64_rounds_f16_once_and_bf16_through_float32() -> None:
    """Just past a tie of the half type: rounded once, the value rounds away from the tie;
    through float32 it lands on the tie first and rounds to even (ml_dtypes 0.7 rounds a
    float64 to bf16 once, so the interpreter must go through float32 itself)."""
    x = np.array([1 + 2**-8 + 2**-30, 1 + 2**-11 + 2**-40])
    to_bf16 = unary_kernel(DType.F64, DType.BF16, lambda v: v.cast(DType.BF16))
    to_f16 = unary_kernel(DType.F64, DType.F16, lambda v: v.cast(DType.F16))
    assert apply1(to_bf16, x[:1], BF16).tolist() == [1.0]
    assert apply1(to_f16, x[1:], F16).tolist() == [1 + 2**-10]
    kb = KernelBuilder("bf16_variable")
    out, value = kb.param(DType.BF16, ParamKind.GLOBAL_MUT), kb.variable(DType.BF16)
    kb.local(0, 1)
    out[0] = value
    held = np.zeros(1, BF16)
    interpret(kb.build(), [held, float(x[0])])
    assert held.tolist() == [1.0]


def test_masked_items_neither_load_out_of_bounds_nor_store() -> None:
    kernel = unary_kernel(DType.F32, DType.F32, lambda v: v * 2.0, local=64)
    x = np.arange(1, 101, dtype=np.float32)
    out = np.full(128, np.nan, np.float32)  # longer than n: the tail must stay untouched
    interpret(kernel, [x, out, 100])
    assert np.array_equal(out[:100], x * 2)
    assert np.isnan(out[100:]).all()


def test_an_active_out_of_bounds_load_is_an_error() -> None:
    kernel = unary_kernel(DType.F32, DType.F32, lambda v: v, local=64)
    x = np.ones(10, np.float32)
    with pytest.raises(IRError, match="out of bounds for 10 elements"):
        interpret(kernel, [x, np.zeros(20, np.float32), 20])


def test_loops_with_per_item_trip_counts() -> None:
    """``out[i] = sum of 1..counts[i]``: items loop a different number of times."""
    kb = KernelBuilder("triangle")
    counts = kb.param(DType.I64)
    out = kb.param(DType.I64, ParamKind.GLOBAL_MUT)
    i = kb.local(0, 8)
    acc = kb.define(DType.I64)
    acc[0] = 0
    with kb.loop(counts[i]) as k:
        acc[0] = acc[0] + k + 1
    out[i] = acc[0]
    c = np.array([0, 1, 2, 3, 4, 5, 10, 0], np.int64)
    result = np.zeros(8, np.int64)
    interpret(kb.build(), [c, result])
    assert result.tolist() == [n * (n + 1) // 2 for n in c]


def test_local_memory_with_barriers_reverses_each_group() -> None:
    kb = KernelBuilder("reverse")
    x = kb.param(DType.I32)
    out = kb.param(DType.I32, ParamKind.GLOBAL_MUT)
    g, item = kb.group(0, 3), kb.local(0, 16)
    shared = kb.define(DType.I32, 16, Storage.LOCAL)
    shared[item] = x[g * 16 + item]
    kb.barrier()
    out[g * 16 + item] = shared[15 - item]
    values = np.arange(48, dtype=np.int32)
    result = np.zeros(48, np.int32)
    interpret(kb.build(), [values, result])
    assert result.tolist() == values.reshape(3, 16)[:, ::-1].ravel().tolist()


def test_registers_are_per_item_and_groups_are_chunked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many groups run in several chunks; each item's register holds its own value."""
    monkeypatch.setattr(interpreter, "_CHUNK_ITEMS", 64)
    kb = KernelBuilder("square")
    out = kb.param(DType.I64, ParamKind.GLOBAL_MUT)
    i = kb.group(0, 50) * 16 + kb.local(0, 16)
    reg = kb.define(DType.I64, 2)
    reg[0] = i
    reg[1] = reg[0] * i
    out[i] = reg[1]
    result = np.zeros(800, np.int64)
    interpret(kb.build(), [result])
    assert result.tolist() == [i * i for i in range(800)]


def test_two_and_three_dimensional_ranges() -> None:
    """Each item writes its global (x, y, z) position: axis 0 varies fastest."""
    kb = KernelBuilder("grid")
    out = kb.param(DType.I64, ParamKind.GLOBAL_MUT)
    x = kb.group(0, 3) * 2 + kb.local(0, 2)
    y = kb.group(1, 2) * 4 + kb.local(1, 4)
    z = kb.group(2, 2)
    out[(z * 8 + y) * 6 + x] = z * 100 + y * 10 + x
    result = np.zeros(96, np.int64)
    interpret(kb.build(), [result])
    zz, yy, xx = np.meshgrid(range(2), range(8), range(6), indexing="ij")
    assert result.tolist() == (zz * 100 + yy * 10 + xx).ravel().tolist()


def test_arguments_are_checked() -> None:
    kernel = unary_kernel(DType.F32, DType.F32, lambda v: v)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        interpret(kernel, [np.ones(4, np.float32)])
    with pytest.raises(TypeError, match="argument 1 must be a 1-D float32 array"):
        interpret(kernel, [np.ones(4, np.float32), np.ones(4, np.float64), 4])
    with pytest.raises(TypeError, match="argument 0 must be a 1-D float64 array"):
        interpret(kernel, [np.ones(4, np.float32), np.ones(4, np.float64), 4], compute=np.float64)
