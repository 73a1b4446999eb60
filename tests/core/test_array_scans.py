"""``cumulative_sum`` and ``cumulative_prod`` on every device, against numpy in float64
(integers exactly, wrapping as numpy's): rows of one block and of several (the
reduce-then-scan path), scans down columns, a non-last axis with few columns (moved last),
``include_initial``, size-0 and size-1 dims, negative axes, strided inputs, the standard's
dtypes and errors, and kernels compiled once across shapes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from array_support import INTEGERS, NUMERIC, Expect, data, layouts, on, reference, require

import zyx
from zyx.array.scans import ITEMS
from zyx.backend import Device
from zyx.dtypes import DType

SUM_DTYPES = {d: DType.I64 for d in INTEGERS if d.is_signed} | {
    d: DType.U64 for d in INTEGERS if not d.is_signed
}


def result_dtype(dtype: DType) -> DType:
    """The standard's result dtype of a cumulative sum or product of ``dtype``."""
    return SUM_DTYPES.get(dtype, dtype)


def expected(values: Any, axis: int, dtype: DType, prod: bool, initial: bool) -> Any:
    """numpy's running sum or product in float64 (floats) or in ``dtype`` (integers)."""
    ref = reference(values)
    ref = ref if dtype.is_float else ref.astype(dtype.numpy)
    out = np.cumprod(ref, axis=axis) if prod else np.cumsum(ref, axis=axis)
    if initial:
        shape = list(out.shape)
        shape[axis] = 1
        out = np.concatenate([np.full(shape, 1 if prod else 0, dtype=out.dtype), out], axis=axis)
    return out


def block(device: Device) -> int:
    from zyx.array.custom import group_size

    return ITEMS * group_size(device)


def check(
    device: Device, dtype: DType, cases: list[tuple[tuple[int, ...], int]], prod: bool = False
) -> None:
    rng = np.random.default_rng(7)
    function = zyx.cumulative_prod if prod else zyx.cumulative_sum
    low, high = (0.5, 1.5) if prod and dtype.is_float else (1, 3) if prod else (None, None)
    out = result_dtype(dtype)
    with Expect(device) as expect:
        for shape, axis in cases:
            values = data(rng, shape, dtype, low, high)
            for layout, x in layouts(device, values):
                for initial in (False, True):
                    got = function(x, axis=axis, include_initial=initial)
                    want = expected(values, axis, out, prod, initial)
                    expect(got, want, out, f"{shape} axis {axis} {layout} initial={initial}")


@pytest.mark.parametrize("dtype", NUMERIC, ids=str)
def test_cumulative_sum_of_every_dtype(array_device: Device, dtype: DType) -> None:
    require(array_device, dtype)
    require(array_device, result_dtype(dtype))
    check(array_device, dtype, [((3, 37), -1), ((70, 5), 0), ((1,), 0), ((4, 1), 1)])


@pytest.mark.parametrize("dtype", [DType.F32, DType.I32, DType.F16], ids=str)
def test_rows_of_several_blocks(array_device: Device, dtype: DType) -> None:
    require(array_device, dtype)
    n = block(array_device)
    check(array_device, dtype, [((2, 3 * n + 5), 1), ((n + 1,), 0), ((1, n), -1)])


def test_rows_of_blocks_of_blocks(array_device: Device) -> None:
    """More blocks in a row than a block holds: the totals are scanned in blocks too."""
    n = block(array_device) ** 2 + 3
    values = data(np.random.default_rng(3), (n,), DType.I32)
    got = zyx.cumulative_sum(on(array_device, values)).numpy()
    np.testing.assert_array_equal(got, np.cumsum(values.astype(np.int64)))


@pytest.mark.parametrize("dtype", [DType.F32, DType.I64], ids=str)
def test_axes_other_than_the_last(array_device: Device, dtype: DType) -> None:
    """Many columns loop down the axis; few are moved last and scanned as rows."""
    require(array_device, dtype)
    cases = [((6, 5, 4), 1), ((2, 3, 4), -3), ((50, 3000), 0), ((3000, 2), 0), ((0, 4), 0)]
    check(array_device, dtype, cases)


@pytest.mark.parametrize("dtype", [DType.F32, DType.I64, DType.U8, DType.F16], ids=str)
def test_cumulative_prod(array_device: Device, dtype: DType) -> None:
    require(array_device, dtype)
    require(array_device, result_dtype(dtype))
    check(array_device, dtype, [((3, 20), -1), ((20, 7), 0), ((4, 0), 1)], prod=True)


@pytest.mark.parametrize("dtype", [DType.F16, DType.BF16], ids=str)
def test_half_floats_round_the_running_float32_value(array_device: Device, dtype: DType) -> None:
    """Each element is the float32 running sum rounded once: within one ulp of the exact
    running sum everywhere (numpy's float16 cumsum, rounding at every step, stalls)."""
    require(array_device, dtype)
    values = np.full(6000, 0.1, dtype=dtype.numpy)
    got = zyx.cumulative_sum(on(array_device, values)).numpy().astype(np.float64)
    exact = np.cumsum(values.astype(np.float64))
    spacing = np.abs(np.spacing(exact.astype(dtype.numpy)).astype(np.float64))
    assert np.all(np.abs(got - exact) <= spacing), "an element is more than one ulp off"
    if dtype is DType.F16:
        stalled = np.cumsum(values)[-1]
        assert abs(float(stalled) - exact[-1]) > 100, "numpy's float16 cumsum no longer stalls"


def test_dtype_argument_casts_first(array_device: Device) -> None:
    values = np.array([100, 100, 100], dtype=np.int8)
    x = on(array_device, values)
    assert zyx.cumulative_sum(x).dtype is DType.I64
    got = zyx.cumulative_sum(x, dtype=zyx.int8).numpy()
    np.testing.assert_array_equal(got, np.cumsum(values, dtype=np.int8))
    floats = zyx.cumulative_sum(x, dtype=zyx.float32).numpy()
    np.testing.assert_array_equal(floats, [100.0, 200.0, 300.0])


def test_errors(array_device: Device) -> None:
    x = on(array_device, np.ones((2, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="axis is required"):
        zyx.cumulative_sum(x)
    with pytest.raises(ValueError, match="at least one dimension"):
        zyx.cumulative_sum(on(array_device, np.float32(1)))
    with pytest.raises(IndexError, match="axis 2"):
        zyx.cumulative_prod(x, axis=2)
    with pytest.raises(TypeError, match="bool"):
        zyx.cumulative_sum(on(array_device, np.ones(3, dtype=bool)))


def test_kernels_compile_once_across_shapes(array_device: Device) -> None:
    n = block(array_device)

    def scan(shape: tuple[int, ...]) -> None:
        x = on(array_device, np.ones(shape, dtype=np.float32))
        zyx.cumulative_sum(x, axis=-1, include_initial=True).realize()

    scan((3, 2 * n + 9))  # every kernel of a scan along rows of several blocks
    before = zyx.stats()
    for shape in [(2, 3 * n + 1), (5, 7), (1, 2 * n), (40, 300), (9,)]:
        scan(shape)
    done = zyx.stats() - before
    assert done.realizes == 5 and done.kernels_compiled == 0
