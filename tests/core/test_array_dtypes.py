"""Data types and their functions: type promotion (the standard's tables, and zyx's
``TypeError`` where the standard leaves a pair unspecified), Python scalars, ``astype``,
``can_cast``, ``finfo``, ``iinfo``, ``isdtype``, ``result_type``, and the ``DTypeError``
of a dtype a device does not claim."""

from __future__ import annotations

import dataclasses
from itertools import product
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from array_support import ALL, ARITHMETIC, FLOATS, INTEGERS, Expect, claimed, data, on, reference

import zyx
from zyx.backend import Device
from zyx.dtypes import DType, DTypeCapability
from zyx.errors import DTypeError
from zyx.host.device import HostDevice
from zyx.host.pool import HostPool


def standard_promotion(a: DType, b: DType) -> DType | None:
    """The standard's promotion of ``a`` and ``b`` (numpy's, within a kind) or, where the
    standard defines none, ``None``; bfloat16 is zyx's: between float16 and float32."""
    if a is b:
        return a
    if DType.BOOL in (a, b) or a.is_float != b.is_float:
        return None
    if DType.BF16 in (a, b):
        other = b if a is DType.BF16 else a
        return DType.F64 if other is DType.F64 else DType.F32
    if DType.U64 in (a, b) and (a.is_signed or b.is_signed):
        return None  # numpy: float64
    return DType.from_numpy(np.promote_types(a.numpy, b.numpy))


@pytest.mark.parametrize("a", ALL, ids=lambda d: d.value)
def test_result_type_follows_the_standards_tables(a: DType) -> None:
    for b in ALL:
        want = standard_promotion(a, b)
        if want is None:
            with pytest.raises(TypeError, match="do not promote|no common dtype"):
                zyx.result_type(a, b)
        else:
            assert zyx.result_type(a, b) is want, (a, b)
            assert zyx.result_type(b, a) is want, (b, a)


def test_result_type_of_many_and_of_arrays_and_scalars(array_device: Device) -> None:
    x = on(array_device, np.ones(2, np.int16))
    assert zyx.result_type(zyx.int8, zyx.uint8, zyx.int32) is zyx.int32
    assert zyx.result_type(x, zyx.uint8) is zyx.int16
    assert zyx.result_type(x, 7) is zyx.int16  # a Python scalar takes the array's dtype
    assert zyx.result_type(zyx.float16, 1.0, 2) is zyx.float16
    assert zyx.result_type(zyx.bool, True) is zyx.bool
    with pytest.raises(TypeError, match="Python float does not mix with a int16"):
        zyx.result_type(x, 1.5)
    with pytest.raises(TypeError, match="at least one array or dtype"):
        zyx.result_type(1, 2.0)


def test_operators_promote_mixed_integer_arrays_with_their_values(array_device: Device) -> None:
    rng = np.random.default_rng(20)
    pairs = [(a, b) for a, b in product(INTEGERS, INTEGERS) if standard_promotion(a, b)]
    with Expect(array_device) as expect:
        for a, b in pairs:
            if not {a, b} <= set(claimed(array_device, INTEGERS, ARITHMETIC)):
                continue
            x, y = data(rng, (2, 3), a), data(rng, (3,), b)
            out = standard_promotion(a, b)
            assert out is not None
            with np.errstate(over="ignore"):
                want = x.astype(out.numpy) + y.astype(out.numpy)
            got = zyx.add(on(array_device, x), on(array_device, y))
            expect(got, want, out, f"{a.value} + {b.value}")


def test_operators_promote_mixed_float_arrays(array_device: Device) -> None:
    rng = np.random.default_rng(21)
    with Expect(array_device) as expect:
        for a, b in product(claimed(array_device, FLOATS, ARITHMETIC), repeat=2):
            out = standard_promotion(a, b)
            if out is None or not array_device.info.supports(out, ARITHMETIC):
                continue
            x, y = data(rng, (2, 3), a), data(rng, (3,), b)
            got = zyx.multiply(on(array_device, x), on(array_device, y))
            expect(got, reference(x) * reference(y), out, f"{a.value} * {b.value}")


# ---- astype ------------------------------------------------------------------------------


def _cast_sources(dtype: DType) -> np.ndarray[Any, Any]:
    """Values every dtype holds (small integers, with fractions among the floats, which
    a cast to an integer truncates toward zero)."""
    if dtype is DType.BOOL:
        return np.array([True, False, True, True])
    values = np.array([1, 7, 100, 3, 0, 42, 99, 64])
    if dtype.is_float:
        return dtype.round_array(values + np.array([0.25, 0.5, 0.75, 0, 0.5, 0.25, 0.75, 0.5]))
    if dtype.is_signed:
        values[::3] *= -1
    return values.astype(dtype.numpy)


@pytest.mark.parametrize("source", ALL, ids=lambda d: d.value)
def test_astype_converts_to_every_dtype(array_device: Device, source: DType) -> None:
    if not array_device.info.supports(source, ARITHMETIC):
        pytest.skip(f"{array_device.name} claims no {source.value}")
    x = _cast_sources(source)
    t = on(array_device, x)
    with Expect(array_device) as expect:
        for target in claimed(array_device, ALL, DTypeCapability.STORAGE):
            if target.is_int and not target.is_signed and source.is_signed:
                values = np.abs(x)  # a negative to unsigned is implementation-defined
                got = zyx.abs(t).astype(target)
            else:
                values, got = x, t.astype(target)
            want = _numpy_cast(values, target)
            expect(got, want, target, f"{source.value} -> {target.value}")


