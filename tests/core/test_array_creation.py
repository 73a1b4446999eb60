"""Creation functions against numpy: ``asarray`` from every source and dtype, the default
dtypes (float32 for Python floats, int64 for ints), ``arange``, ``linspace``, ``eye``,
``full`` and its kin, ``tril``/``triu`` and ``meshgrid``; shapes with size-0 and size-1
dims; errors at the call."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest
from array_support import ALL, ARITHMETIC, FLOATS, Expect, claimed, data, on, strided

import zyx
from zyx.backend import Device
from zyx.dtypes import DType, DTypeCapability


def test_asarray_keeps_a_numpy_arrays_values_and_dtype(array_device: Device) -> None:
    rng = np.random.default_rng(30)
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, ALL, ARITHMETIC):
            for shape in ((2, 3), (1,), (), (4, 0)):
                x = data(rng, shape, dtype)
                got = zyx.asarray(x, device=array_device)
                assert got.device is array_device
                expect(got, x, dtype, f"asarray {dtype.value} {shape}")


@pytest.mark.parametrize(
    ("obj", "dtype", "shape"),
    [
        ([1.5, 2, 3], DType.F32, (3,)),  # Python floats: the default float32
        ([[1, 2], [3, 4]], DType.I64, (2, 2)),
        ([True, False], DType.BOOL, (2,)),
        (2.5, DType.F32, ()),
        (7, DType.I64, ()),
        ([[1, 2], [3.5, 4]], DType.F32, (2, 2)),
        ([], DType.F32, (0,)),
    ],
)
def test_asarray_of_python_numbers_takes_the_default_dtypes(
    array_device: Device, obj: Any, dtype: DType, shape: tuple[int, ...]
) -> None:
    got = zyx.asarray(obj, device=array_device)
    assert (got.dtype, got.shape) == (dtype, shape)
    np.testing.assert_array_equal(got.numpy(), np.asarray(obj, dtype=dtype.numpy))


def test_asarray_with_a_dtype_converts(array_device: Device) -> None:
    def make(values: Any, dtype: DType) -> Any:
        return zyx.asarray(values, dtype=dtype, device=array_device)

    with Expect(array_device) as expect:
        expect(make([1, 2], DType.F64), [1, 2], DType.F64, "ints to float64")
        expect(make(np.array([1.7, -2.2]), DType.I8), [1, -2], DType.I8, "floats to int8")
        expect(make([1.7, -2.2, True], DType.I16), [1, -2, 1], DType.I16, "Python numbers to i16")
        expect(make([-128, 255], DType.I16), [-128, 255], DType.I16, "in range")
        thirds = np.array([0.1, 1 / 3])
        expect(make(thirds, DType.BF16), DType.BF16.round_array(thirds), DType.BF16, "bf16")


def test_asarray_rounds_past_a_floats_range_to_infinity_without_a_warning(
    array_device: Device,
) -> None:
    """As a device's ``astype`` does: the rounding IEEE defines is no event to warn of
    (numpy's cast on the host, which zyx makes on the user's behalf, warns)."""
    floats = claimed(array_device, (DType.F32, DType.BF16, DType.F16), DTypeCapability.STORAGE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for data in ([1e300, -1e300], np.array([1e300, -1e300])):
            for dtype in floats:
                got = zyx.asarray(data, dtype=dtype, device=array_device)
                np.testing.assert_array_equal(got.numpy().astype(np.float64), [np.inf, -np.inf])


def test_asarray_of_an_array_is_the_array_unless_asked_for_a_copy(array_device: Device) -> None:
    x = on(array_device, np.ones(3, np.float32))
    assert zyx.asarray(x) is x
    assert zyx.asarray(x, copy=True) is not x
    converted = zyx.asarray(x, dtype=zyx.int32)
    assert converted.dtype is zyx.int32
    with pytest.raises(ValueError, match="dtype change needs a copy, and copy=False"):
        zyx.asarray(x, dtype=zyx.int32, copy=False)


def test_asarray_refuses_what_is_not_real_numbers(array_device: Device) -> None:
    with pytest.raises(TypeError, match="complex data is not supported"):
        zyx.asarray(np.array([1j]), device=array_device)
    with pytest.raises(TypeError, match="numbers are needed"):
        zyx.asarray(np.array(["a"]), device=array_device)
    with pytest.raises(ValueError, match="copy=False cannot be met"):
        zyx.asarray(np.ones(2), copy=False, device=array_device)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((5,), {}),
        ((2, 11, 3), {}),
        ((5, -3, -2), {}),
        ((3, 3), {}),
        ((0.5, 3.0), {}),
        ((1.0, 0.0, -0.25), {}),
        ((4,), {"dtype": DType.U8}),
        ((-2, 6), {"dtype": DType.F64}),
    ],
)
def test_arange_matches_numpy(array_device: Device, args: Any, kwargs: Any) -> None:
    dtype = kwargs.get("dtype")
    if dtype is not None and not array_device.info.supports(dtype, ARITHMETIC):
        pytest.skip(f"{array_device.name} claims no {dtype.value}")
    got = zyx.arange(*args, device=array_device, **kwargs)
    floats = any(isinstance(a, float) for a in args)
    want_dtype = dtype or (DType.F32 if floats else DType.I64)
    want = np.arange(*args, dtype=np.float64 if want_dtype.is_float else want_dtype.numpy)
    with Expect(array_device, per_kernel=1) as expect:
        expect(got, want, want_dtype, f"arange{args}")


@pytest.mark.parametrize(
    ("start", "stop", "num", "endpoint"),
    [(0, 1, 5, True), (0, 1, 4, False), (2, 3, 1, True), (0, 1, 0, True), (-3.5, 7.25, 23, True)],
)
def test_linspace_matches_numpy_and_ends_at_stop(
    array_device: Device, start: float, stop: float, num: int, endpoint: bool
) -> None:
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, FLOATS, ARITHMETIC):
            got = zyx.linspace(
                start, stop, num, endpoint=endpoint, dtype=dtype, device=array_device
            )
            want = np.linspace(start, stop, num, endpoint=endpoint)
            expect(got, want, dtype, f"linspace {dtype.value}")
    default = zyx.linspace(start, stop, num, endpoint=endpoint, device=array_device)
    assert default.dtype is zyx.float32
    if endpoint and num > 1:
        assert default.numpy()[-1] == np.float32(stop)


def test_linspace_makes_only_floats(array_device: Device) -> None:
    with pytest.raises(TypeError, match="linspace makes floating arrays"):
        zyx.linspace(0, 1, 3, dtype=zyx.int32, device=array_device)


@pytest.mark.parametrize(
    ("rows", "cols", "k"), [(3, None, 0), (3, 5, 1), (4, 2, -1), (2, 2, 3), (0, 3, 0)]
)
def test_eye_matches_numpy(array_device: Device, rows: int, cols: int | None, k: int) -> None:
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, (DType.F32, DType.I32, DType.BOOL), ARITHMETIC):
            got = zyx.eye(rows, cols, k=k, dtype=dtype, device=array_device)
            expect(got, np.eye(rows, cols, k=k, dtype=dtype.numpy), dtype, f"eye {dtype.value}")
    assert zyx.eye(2, device=array_device).dtype is zyx.float32


@pytest.mark.parametrize(("value", "dtype"), [(2.5, DType.F32), (3, DType.I64), (True, DType.BOOL)])
def test_full_takes_its_dtype_from_the_fill_value(
    array_device: Device, value: Any, dtype: DType
) -> None:
    got = zyx.full((2, 1, 3), value, device=array_device)
    assert got.dtype is dtype
    np.testing.assert_array_equal(got.numpy(), np.full((2, 1, 3), value, dtype.numpy))


def test_zeros_ones_empty_and_full_in_every_dtype(array_device: Device) -> None:
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, ALL, ARITHMETIC):
            for name, value in (("zeros", 0), ("ones", 1), ("empty", 0)):
                got = getattr(zyx, name)((2, 3), dtype=dtype, device=array_device)
                expect(got, np.full((2, 3), value, dtype.numpy), dtype, f"{name} {dtype.value}")
            seven = True if dtype is DType.BOOL else 7
            got = zyx.full(4, seven, dtype=dtype, device=array_device)
            expect(got, np.full(4, seven, dtype.numpy), dtype, f"full {dtype.value}")
    assert zyx.zeros((0, 2), device=array_device).numpy().shape == (0, 2)
    assert zyx.ones((), device=array_device).dtype is zyx.float32


def test_full_of_other_values_and_shapes_reuses_its_kernels(array_device: Device) -> None:
    """``full``'s value is a kernel argument, not a constant baked into the kernel: after
    the first, other values (and sizes) compile nothing; the dtype's rounding holds."""
    values = [2.5, -1e30, 0.1, 7.0]
    expect = [np.full((3, n), v, np.float32) * 2 for n, v in enumerate(values, 2)]
    first = zyx.full((3, 9), 1.5, device=array_device) * 2
    np.testing.assert_array_equal(first.numpy(), np.full((3, 9), 3.0, np.float32))
    before = zyx.stats()
    for (n, value), want in zip(enumerate(values, 2), expect):
        np.testing.assert_array_equal(
            (zyx.full((3, n), value, device=array_device) * 2).numpy(), want
        )
        like = zyx.full_like(zyx.ones((3, n), device=array_device), value) * 2
        np.testing.assert_array_equal(like.numpy(), want)
    assert (zyx.stats() - before).kernels_compiled == 0


