"""The data-dependent searching functions on every device, exactly against numpy:
``nonzero`` (and boolean-mask indexing, which calls it), ``searchsorted`` (both sides, a
sorter, ties, NaN, empty arrays, mixed dtypes) and ``repeat`` with an array of repeats
(a running sum and a search), with the standard's errors and kernels compiled once."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from array_support import ALL, NUMERIC, data, layouts, on, require, require_special_values

import zyx
from zyx.backend import Device
from zyx.dtypes import DType


def some_zeros(rng: np.random.Generator, shape: tuple[int, ...], dtype: DType) -> Any:
    """Random values of which about a third are zero (false)."""
    values = data(rng, shape, dtype)
    values[rng.random(shape) < 0.35] = 0
    return values


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_nonzero_of_every_dtype(array_device: Device, dtype: DType) -> None:
    require(array_device, dtype)
    rng = np.random.default_rng(4)
    for shape in [(4, 5, 6), (37,), (1,), (3, 1), (0, 3), (2, 2000)]:
        values = some_zeros(rng, shape, dtype)
        for layout, x in layouts(array_device, values):
            got = zyx.nonzero(x)
            assert isinstance(got, tuple) and len(got) == len(shape), layout
            for d, (g, want) in enumerate(zip(got, np.nonzero(values))):
                assert g.dtype is zyx.int64
                np.testing.assert_array_equal(g.numpy(), want, err_msg=f"{shape} {layout} dim {d}")


def test_nonzero_of_all_and_none(array_device: Device) -> None:
    for values in (np.ones((3, 4), dtype=np.int32), np.zeros((3, 4), dtype=np.int32)):
        for g, want in zip(zyx.nonzero(on(array_device, values)), np.nonzero(values)):
            np.testing.assert_array_equal(g.numpy(), want)


def test_nonzero_of_a_0d_array_is_an_error(array_device: Device) -> None:
    with pytest.raises(ValueError, match="0-D"):
        zyx.nonzero(on(array_device, np.float32(1)))


@pytest.mark.parametrize("dtype", [DType.F32, DType.I16], ids=str)
def test_boolean_mask_indexing(array_device: Device, dtype: DType) -> None:
    require(array_device, dtype)
    rng = np.random.default_rng(8)
    values = data(rng, (5, 6, 3), dtype)
    for layout, x in layouts(array_device, values):
        for mask in (values > 0, (values > 0)[..., 0], (values > 0)[:, 0, 0]):
            got = x[on(array_device, mask)]
            np.testing.assert_array_equal(got.numpy(), values[mask], err_msg=layout)
    empty = np.zeros(values.shape, dtype=bool)
    assert on(array_device, values)[on(array_device, empty)].shape == (0,)


def test_a_0d_mask_adds_a_leading_dim_of_one_element_or_none(array_device: Device) -> None:
    """The standard (as array-api-strict and numpy): ``x[True]``-like masks select all of x
    under a new dim of 1, false ones none of it under a dim of 0; ``x[mask] = v`` writes
    all or nothing."""
    values = data(np.random.default_rng(9), (4, 3), DType.F32)
    for layout, x in layouts(array_device, values):
        for flag in (False, True):  # the write of False changes nothing to read next
            mask = on(array_device, np.asarray(flag))
            got = x[mask]
            assert got.shape == values[np.asarray(flag)].shape, layout
            np.testing.assert_array_equal(got.numpy(), values[np.asarray(flag)], err_msg=layout)
            x[mask] = 7.0
            want = np.full_like(values, 7.0) if flag else values
            np.testing.assert_array_equal(x.numpy(), want, err_msg=layout)


def sorted_with_ties(rng: np.random.Generator, n: int, dtype: DType) -> Any:
    low = -6 if dtype.is_signed else 1
    return np.sort(rng.integers(low, 7, size=n)).astype(dtype.numpy)


@pytest.mark.parametrize("dtype", NUMERIC, ids=str)
def test_searchsorted_of_every_dtype(array_device: Device, dtype: DType) -> None:
    require(array_device, dtype)
    rng = np.random.default_rng(6)
    for n in (40, 1, 0, 1000):
        x1 = sorted_with_ties(rng, n, dtype)
        low = -8 if dtype.is_signed else 0
        x2 = rng.integers(low, 9, size=(3, 7)).astype(dtype.numpy)
        for layout, values in layouts(array_device, x2):
            for side in ("left", "right"):
                got = zyx.searchsorted(on(array_device, x1), values, side=side)
                assert got.dtype is zyx.int64 and got.shape == x2.shape
                want = np.searchsorted(x1, x2, side=side)
                np.testing.assert_array_equal(got.numpy(), want, err_msg=f"{n} {layout} {side}")


def test_searchsorted_with_a_sorter(array_device: Device) -> None:
    rng = np.random.default_rng(12)
    x1 = rng.integers(0, 10, size=50).astype(np.float32)
    sorter = np.argsort(x1, kind="stable")
    x2 = rng.integers(-1, 11, size=20).astype(np.float32)
    for sorter_dtype in (np.int64, np.int32):
        for side in ("left", "right"):
            got = zyx.searchsorted(
                on(array_device, x1), on(array_device, x2), side=side,
                sorter=on(array_device, sorter.astype(sorter_dtype)),
            )  # fmt: skip
            want = np.searchsorted(x1, x2, side=side, sorter=sorter)
            np.testing.assert_array_equal(got.numpy(), want)


def test_searchsorted_of_0d_and_empty_values(array_device: Device) -> None:
    x1 = on(array_device, np.array([1, 3, 3, 5], dtype=np.int32))
    got = zyx.searchsorted(x1, on(array_device, np.int32(3)), side="right")
    assert got.shape == () and int(got) == 3
    assert zyx.searchsorted(x1, on(array_device, np.zeros((2, 0), np.int32))).shape == (2, 0)


def test_searchsorted_promotes(array_device: Device) -> None:
    x1 = on(array_device, np.array([1, 2, 200], dtype=np.uint8))
    x2 = on(array_device, np.array([-1, 2, 120], dtype=np.int8))
    np.testing.assert_array_equal(zyx.searchsorted(x1, x2).numpy(), [0, 1, 2])
    if array_device.info.supports(DType.F16):
        halves = on(array_device, np.array([0.5, 1.25], dtype=np.float32))
        x1 = on(array_device, np.array([0.0, 1.0, 1.5], dtype=np.float16))
        np.testing.assert_array_equal(zyx.searchsorted(x1, halves).numpy(), [1, 2])


@pytest.mark.parametrize("dtype", [DType.F32, DType.F64], ids=str)
def test_searchsorted_places_nan_after_every_number(array_device: Device, dtype: DType) -> None:
    require(array_device, dtype)
    require_special_values(array_device)
    x1 = np.array([-np.inf, 0, 1, np.inf, np.nan, np.nan], dtype=dtype.numpy)
    x2 = np.array([np.nan, np.inf, -np.inf, 0.5], dtype=dtype.numpy)
    for side in ("left", "right"):
        got = zyx.searchsorted(on(array_device, x1), on(array_device, x2), side=side).numpy()
        np.testing.assert_array_equal(got, np.searchsorted(x1, x2, side=side))


def test_searchsorted_errors(array_device: Device) -> None:
    x1 = on(array_device, np.arange(4, dtype=np.float32))
    with pytest.raises(ValueError, match="1-D"):
        zyx.searchsorted(zyx.reshape(x1, (2, 2)), x1)
    with pytest.raises(ValueError, match="side"):
        zyx.searchsorted(x1, x1, side="middle")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="do not promote"):
        zyx.searchsorted(x1, on(array_device, np.arange(3)))
    with pytest.raises(ValueError, match="sorter has shape"):
        zyx.searchsorted(x1, x1, sorter=on(array_device, np.arange(3)))
    with pytest.raises(TypeError, match="integer"):
        zyx.searchsorted(x1, x1, sorter=x1)


def test_repeat_by_an_array(array_device: Device) -> None:
    rng = np.random.default_rng(13)
    values = data(rng, (4, 5), DType.F32)
    for layout, x in layouts(array_device, values):
        for axis in (0, 1, -1):
            counts = rng.integers(0, 4, size=values.shape[axis])
            got = zyx.repeat(x, on(array_device, counts), axis=axis)
            want = np.repeat(values, counts, axis=axis)
            np.testing.assert_array_equal(got.numpy(), want, err_msg=f"{layout} axis {axis}")
    none = zyx.repeat(on(array_device, values[0]), on(array_device, np.zeros(5, np.int64)))
    assert none.shape == (0,)


def test_kernels_compile_once_across_shapes(array_device: Device) -> None:
    rng = np.random.default_rng(1)

    def search(n: int, shape: tuple[int, ...]) -> None:
        mask = on(array_device, some_zeros(rng, shape, DType.F32))
        zyx.realize(*zyx.nonzero(mask))
        x1 = on(array_device, np.sort(rng.random(n)).astype(np.float32))
        zyx.searchsorted(x1, mask, side="right").realize()

    search(5000, (7, 3000))  # a running count of several blocks: every kernel
    before = zyx.stats()
    for n, shape in [(3, (50, 2)), (100, (9, 4)), (4000, (3, 7)), (1, (9000, 2))]:
        search(n, shape)
    assert (zyx.stats() - before).kernels_compiled == 0