def _numpy_cast(values: Any, target: DType) -> Any:
    if target is DType.BOOL:
        return values != 0
    if target.is_float:
        return reference(values).astype(np.float64)
    return np.trunc(reference(values)).astype(target.numpy)


def test_astype_without_copy_of_the_same_dtype_is_the_same_array(array_device: Device) -> None:
    x = on(array_device, np.ones(3, np.float32))
    assert x.astype(zyx.float32, copy=False) is x
    copied = x.astype(zyx.float32)
    assert copied is not x and copied.dtype is zyx.float32


def test_astype_takes_only_zyx_dtypes(array_device: Device) -> None:
    x = on(array_device, np.ones(3, np.float32))
    with pytest.raises(TypeError, match="must be a zyx dtype"):
        x.astype(np.float64)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="complex dtypes are not supported"):
        x.astype("complex64")  # type: ignore[arg-type]


# ---- can_cast, finfo, iinfo, isdtype ---------------------------------------------------------


@pytest.mark.parametrize("a", ALL, ids=lambda d: d.value)
def test_can_cast_is_promotion_to_the_target(a: DType) -> None:
    for b in ALL:
        assert zyx.can_cast(a, b) is (standard_promotion(a, b) is b), (a, b)
    assert zyx.can_cast(zyx.asarray(np.ones(1, np.int8)), zyx.int64)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.value)
def test_finfo_matches_numpy(dtype: DType) -> None:
    want = ml_dtypes.finfo(dtype.numpy)
    got = zyx.finfo(dtype)
    assert (got.bits, got.dtype) == (want.bits, dtype)
    assert (got.eps, got.max, got.min) == (float(want.eps), float(want.max), float(want.min))
    assert got.smallest_normal == float(want.smallest_normal)
    assert zyx.finfo(zyx.asarray(np.ones(1, dtype.numpy))).dtype is dtype


@pytest.mark.parametrize("dtype", INTEGERS, ids=lambda d: d.value)
def test_iinfo_matches_numpy(dtype: DType) -> None:
    want = np.iinfo(dtype.numpy)
    got = zyx.iinfo(dtype)
    assert (got.bits, got.min, got.max, got.dtype) == (want.bits, want.min, want.max, dtype)


def test_finfo_and_iinfo_refuse_the_other_kind() -> None:
    with pytest.raises(TypeError, match="finfo needs a floating dtype, got int32"):
        zyx.finfo(zyx.int32)
    with pytest.raises(TypeError, match="iinfo needs an integer dtype, got float32"):
        zyx.iinfo(zyx.float32)


@pytest.mark.parametrize(
    ("kind", "members"),
    [
        ("bool", {DType.BOOL}),
        ("signed integer", {DType.I8, DType.I16, DType.I32, DType.I64}),
        ("unsigned integer", {DType.U8, DType.U16, DType.U32, DType.U64}),
        ("integral", set(INTEGERS)),
        ("real floating", set(FLOATS)),
        ("complex floating", set()),
        ("numeric", set(INTEGERS) | set(FLOATS)),
        (zyx.float32, {DType.F32}),
        (("bool", zyx.int8, "real floating"), {DType.BOOL, DType.I8, *FLOATS}),
    ],
)
def test_isdtype_kinds(kind: Any, members: set[DType]) -> None:
    assert {d for d in ALL if zyx.isdtype(d, kind)} == members


# ---- a dtype the device lacks ------------------------------------------------------------


@pytest.fixture
def without_f64_or_f16_math() -> HostDevice:
    """A host device that claims no float64 and only storage and arithmetic of float16."""
    device = HostDevice(HostPool())
    dtypes = dict(device.info.dtypes)
    del dtypes[DType.F64]
    dtypes[DType.F16] = DTypeCapability.STORAGE | DTypeCapability.ARITHMETIC
    device.info = dataclasses.replace(device.info, dtypes=dtypes)
    return device


def test_a_dtype_the_device_lacks_is_a_dtype_error_at_the_op(
    without_f64_or_f16_math: HostDevice,
) -> None:
    device = without_f64_or_f16_math
    f32 = on(device, np.ones(2, np.float32))
    f16 = on(device, np.ones(2, np.float16))
    ops = {
        "asarray": lambda: zyx.asarray(np.ones(2), device=device),
        "zeros": lambda: zyx.zeros(2, dtype=zyx.float64, device=device),
        "astype": lambda: f32.astype(zyx.float64),
        "arange": lambda: zyx.arange(3, dtype=zyx.float64, device=device),
    }
    for name, op in ops.items():
        message = f"{name}: host .* has no .*float64; it supports bool, uint8, "
        with pytest.raises(DTypeError, match=message):
            op()
    with pytest.raises(DTypeError, match="exp: host .* has no math functions on float16"):
        zyx.exp(f16)
    assert zyx.add(f16, f16).dtype is zyx.float16  # arithmetic it claims
    assert "float64" not in zyx.__array_namespace_info__().dtypes(device=device)
