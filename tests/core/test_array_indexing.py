"""Indexing against numpy: basic indexing (integers, negative ones, slices with any step
and bounds, ``...``, ``None``) on strided arrays of every dtype, integer array indexing,
``take``, ``take_along_axis`` and ``x[key] = value``; the ``IndexError`` of a bad key,
raised at once."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from array_support import (
    ALL,
    ARITHMETIC,
    INTEGERS,
    Expect,
    claimed,
    data,
    on,
    strided,
)

import zyx
from zyx.backend import Device
from zyx.dtypes import DType
from zyx.testing.devices import checked_host

SHAPE = (4, 1, 6)

KEYS: list[Any] = [
    (1,),
    (-1,),
    (slice(None, None, -1),),
    (slice(3, -5, -2),),
    (slice(-10, 10),),  # bounds past the ends clamp
    (slice(3, 1),),  # empty
    (Ellipsis, -2),
    (None, Ellipsis, None),
    (0, None, slice(1, 5, 3)),
    (slice(None), 0, slice(None, None, 2)),
    (2, 0, -6),
    (),
    (Ellipsis,),
    (slice(1, None), Ellipsis, slice(None, -1)),
]


def _ids(key: Any) -> str:
    return repr(key).replace("slice", "s").replace("Ellipsis", "...")


@pytest.mark.parametrize("key", KEYS, ids=_ids)
def test_basic_indexing_matches_numpy_on_every_dtype(array_device: Device, key: Any) -> None:
    rng = np.random.default_rng(40)
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, ALL, ARITHMETIC):
            x = data(rng, SHAPE, dtype)
            expect(strided(array_device, x)[key], x[key], dtype, f"{dtype.value} x[{key}]")


def test_a_single_index_need_not_be_a_tuple_and_0d_arrays_index_with_an_empty_tuple(
    array_device: Device,
) -> None:
    x = data(np.random.default_rng(41), (5,), DType.F32)
    t = on(array_device, x)
    zero = on(array_device, np.float32(3.5))
    with Expect(array_device) as expect:
        expect(t[2], x[2], DType.F32, "x[2]")
        expect(t[1:4], x[1:4], DType.F32, "x[1:4]")
        expect(zero[()], np.float32(3.5), DType.F32, "0-D x[()]")
        expect(zero[None], np.array([3.5]), DType.F32, "0-D x[None]")
        expect(t[zyx.newaxis, :], x[None, :], DType.F32, "x[newaxis, :]")
    assert t[1:1].numpy().shape == (0,)


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ((4,), "index 4 is out of bounds for axis 0 of size 4"),
        ((0, 0, -7), "index -7 is out of bounds for axis 2 of size 6"),
        ((0, 0, 0, 0), r"too many indices \(4\) for a 3-D array of shape \(4, 1, 6\)"),
        ((Ellipsis, 0, Ellipsis), "only one ellipsis"),
        ((1.5,), "index 1.5 is not valid"),
        (("a",), "index 'a' is not valid"),
    ],
)
def test_a_bad_index_is_an_index_error_naming_it(
    array_device: Device, key: Any, message: str
) -> None:
    t = on(array_device, np.ones(SHAPE, np.float32))
    with pytest.raises(IndexError, match=message):
        t[key]


# ---- integer arrays ---------------------------------------------------------------------


def test_integer_array_indices_match_numpy(array_device: Device) -> None:
    rng = np.random.default_rng(42)
    x = data(rng, (5, 3, 4), DType.F32)
    t = strided(array_device, x)
    rows = np.array([[0, -1, 2], [4, 1, -5]])
    cols = np.array([2, 0, -1])
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, INTEGERS, ARITHMETIC):
            i = on(array_device, rows.astype(dtype.numpy) if dtype.is_signed else rows % 5)
            want = x[rows if dtype.is_signed else rows % 5]
            expect(t[i], want, DType.F32, f"x[{dtype.value} array]")
        i, j = on(array_device, rows), on(array_device, cols)
        expect(t[i, j], x[rows, cols], DType.F32, "x[i, j] broadcast")
        expect(t[i, 1], x[rows, 1], DType.F32, "x[i, 1]")
        expect(t[-1, j, 3], x[-1, cols, 3], DType.F32, "x[-1, j, 3]")


def test_integer_arrays_with_slices_are_refused_plainly(array_device: Device) -> None:
    t = on(array_device, np.ones((3, 4), np.float32))
    i = on(array_device, np.array([0, 1]))
    with pytest.raises(IndexError, match="cannot be mixed with slices"):
        t[i, 1:]


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_take_matches_numpy(array_device: Device, axis: int) -> None:
    rng = np.random.default_rng(43)
    indices = np.array([[3, 0], [-1, 2]])
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, ALL, ARITHMETIC):
            x = data(rng, (4, 5, 6), dtype)
            got = zyx.take(strided(array_device, x), on(array_device, indices), axis=axis)
            expect(got, np.take(x, indices, axis=axis), dtype, f"take {dtype.value}")
        vector = data(rng, (7,), DType.I32)
        got = zyx.take(on(array_device, vector), on(array_device, np.array([6, -7, 0])))
        expect(got, vector[[6, -7, 0]], DType.I32, "take of a 1-D array without axis")


def test_take_needs_an_axis_beyond_1d_and_integer_indices(array_device: Device) -> None:
    t = on(array_device, np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="axis is required"):
        zyx.take(t, on(array_device, np.array([0])))
    with pytest.raises(TypeError, match="indices must be an integer array"):
        zyx.take(t, on(array_device, np.array([0.0])), axis=0)


@pytest.mark.parametrize("axis", [0, -1, 1])
def test_take_along_axis_matches_numpy_and_broadcasts(array_device: Device, axis: int) -> None:
    rng = np.random.default_rng(44)
    x = data(rng, (3, 4, 5), DType.F32)
    shape = [3, 4, 5]
    shape[axis] = 6
    indices = rng.integers(-x.shape[axis], x.shape[axis], shape)
    with Expect(array_device) as expect:
        got = zyx.take_along_axis(strided(array_device, x), on(array_device, indices), axis=axis)
        want = np.take_along_axis(x, indices % x.shape[axis], axis=axis)
        expect(got, want, DType.F32, "take_along_axis")
        shape[(axis + 1) % 3] = 1  # indices broadcast along another dim
        few = rng.integers(0, x.shape[axis], shape)
        got = zyx.take_along_axis(on(array_device, x), on(array_device, few), axis=axis)
        expect(got, np.take_along_axis(x, few, axis=axis), DType.F32, "broadcast indices")


# ---- x[key] = value ---------------------------------------------------------------------------


SET_KEYS: list[Any] = [
    (1,),
    (slice(None, None, -2),),
    (Ellipsis, slice(1, 5, 3)),
    (-1, 0, -1),
    (slice(1, 3), 0),
]


@pytest.mark.parametrize("key", SET_KEYS, ids=_ids)
def test_setitem_replaces_the_selected_region_on_every_dtype(
    array_device: Device, key: Any
) -> None:
    rng = np.random.default_rng(45)
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, ALL, ARITHMETIC):
            x = data(rng, SHAPE, dtype)
            region = x[key].shape
            value = data(rng, region[-1:] if region else (), dtype)  # broadcast along the rest
            t = strided(array_device, x)
            t[key] = on(array_device, value)
            want = x.copy()
            want[key] = value
            expect(t, want, dtype, f"{dtype.value} x[{key}] = array")
            scalar = True if dtype is DType.BOOL else (2.5 if dtype.is_float else 7)
            s = strided(array_device, x)
            s[key] = scalar
            want = x.copy()
            want[key] = scalar
            expect(s, want, dtype, f"{dtype.value} x[{key}] = {scalar}")


EMPTY_KEYS: list[Any] = [
    (slice(None, 0, 3),),
    (Ellipsis, slice(-2, -2)),
    (-1, slice(None), slice(4, 1)),
    (slice(1, None), 0, slice(0, 0, -1)),
]


@pytest.mark.parametrize("key", EMPTY_KEYS, ids=_ids)
def test_setitem_of_an_empty_region_changes_nothing(key: Any) -> None:
    """On the bounds-checked host (found by the array fuzzer): the kernel of an empty
    region loaded element 0 of the value, an array of none."""
    device = checked_host()
    rng = np.random.default_rng(46)
    with Expect(device) as expect:
        for dtype in claimed(device, ALL, ARITHMETIC):
            x = data(rng, SHAPE, dtype)
            region = x[key].shape
            assert 0 in region
            t = strided(device, x)
            t[key] = on(device, data(rng, region, dtype))
            expect(t, x, dtype, f"{dtype.value} x[{key}] = an empty array")


def test_setitem_of_a_whole_0d_array_survives_a_reshape(array_device: Device) -> None:
    """``x[...] = v`` on a 0-d array, then a reshape (``stack`` makes one): the reshape
    took the region (the identity view) for a view of ``x`` and read past the set."""
    x = on(array_device, np.float32(3.0)) * 1.0
    y = zyx.asarray(x, copy=True)
    y[...] = 8.0
    got = zyx.stack([y, x, zyx.flip(y)], axis=0)
    np.testing.assert_array_equal(got.numpy(), np.float32([8, 3, 8]))


def test_setitem_changes_only_the_array_it_is_called_on(array_device: Device) -> None:
    x = np.arange(6, dtype=np.float32)
    t = on(array_device, x)
    view = t[1:4]
    t[2] = -1.0
    with Expect(array_device) as expect:
        expect(view, x[1:4], DType.F32, "a view taken before")
        expect(t, np.array([0, 1, -1, 3, 4, 5]), DType.F32, "the array set")


def test_setitem_errors(array_device: Device) -> None:
    t = on(array_device, np.ones((3, 4), np.int32))
    with pytest.raises(ValueError, match=r"shapes \(2, 4\) and \(3,\) do not broadcast"):
        t[1:] = on(array_device, np.ones(3, np.int32))
    with pytest.raises(ValueError, match=r"a value of shape \(2, 2, 4\) does not fit \(2, 4\)"):
        t[1:] = on(array_device, np.ones((2, 2, 4), np.int32))
    with pytest.raises(TypeError, match="Python float does not mix with a int32"):
        t[0] = 1.5
    with pytest.raises(IndexError, match="out of bounds for axis 0 of size 3"):
        t[3] = 1