def test_a_number_realized_as_a_0_d_array_gets_its_own_buffer(array_device: Device) -> None:
    """A 0-D ``full`` (a kernel argument until realized) and ``any`` of nothing, realized
    alone, with an array computed from them, and read after: a kernel writes each number
    (as a leaf it was handed to the kernel as its output buffer, and refused)."""
    half = zyx.full((), 2.5, device=array_device)
    nothing = zyx.any(zyx.zeros((0,), device=array_device))
    twice = half * 2
    zyx.realize(half, twice, nothing)
    assert (float(half), float(twice), bool(nothing)) == (2.5, 5.0, False)
    assert int(zyx.full((), 7, dtype=zyx.int8, device=array_device) + 2) == 9


def test_the_like_functions_take_shape_dtype_and_device_of_their_array(
    array_device: Device,
) -> None:
    x = strided(array_device, np.ones((2, 3), np.int16))
    with Expect(array_device) as expect:
        expect(zyx.zeros_like(x), np.zeros((2, 3)), DType.I16, "zeros_like")
        expect(zyx.ones_like(x, dtype=zyx.float32), np.ones((2, 3)), DType.F32, "ones_like")
        expect(zyx.full_like(x, 9), np.full((2, 3), 9), DType.I16, "full_like")
        expect(zyx.empty_like(x), np.zeros((2, 3)), DType.I16, "empty_like")
    assert zyx.zeros_like(x).device is array_device


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda d: zyx.zeros((2, -1), device=d), ValueError, "negative dimensions"),
        (lambda d: zyx.full(2, 1.5, dtype=zyx.int32, device=d), TypeError, "full: a float"),
        (lambda d: zyx.full(2, 300, dtype=zyx.uint8, device=d), OverflowError, "full: 300 is out"),
        (lambda d: zyx.arange(0, 5, 0, device=d), ValueError, "step must not be zero"),
        (lambda d: zyx.ones(2, dtype=np.float32, device=d), TypeError, "must be a zyx dtype"),
        (lambda d: zyx.tril(zyx.ones(3, device=d)), ValueError, "tril needs at least 2 dims"),
        (lambda d: zyx.arange(0, math.nan, device=d), ValueError, "arange: .* must be finite"),
        (lambda d: zyx.arange(0, 1e20, device=d), ValueError, "more than an array can hold"),
        (lambda d: zyx.ones((2**32, 2**32), device=d), ValueError, "more than an array can"),
        (lambda d: zyx.linspace(0, 1, 2**64, device=d), ValueError, "more than an array can"),
        (lambda d: zyx.from_dlpack(3), TypeError, "needs a DLPack producer"),
        (lambda d: zyx.asarray(300, dtype=zyx.uint8, device=d), OverflowError, "300 out of"),
        (lambda d: zyx.asarray([-1], dtype=zyx.uint16, device=d), OverflowError, "-1 out of"),
        (lambda d: zyx.asarray([1.0, math.nan], dtype=zyx.int32, device=d), ValueError, "NaN"),
        (lambda d: zyx.asarray(math.inf, dtype=zyx.int64, device=d), OverflowError, "infinity"),
        (
            lambda d: zyx.realize(zyx.ones(2, device=d), "a"),
            TypeError,
            "zyx arrays, got Tensor, str",
        ),
        (lambda d: zyx.roll(zyx.ones(3, device=d), 1.5), TypeError, "'float' object cannot be"),
    ],
)
def test_bad_creation_arguments_are_errors_at_the_call(
    array_device: Device, call: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        call(array_device)


@pytest.mark.parametrize("k", [0, 1, -2])
def test_tril_and_triu_match_numpy_on_batches_of_strided_matrices(
    array_device: Device, k: int
) -> None:
    rng = np.random.default_rng(31)
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, (DType.F32, DType.I64, DType.BOOL), ARITHMETIC):
            x = data(rng, (2, 3, 4), dtype)
            t = strided(array_device, x)
            expect(zyx.tril(t, k=k), np.tril(x, k), dtype, f"tril {dtype.value}")
            expect(zyx.triu(t, k=k), np.triu(x, k), dtype, f"triu {dtype.value}")


