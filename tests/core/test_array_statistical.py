"""Statistical and utility functions, and the searching functions that reduce (``argmax``,
``argmin``, ``count_nonzero``) or select (``where``), against numpy in float64: every dtype
of each function's kind, every form of ``axis`` (None, an int, a negative one, a tuple, with
and without ``keepdims``), strided inputs, size-0 and size-1 dims; the standard's result
dtypes and NaN propagation; errors at the call.

Each reduction is a kernel of its own, so the axis forms take turns over the dtypes rather
than multiplying with them (every dtype and every form is covered, not every pair)."""

from __future__ import annotations

from itertools import cycle
from typing import Any

import numpy as np
import pytest
from array_support import (
    ALL,
    ARITHMETIC,
    FLOATS,
    INTEGERS,
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

SHAPE = (3, 1, 5, 4)
AXES: list[tuple[Any, bool]] = [
    (None, False), (1, False), (-1, True), ((0, 2), False), ((-3, -1), True), (2, False),
    ((0, 1, 2, 3), True), (0, True),
]  # fmt: skip


def _sum_dtype(dtype: DType) -> DType:
    """The standard's: the default integer (unsigned: of the same width) for integers."""
    if dtype is DType.BOOL or (dtype.is_int and dtype.is_signed):
        return DType.I64
    return DType.U64 if dtype.is_int else dtype


def _small(rng: np.random.Generator, dtype: DType, shape: tuple[int, ...] = SHAPE) -> Any:
    """Values whose products stay in range: near 1 for floats, -2..2 for integers."""
    if dtype.is_float:
        return data(rng, shape, dtype, 0.6, 1.4)
    if dtype is DType.BOOL:
        return data(rng, shape, dtype)
    return data(rng, shape, dtype, -2 if dtype.is_signed else 1, 2)


@pytest.mark.parametrize("name", ["sum", "prod"])
def test_sum_and_prod_match_numpy_in_the_standards_dtypes(array_device: Device, name: str) -> None:
    rng = np.random.default_rng(50)
    reduce = {"sum": np.sum, "prod": np.prod}[name]
    with Expect(array_device) as expect:
        for dtype, (axis, keep) in zip(claimed(array_device, NUMERIC, ARITHMETIC), cycle(AXES)):
            x = _small(rng, dtype)
            got = getattr(zyx, name)(strided(array_device, x), axis=axis, keepdims=keep)
            out = _sum_dtype(dtype)
            want = reduce(
                reference(x).astype(out.numpy if not out.is_float else np.float64),
                axis=axis,
                keepdims=keep,
            )
            expect(got, want, out, f"{name} {dtype.value} axis={axis} keepdims={keep}")


def test_sum_with_a_dtype_accumulates_in_it(array_device: Device) -> None:
    x = np.full((300,), 100, np.uint8)
    with Expect(array_device) as expect:
        expect(
            zyx.sum(on(array_device, x), dtype=zyx.uint8),
            np.sum(x, dtype=np.uint8),
            DType.U8,
            "wraps in uint8",
        )
        expect(zyx.sum(on(array_device, x), dtype=zyx.float32), 30000.0, DType.F32, "in float32")


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_and_min_match_numpy_on_every_dtype(array_device: Device, name: str) -> None:
    rng = np.random.default_rng(51)
    reduce = {"max": np.max, "min": np.min}[name]
    with Expect(array_device) as expect:
        for dtype, (axis, keep) in zip(claimed(array_device, NUMERIC, ARITHMETIC), cycle(AXES)):
            x = data(rng, SHAPE, dtype)
            got = getattr(zyx, name)(strided(array_device, x), axis=axis, keepdims=keep)
            expect(
                got, reduce(x, axis=axis, keepdims=keep), dtype, f"{name} {dtype.value} axis={axis}"
            )


@pytest.mark.parametrize("name", ["mean", "var", "std"])
def test_mean_var_and_std_match_numpy_on_every_float_dtype(array_device: Device, name: str) -> None:
    rng = np.random.default_rng(52)
    reduce = {"mean": np.mean, "var": np.var, "std": np.std}[name]
    with Expect(array_device) as expect:
        # Not over the size-1 dim alone: one element less one correction divides by zero.
        forms = cycle(f for f in AXES if f[0] != 1)
        for dtype, (axis, keep) in zip(claimed(array_device, FLOATS, ARITHMETIC), forms):
            x = data(rng, SHAPE, dtype)
            kwargs = {} if name == "mean" else {"correction": 1.0}
            got = getattr(zyx, name)(strided(array_device, x), axis=axis, keepdims=keep, **kwargs)
            options = {} if name == "mean" else {"ddof": 1.0}
            want = reduce(reference(x), axis=axis, keepdims=keep, **options)
            expect(got, want, dtype, f"{name} {dtype.value} axis={axis}")
        x = data(rng, (2, 6), DType.F32)
        expect(zyx.var(on(array_device, x)), np.var(reference(x)), DType.F32, "var correction 0")
        expect(
            zyx.std(on(array_device, x), axis=()), np.zeros((2, 6)), DType.F32, "std over no axes"
        )


def test_mean_takes_only_floats(array_device: Device) -> None:
    with pytest.raises(TypeError, match="mean takes floating arrays, got int32"):
        zyx.mean(on(array_device, np.ones(3, np.int32)))


def test_reductions_over_size_zero_and_size_one_dims(array_device: Device) -> None:
    empty = on(array_device, np.zeros((2, 0, 3), np.float32))
    with Expect(array_device) as expect:
        expect(zyx.sum(empty, axis=1), np.zeros((2, 3)), DType.F32, "sum of nothing")
        expect(zyx.prod(empty, axis=(0, 1)), np.ones(3), DType.F32, "prod of nothing")
        expect(zyx.all(empty), True, DType.BOOL, "all of nothing")
        expect(
            zyx.any(empty, axis=1, keepdims=True),
            np.zeros((2, 1, 3), bool),
            DType.BOOL,
            "any of nothing",
        )
        ones = data(np.random.default_rng(53), (1, 1, 4), DType.F32)
        expect(
            zyx.sum(on(array_device, ones), axis=(0, 1)),
            ones[0, 0],
            DType.F32,
            "sum over size-1 dims",
        )
        expect(zyx.max(on(array_device, ones), axis=0), ones[0], DType.F32, "max over a size-1 dim")
    assert zyx.sum(empty, axis=2).numpy().shape == (2, 0)
    with pytest.raises(
        ValueError, match=r"max of an empty selection \(shape \(2, 0, 3\), axis 1\)"
    ):
        zyx.max(empty, axis=1)


@pytest.mark.parametrize("name", ["sum", "max", "argmin"])
def test_a_reduction_over_a_size_one_dim_read_back_at_its_shape(
    array_device: Device, name: str
) -> None:
    """A reduction over a dim of 1, its result reshaped back to the input's shape and read
    by the elementwise op fused into its kernel (found by the array fuzzer): the read's
    per-dim indices were rederived from the flat index, not the row's own, and lowering
    raised ScheduleError."""
    rng = np.random.default_rng(59)
    reduce = {"sum": np.sum, "max": np.max, "argmin": np.argmin}[name]
    with Expect(array_device, per_kernel=1) as expect:
        for dtype in claimed(array_device, NUMERIC, ARITHMETIC):
            low = -9 if dtype.is_float or dtype.is_signed else 1
            x, y = (data(rng, (1, 5, 2), dtype, low, 9) for _ in range(2))
            t, u = on(array_device, x), on(array_device, y)
            got = getattr(zyx, name)(t, axis=0)
            want = reduce(x, axis=0)
            if name == "sum":  # the standard's dtype: compare in float64 (float16 rounds)
                got, want = zyx.astype(got, DType.F64), want.astype(np.float64)
            out = zyx.where(u > 0, zyx.expand_dims(got, axis=0), got[None, ...])
            ref = np.where(y > 0, want[None], want[None])
            expect(out, ref, out.dtype, f"{name} {dtype.value} over a dim of 1")
            expect(zyx.broadcast_to(got, (1, 5, 2)) * 2, want[None] * 2, out.dtype, f"{name} * 2")


def test_a_reduction_read_by_two_kernels_fuses_into_neither(array_device: Device) -> None:
    """``x @ y`` read by ``sum`` and by an elementwise op, both realized: it fused into the
    elementwise kernel, and the sum's kernel read a row it did not compute (ScheduleError)."""
    rng = np.random.default_rng(58)
    a, b, c = (data(rng, s, DType.I32, -9, 9) for s in ((3, 4), (4, 3), (3,)))
    product = zyx.matmul(on(array_device, a), on(array_device, b))
    total, masked = zyx.sum(product, axis=-1), product & on(array_device, c)
    zyx.realize(total, masked)
    with Expect(array_device, per_kernel=1) as expect:
        expect(total, (a @ b).sum(-1), DType.I64, "sum(x @ y)")
        expect(masked, (a @ b) & c, DType.I32, "(x @ y) & z")


def test_max_min_and_mean_propagate_nan(array_device: Device) -> None:
    require_special_values(array_device)
    x = np.array([[1.0, np.nan, 3.0], [-np.inf, 2.0, np.inf]], np.float32)
    with Expect(array_device) as expect:
        for name, reduce in (("max", np.max), ("min", np.min), ("mean", np.mean), ("sum", np.sum)):
            got = getattr(zyx, name)(on(array_device, x), axis=1)
            with np.errstate(invalid="ignore"):  # inf - inf
                want = reduce(reference(x), axis=1)
            expect(got, want, DType.F32, name, ieee=True, ulps=1.0)


# ---- all, any, count_nonzero, diff -----------------------------------------------------------


@pytest.mark.parametrize("name", ["all", "any", "count_nonzero"])
def test_truth_reductions_match_numpy_on_every_dtype(array_device: Device, name: str) -> None:
    rng = np.random.default_rng(54)
    reduce = {"all": np.all, "any": np.any, "count_nonzero": np.count_nonzero}[name]
    with Expect(array_device) as expect:
        for dtype, (axis, keep) in zip(claimed(array_device, ALL, ARITHMETIC), cycle(AXES)):
            x = data(rng, SHAPE, dtype)
            x[x.astype(np.float64) > 2] = 0  # zeros among them: the truth differs
            got = getattr(zyx, name)(strided(array_device, x), axis=axis, keepdims=keep)
            out = DType.I64 if name == "count_nonzero" else DType.BOOL
            expect(
                got, reduce(x, axis=axis, keepdims=keep), out, f"{name} {dtype.value} axis={axis}"
            )


@pytest.mark.parametrize(("n", "axis"), [(1, -1), (2, 0), (0, 1), (3, -1)])
def test_diff_matches_numpy(array_device: Device, n: int, axis: int) -> None:
    rng = np.random.default_rng(55)
    with Expect(array_device) as expect:
        for dtype in claimed(
            array_device, (DType.F32, DType.I32, DType.U8, DType.BOOL), ARITHMETIC
        ):
            x = data(rng, (4, 5), dtype)
            got = zyx.diff(strided(array_device, x), axis=axis, n=n)
            expect(got, np.diff(x, n=n, axis=axis), dtype, f"diff {dtype.value}")
        x, edge = data(rng, (4, 5), DType.F32), data(rng, (4, 1), DType.F32)
        got = zyx.diff(
            on(array_device, x), prepend=on(array_device, edge), append=on(array_device, edge)
        )
        expect(
            got, np.diff(x, prepend=edge, append=edge), DType.F32, "diff with prepend and append"
        )


# ---- argmax, argmin, where ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_and_argmin_give_the_first_extreme_index(array_device: Device, name: str) -> None:
    rng = np.random.default_rng(56)
    reduce = {"argmax": np.argmax, "argmin": np.argmin}[name]
    forms: list[tuple[int | None, bool]] = [
        (None, False),
        (-1, False),
        (0, True),
        (2, False),
        (None, True),
    ]
    with Expect(array_device) as expect:
        for dtype, (axis, keep) in zip(claimed(array_device, NUMERIC, ARITHMETIC), cycle(forms)):
            x = data(rng, SHAPE, dtype, *((1, 3) if dtype.is_int else (None, None)))  # ties
            if dtype.is_float:
                x = np.round(x)
            got = getattr(zyx, name)(strided(array_device, x), axis=axis, keepdims=keep)
            expect(
                got,
                reduce(x, axis=axis, keepdims=keep),
                DType.I64,
                f"{name} {dtype.value} axis={axis}",
            )


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("length", [5, 300])
def test_argmax_and_argmin_where_the_extreme_is_the_dtypes_limit(
    array_device: Device, name: str, length: int
) -> None:
    """Rows whose extreme is the reduction's start value (found by the array fuzzer): 0
    for an argmax of unsigned values, the lowest integer, -inf (argmin: the highest, inf).
    No element beat the start, and the index stayed past the row (2**62). 300 elements:
    a work-group per row, its tree."""
    rng = np.random.default_rng(57)
    reduce = {"argmax": np.argmax, "argmin": np.argmin}[name]
    floats = () if array_device.info.finite_math else FLOATS
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, (*INTEGERS, *floats), ARITHMETIC):
            low, high = (-np.inf, np.inf) if dtype.is_float else dtype.int_range
            limit, other = (low, high) if name == "argmax" else (high, low)
            # As arrays of the dtype: numpy 2.5 takes a bare 2**64 - 1 as int64 and overflows.
            limit, other = np.array(limit, dtype.numpy), np.array(other, dtype.numpy)
            x = np.where(rng.random((4, length)) < 0.9, limit, other)
            x[0] = limit  # a row of the limit alone: its first element
            x[1, :] = other
            x[1, length // 2 :] = limit  # the limit past a run of the other extreme
            for axis in (-1, 0):
                got = getattr(zyx, name)(on(array_device, x), axis=axis)
                expect(got, reduce(x, axis=axis), DType.I64, f"{name} {dtype.value} axis={axis}")


def test_argmax_of_an_empty_selection_is_a_value_error(array_device: Device) -> None:
    with pytest.raises(ValueError, match="argmax of an empty selection"):
        zyx.argmax(on(array_device, np.zeros((3, 0), np.float32)), axis=1)
    with pytest.raises(TypeError, match="argmax takes numeric arrays, got bool"):
        zyx.argmax(on(array_device, np.ones(3, bool)))


def test_where_selects_with_broadcasting_promotion_and_scalars(array_device: Device) -> None:
    rng = np.random.default_rng(57)
    condition = data(rng, (3, 1, 4), DType.BOOL)
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, ALL, ARITHMETIC):
            a, b = data(rng, (5, 1), dtype), data(rng, (4,), dtype)
            got = zyx.where(
                strided(array_device, condition), on(array_device, a), strided(array_device, b)
            )
            expect(got, np.where(condition, a, b), dtype, f"where {dtype.value}")
        a8, b32 = data(rng, (4,), DType.I8), data(rng, (4,), DType.I32)
        got = zyx.where(on(array_device, condition), on(array_device, a8), on(array_device, b32))
        expect(got, np.where(condition, a8, b32), DType.I32, "where promotes int8 and int32")
        f = data(rng, (4,), DType.F32)
        expect(
            zyx.where(on(array_device, condition), on(array_device, f), 0.0),
            np.where(condition, reference(f), 0.0),
            DType.F32,
            "where with a scalar",
        )


def test_where_errors(array_device: Device) -> None:
    x = on(array_device, np.ones(3, np.float32))
    with pytest.raises(TypeError, match="condition must be a bool array"):
        zyx.where(x, x, x)
    with pytest.raises(TypeError, match="at least one of x1 and x2 must be an array"):
        zyx.where(x > 0, 1.0, 2.0)
    with pytest.raises(ValueError, match=r"where: shapes .*\(2,\) do not broadcast"):
        zyx.where(x > 0, x, on(array_device, np.ones(2, np.float32)))


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda t: zyx.sum(t, axis=2), IndexError, "sum: axis 2 is out of range for a 2-D"),
        (lambda t: zyx.max(t, axis=(0, -2)), ValueError, "repeated axis"),
        (lambda t: zyx.sum(t > 0), TypeError, "sum takes numeric arrays, got bool"),
        (lambda t: zyx.diff(t[0, 0]), ValueError, "at least a 1-D array"),
        (lambda t: zyx.argmin(t, axis=-3), IndexError, "axis -3 is out of range"),
    ],
)
def test_bad_arguments_are_errors_at_the_call(
    call: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        call(zyx.ones((2, 3)))
