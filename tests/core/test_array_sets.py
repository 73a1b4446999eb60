"""``unique_all``, ``unique_counts``, ``unique_inverse`` and ``unique_values`` on every
device, exactly against numpy's ``unique`` (``equal_nan=False``: every NaN distinct, as
the standard says): the standard's field names and dtypes, ties, NaN, signed zeros
aggregated, 0-D, size-0 and size-1 inputs, strided inputs, and kernels compiled once."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from array_support import ALL, layouts, on, require, require_special_values

import zyx
from zyx.backend import Device
from zyx.dtypes import DType


def few_kinds(rng: np.random.Generator, shape: tuple[int, ...], dtype: DType) -> Any:
    """Values of few kinds (many repeated), negative ones where the dtype has them."""
    if dtype is DType.BOOL:
        return rng.random(shape) < 0.5
    low = -4 if dtype.is_signed else 1
    return rng.integers(low, 5, size=shape).astype(dtype.numpy)


def check(device: Device, values: Any) -> None:
    want = np.unique(
        values, return_index=True, return_inverse=True, return_counts=True, equal_nan=False
    )
    for layout, x in layouts(device, values):
        what = f"{values.shape} {layout}"
        got = zyx.unique_all(x)
        assert got._fields == ("values", "indices", "inverse_indices", "counts")
        assert got.values.dtype is x.dtype and got.inverse_indices.shape == x.shape, what
        assert {got.indices.dtype, got.inverse_indices.dtype, got.counts.dtype} == {zyx.int64}
        for name, g, w in zip(got._fields, got, want):
            w = np.reshape(w, values.shape) if name == "inverse_indices" else w
            np.testing.assert_array_equal(g.numpy(), w, err_msg=f"{what} {name}")
        counts = zyx.unique_counts(x)
        assert counts._fields == ("values", "counts")
        np.testing.assert_array_equal(counts.counts.numpy(), want[3], err_msg=what)
        inverse = zyx.unique_inverse(x)
        assert inverse._fields == ("values", "inverse_indices")
        back = inverse.values.numpy()[inverse.inverse_indices.numpy()]
        np.testing.assert_array_equal(back, values, err_msg=what)
        np.testing.assert_array_equal(zyx.unique_values(x).numpy(), want[0], err_msg=what)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_unique_of_every_dtype(array_device: Device, dtype: DType) -> None:
    require(array_device, dtype)
    rng = np.random.default_rng(21)
    for shape in [(4, 5, 6), (1,), (3, 0), (2, 1500)]:
        check(array_device, few_kinds(rng, shape, dtype))


def test_all_equal_and_all_distinct(array_device: Device) -> None:
    check(array_device, np.full((3, 4), 7, dtype=np.int32))
    check(array_device, np.random.default_rng(0).permutation(500).astype(np.float32))


def test_asarray_of_a_0d_array_stays_0d(array_device: Device) -> None:
    """(numpy's ascontiguousarray makes a 0-D array 1-D: asarray gave shape (1,).)"""
    for value in (np.array(3.0, dtype=np.float32), np.int16(3), 3.0):
        assert zyx.asarray(value, device=array_device).shape == ()


def test_unique_of_a_0d_array(array_device: Device) -> None:
    got = zyx.unique_all(on(array_device, np.array(3.0, dtype=np.float32)))
    assert got.values.shape == (1,) and got.inverse_indices.shape == ()
    assert float(got.values[0]) == 3.0 and int(got.inverse_indices) == 0
    assert int(got.counts[0]) == 1 and int(got.indices[0]) == 0


@pytest.mark.parametrize("dtype", [DType.F32, DType.F16], ids=str)
def test_each_nan_is_distinct(array_device: Device, dtype: DType) -> None:
    require(array_device, dtype)
    require_special_values(array_device)
    values = np.array([2, np.nan, 1, 2, np.nan, np.inf, 1, np.nan], dtype=dtype.numpy)
    check(array_device, values)


def test_signed_zeros_are_one_value(array_device: Device) -> None:
    values = np.array([1.0, -0.0, 0.0, 2.0, 0.0], dtype=np.float32)
    got = zyx.unique_all(on(array_device, values))
    np.testing.assert_array_equal(got.values.numpy(), [0.0, 1.0, 2.0])
    assert np.signbit(got.values.numpy()[0]), "the first occurring zero is the value"
    np.testing.assert_array_equal(got.counts.numpy(), [3, 1, 1])
    np.testing.assert_array_equal(got.indices.numpy(), [1, 0, 3])
    np.testing.assert_array_equal(got.inverse_indices.numpy(), [1, 0, 0, 2, 0])


def test_kernels_compile_once_across_shapes(array_device: Device) -> None:
    rng = np.random.default_rng(3)

    def unique(shape: tuple[int, ...]) -> None:
        x = on(array_device, few_kinds(rng, shape, DType.I32))
        zyx.realize(*zyx.unique_all(x))

    unique((3000, 2))  # sorts past a tile, running counts of several blocks
    unique((4000,))  # a 1-D input is its own flattening: other copy kernels
    before = zyx.stats()
    for shape in [(5, 7), (2, 3000), (41,), (6000, 3)]:
        unique(shape)
    assert (zyx.stats() - before).kernels_compiled == 0
