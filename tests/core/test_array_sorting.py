"""``sort`` and ``argsort`` on every device against numpy's stable sort, exactly: every dtype
the device claims, ties (equal values keep their order, descending too), NaN last in both
orders, signed zeros kept in order, rows within one tile and longer ones (the global
merge steps), several rows a tile, non-last and negative axes, size-0 and size-1 dims,
strided inputs, the standard's errors, and kernels compiled once across shapes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from array_support import NUMERIC, layouts, on, require, require_special_values

import zyx
from zyx.array.custom import group_size
from zyx.backend import Device
from zyx.dtypes import DType


def stable_order(values: Any, axis: int, descending: bool) -> Any:
    """The indices of a stable sort along ``axis``, NaN last in both orders."""
    a = np.moveaxis(np.asarray(values), axis, -1)
    if a.dtype.name == "bfloat16":  # ml_dtypes' own sort misorders rows with NaN (seen with
        a = a.astype(np.float32)  # numpy 2.5.2); float32 holds every bf16 value exactly
    n = a.shape[-1]
    if descending:  # a stable ascending sort of the reversed row, reversed back
        order = n - 1 - np.flip(np.argsort(np.flip(a, -1), axis=-1, kind="stable"), -1)
    else:
        order = np.argsort(a, axis=-1, kind="stable")
    if a.dtype.kind == "f":
        nan = np.isnan(np.take_along_axis(a, order, -1))
        order = np.take_along_axis(order, np.argsort(nan, axis=-1, kind="stable"), -1)
    return np.moveaxis(order, -1, axis)


def ties(rng: np.random.Generator, shape: tuple[int, ...], dtype: DType) -> Any:
    """Values of few kinds (many equal ones), negative ones where the dtype has them."""
    low = -4 if dtype.is_signed else 1
    return rng.integers(low, 5, size=shape).astype(dtype.numpy)


def check(device: Device, values: Any, axis: int) -> None:
    for layout, x in layouts(device, values):
        for descending in (False, True):
            what = f"{values.shape} axis {axis} {layout} descending={descending}"
            order = stable_order(values, axis, descending)
            got = zyx.argsort(x, axis=axis, descending=descending)
            assert got.dtype is zyx.int64, what
            np.testing.assert_array_equal(got.numpy(), order, err_msg=what)
            sort = zyx.sort(x, axis=axis, descending=descending, stable=False)
            assert sort.dtype is x.dtype, what
            want = np.take_along_axis(values, order, axis)
            np.testing.assert_array_equal(sort.numpy(), want, err_msg=what)


@pytest.mark.parametrize("dtype", NUMERIC, ids=str)
def test_sort_of_every_dtype(array_device: Device, dtype: DType) -> None:
    require(array_device, dtype)
    rng = np.random.default_rng(11)
    for shape, axis in [((3, 37), -1), ((40, 6), 0), ((2, 3, 5), 1), ((1,), 0), ((4, 0), 1)]:
        check(array_device, ties(rng, shape, dtype), axis)


@pytest.mark.parametrize("dtype", [DType.F32, DType.I64, DType.F16, DType.U8], ids=str)
def test_rows_longer_than_a_tile(array_device: Device, dtype: DType) -> None:
    require(array_device, dtype)
    tile = 2 * group_size(array_device)
    rng = np.random.default_rng(5)
    for shape, axis in [((2, 4 * tile + 3), -1), ((tile + 1,), 0), ((3 * tile, 2), 0)]:
        check(array_device, ties(rng, shape, dtype), axis)


def test_distinct_floats(array_device: Device) -> None:
    values = np.random.default_rng(2).standard_normal((5, 300)).astype(np.float32)
    check(array_device, values, -1)


@pytest.mark.parametrize("dtype", [DType.F32, DType.F64, DType.F16, DType.BF16], ids=str)
def test_nan_sorts_last_in_both_orders(array_device: Device, dtype: DType) -> None:
    require(array_device, dtype)
    require_special_values(array_device)
    rng = np.random.default_rng(9)
    tile = 2 * group_size(array_device)
    for shape in [(3, 30), (tile + 7,)]:
        values = ties(rng, shape, dtype)
        values[values == 2] = np.nan
        values[values == -3] = np.inf
        check(array_device, values, -1)


def test_signed_zeros_are_equal_and_keep_their_order(array_device: Device) -> None:
    values = np.array([0.0, -0.0, 1.0, -0.0, 0.0, -1.0], dtype=np.float32)
    x = on(array_device, values)
    np.testing.assert_array_equal(zyx.argsort(x).numpy(), [5, 0, 1, 3, 4, 2])
    signs = np.signbit(zyx.sort(x).numpy())
    np.testing.assert_array_equal(signs, [True, False, True, True, False, False])


def test_errors(array_device: Device) -> None:
    x = on(array_device, np.ones((2, 3), dtype=np.float32))
    with pytest.raises(IndexError, match="axis 2"):
        zyx.sort(x, axis=2)
    with pytest.raises(IndexError, match="0-D"):
        zyx.argsort(on(array_device, np.float32(1)))
    with pytest.raises(TypeError, match="bool"):
        zyx.sort(on(array_device, np.ones(3, dtype=bool)))
    with pytest.raises(TypeError, match="bools"):
        zyx.sort(x, descending=1)  # type: ignore[arg-type]


def test_kernels_compile_once_across_shapes(array_device: Device) -> None:
    tile = 2 * group_size(array_device)

    def argsort(shape: tuple[int, ...]) -> None:
        x = on(array_device, np.arange(np.prod(shape), dtype=np.float32).reshape(shape))
        zyx.argsort(x, descending=True).realize()

    argsort((3, 4 * tile))  # the tile and the step kernel
    before = zyx.stats()
    for shape in [(5,), (7, 3), (tile + 1,), (2, 8 * tile - 5), (100, 37)]:
        argsort(shape)
    done = zyx.stats() - before
    assert done.realizes == 5 and done.kernels_compiled == 0