@pytest.mark.parametrize("indexing", ["xy", "ij"])
def test_meshgrid_matches_numpy(array_device: Device, indexing: str) -> None:
    rng = np.random.default_rng(32)
    arrays = [data(rng, (n,), DType.F32) for n in (3, 2, 4)]
    with Expect(array_device) as expect:
        for count in (1, 2, 3):
            got = zyx.meshgrid(*(on(array_device, a) for a in arrays[:count]), indexing=indexing)
            want = np.meshgrid(*arrays[:count], indexing=indexing)
            assert len(got) == count
            for i, (g, w) in enumerate(zip(got, want)):
                expect(g, w, DType.F32, f"meshgrid of {count}, {i}")


def test_meshgrid_refuses_mixed_dtypes_and_other_than_1d(array_device: Device) -> None:
    a, b = on(array_device, np.ones(2, np.float32)), on(array_device, np.ones(2, np.int32))
    with pytest.raises(TypeError, match="one dtype"):
        zyx.meshgrid(a, b)
    with pytest.raises(ValueError, match="1-D arrays"):
        zyx.meshgrid(on(array_device, np.ones((2, 2))))


def test_every_creation_function_takes_device(array_device: Device) -> None:
    made = [
        zyx.asarray([1.0], device=array_device), zyx.arange(3, device=array_device),
        zyx.linspace(0, 1, 3, device=array_device), zyx.eye(2, device=array_device),
        zyx.zeros(2, device=array_device), zyx.ones(2, device=array_device),
        zyx.empty(2, device=array_device), zyx.full(2, 1.0, device=array_device),
        zyx.asarray(np.ones(2), device=array_device.name),
    ]  # fmt: skip
    assert all(m.device is array_device for m in made)
    assert zyx.zeros(2).device is zyx.device()
