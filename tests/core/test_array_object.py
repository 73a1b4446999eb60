"""The array object: every operator (reflected and in place too) against numpy, the
realization points (``bool``, ``int``, ``float``, ``operator.index``, ``numpy()``,
``np.asarray``, ``repr``), attributes, ``__array_namespace__``, ``.T``/``.mT``,
``to_device`` and the methods numpy users reach for."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import pytest
from array_support import ARITHMETIC, Expect, claimed, data, on, reference, strided

import zyx
from zyx.backend import Device
from zyx.dtypes import DType
from zyx.tensor import Tensor

ARITHMETIC_OPERATORS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow,
}  # fmt: skip
BITWISE_OPERATORS = {
    "&": operator.and_, "|": operator.or_, "^": operator.xor,
    "<<": operator.lshift, ">>": operator.rshift,
}  # fmt: skip
COMPARISON_OPERATORS = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne,
}  # fmt: skip
INPLACE = {
    "+": operator.iadd, "-": operator.isub, "*": operator.imul, "/": operator.itruediv,
    "//": operator.ifloordiv, "%": operator.imod, "**": operator.ipow, "&": operator.iand,
    "|": operator.ior, "^": operator.ixor, "<<": operator.ilshift, ">>": operator.irshift,
}  # fmt: skip


def _pair(rng: np.random.Generator, dtype: DType, symbol: str) -> tuple[Any, Any]:
    """Operands for ``symbol``: positive bases for a float ``**``, small exponents and shift
    counts for integers."""
    if dtype.is_float:  # both positive for **: each is the other's base too (reflected)
        low, high = (0.5, 2.0) if symbol == "**" else (None, None)
        return data(rng, (2, 3), dtype, low, high), data(rng, (3,), dtype, low, high)
    top = 8 * dtype.itemsize - 1 if symbol in ("<<", ">>") else 4 if symbol == "**" else None
    low = 1 if dtype.is_signed else None
    return data(rng, (2, 3), dtype, low), data(rng, (3,), dtype, 0 if top else low, top)


def _numpy(op: Any, a: Any, b: Any, dtype: DType) -> Any:
    with np.errstate(all="ignore"):
        return op(reference(a), reference(b)) if dtype.is_float else op(a, b)


@pytest.mark.parametrize("symbol", sorted(ARITHMETIC_OPERATORS))
def test_arithmetic_operators_reflected_and_with_scalars(array_device: Device, symbol: str) -> None:
    op = ARITHMETIC_OPERATORS[symbol]
    rng = np.random.default_rng(70)
    dtypes = [DType.F32, DType.I32, DType.U8] if symbol != "/" else [DType.F32, DType.F16]
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, dtypes, ARITHMETIC):
            a, b = _pair(rng, dtype, symbol)
            x, y = strided(array_device, a), on(array_device, b)
            expect(op(x, y), _numpy(op, a, b, dtype), dtype, f"x {symbol} y {dtype.value}")
            expect(op(y, x), _numpy(op, b, a, dtype), dtype, f"y {symbol} x {dtype.value}")
            scalar = 2.0 if dtype.is_float else 2
            s = np.asarray(scalar, a.dtype)
            expect(op(x, scalar), _numpy(op, a, s, dtype), dtype, f"x {symbol} 2 {dtype.value}")
            expect(op(scalar, x), _numpy(op, s, a, dtype), dtype, f"2 {symbol} x {dtype.value}")


@pytest.mark.parametrize("symbol", sorted(BITWISE_OPERATORS))
def test_bitwise_operators(array_device: Device, symbol: str) -> None:
    op = BITWISE_OPERATORS[symbol]
    rng = np.random.default_rng(71)
    dtypes = [DType.I16, DType.U32, DType.BOOL] if symbol in "&|^" else [DType.I16, DType.U32]
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, dtypes, ARITHMETIC):
            a, b = _pair(rng, dtype, symbol)
            x, y = strided(array_device, a), on(array_device, b)
            expect(op(x, y), op(a, b), dtype, f"x {symbol} y {dtype.value}")
            scalar = True if dtype is DType.BOOL else 3
            expect(op(scalar, x), op(np.asarray(scalar, a.dtype), a), dtype, f"3 {symbol} x")


def test_comparison_operators_give_bool(array_device: Device) -> None:
    rng = np.random.default_rng(72)
    with Expect(array_device) as expect:
        for symbol, op in COMPARISON_OPERATORS.items():
            for dtype in claimed(array_device, [DType.F32, DType.I8], ARITHMETIC):
                a, b = data(rng, (2, 3), dtype), data(rng, (3,), dtype)
                b[0] = a[0, 0]  # an equal pair
                x, y = on(array_device, a), on(array_device, b)
                expect(op(x, y), op(a, b), DType.BOOL, f"x {symbol} y {dtype.value}")
                expect(op(x, 1), op(a, 1), DType.BOOL, f"x {symbol} 1 {dtype.value}")


def test_unary_operators_and_matmul(array_device: Device) -> None:
    rng = np.random.default_rng(73)
    a, b = data(rng, (2, 3), DType.F32), data(rng, (3, 4), DType.F32)
    i = data(rng, (5,), DType.I16, -100, 100)
    x = strided(array_device, a)
    with Expect(array_device) as expect:
        expect(-x, -a, DType.F32, "-x")
        expect(+x, a, DType.F32, "+x")
        expect(abs(x), np.abs(a), DType.F32, "abs(x)")
        expect(~on(array_device, i), ~i, DType.I16, "~x")
        expect(x @ on(array_device, b), reference(a) @ reference(b), DType.F32, "x @ y")
        expect(
            on(array_device, b).mT @ x.mT, reference(b).T @ reference(a).T, DType.F32, "y.mT @ x.mT"
        )


@pytest.mark.parametrize("symbol", sorted(INPLACE))
def test_in_place_operators_keep_the_array_and_its_dtype(array_device: Device, symbol: str) -> None:
    op, plain = INPLACE[symbol], {**ARITHMETIC_OPERATORS, **BITWISE_OPERATORS}[symbol]
    dtype = DType.F32 if symbol == "/" else DType.I32
    rng = np.random.default_rng(74)
    a, b = _pair(rng, dtype, symbol)
    x = on(array_device, a)
    before = x
    x = op(x, on(array_device, b))
    assert x is before and x.dtype is dtype
    with Expect(array_device) as expect:
        expect(x, _numpy(plain, a, b, dtype), dtype, f"x {symbol}= y")


def test_in_place_operators_refuse_to_change_dtype_or_shape(array_device: Device) -> None:
    x = on(array_device, np.ones(3, np.int8))
    with pytest.raises(TypeError, match="would change int8"):
        x += on(array_device, np.ones(3, np.int16))
    with pytest.raises(TypeError, match=r"would change .*\[3\] into .*\[2, 3\]"):
        x += on(array_device, np.ones((2, 3), np.int8))
    with pytest.raises(TypeError, match="Python float does not mix"):
        x += 1.5
    with pytest.raises(TypeError, match=r"would change float32\[3\] into float32\[2\]"):
        f = on(array_device, np.ones(3, np.float32))
        f @= on(array_device, np.ones((3, 2), np.float32))


def test_operators_with_other_types_are_not_implemented(array_device: Device) -> None:
    x = on(array_device, np.ones(3, np.float32))
    with pytest.raises(TypeError, match="unsupported operand"):
        x + "a"  # type: ignore[operator]
    assert (x == None) is False  # noqa: E711 - Python's fallback: not equal
    with pytest.raises(TypeError, match="unhashable"):
        hash(x)


def test_numpy_arrays_do_not_mix_and_numpy_scalars_do(array_device: Device) -> None:
    """An ndarray operand is a TypeError on either side and in numpy's ufuncs (numpy would
    otherwise compute on a copy and give an ndarray); a numpy scalar counts as the Python
    number it holds."""
    x = on(array_device, np.arange(3, dtype=np.float32))
    host = np.ones(3, np.float32)
    for mixed in (lambda: x + host, lambda: host + x, lambda: np.add(host, x), lambda: host < x):
        with pytest.raises(TypeError, match="numpy array|does not support ufuncs"):
            mixed()
    got = x * np.float32(2) + np.int64(1)
    assert isinstance(got, Tensor) and got.dtype is DType.F32
    np.testing.assert_array_equal(got.numpy(), [1, 3, 5])


# ---- realization points --------------------------------------------------------------------


def test_python_numbers_from_one_element_arrays(array_device: Device) -> None:
    assert float(on(array_device, np.float32(2.5))) == 2.5
    assert float(on(array_device, np.int64(3))) == 3.0
    assert int(on(array_device, np.float64(-2.7))) == -2
    assert int(on(array_device, np.array([7], np.uint8))) == 7
    assert bool(on(array_device, np.float32(0.0))) is False
    assert bool(on(array_device, np.array([[1]], np.int16))) is True
    assert complex(on(array_device, np.float32(1.5))) == 1.5 + 0j
    assert operator.index(on(array_device, np.int32(4))) == 4
    assert [10, 20, 30, 40, 50][on(array_device, np.int64(-1))] == 50
    assert float(zyx.sum(on(array_device, np.ones(4, np.float32)))) == 4.0  # realizes the sum


def test_python_numbers_refuse_what_the_standard_refuses(array_device: Device) -> None:
    with pytest.raises(
        TypeError, match=r"only an array of one element converts to bool, got shape \(2,\)"
    ):
        bool(on(array_device, np.ones(2, bool)))
    with pytest.raises(OverflowError):
        int(on(array_device, np.float32(np.inf)))
    with pytest.raises(ValueError):
        int(on(array_device, np.float32(np.nan)))
    with pytest.raises(TypeError, match="only integer arrays can be used as an index"):
        operator.index(on(array_device, np.float32(1.0)))
    with pytest.raises(TypeError, match="only integer arrays can be used as an index"):
        operator.index(on(array_device, np.bool_(True)))


def test_numpy_and_np_asarray_copy_the_values_to_the_host(array_device: Device) -> None:
    a = data(np.random.default_rng(75), (2, 3), DType.F16)
    x = strided(array_device, a) * 1
    assert isinstance(x.numpy(), np.ndarray)
    np.testing.assert_array_equal(x.numpy(), a)
    np.testing.assert_array_equal(np.asarray(x), a)
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    assert x.numpy() is not x.numpy()
    with pytest.raises(ValueError, match="copy=False cannot be honoured"):
        x.__array__(copy=False)


def test_repr_shows_values_dtype_and_device(array_device: Device) -> None:
    x = on(array_device, np.array([[1.5, -2.0], [3.25, 4.0]], np.float32))
    name = array_device.name
    assert repr(x) == (
        "Tensor([[ 1.5 , -2.  ],\n"
        "        [ 3.25,  4.  ]], dtype=zyx.float32, device=" + repr(name) + ")"
    )
    assert repr(x[0, 0]) == f"Tensor(1.5, dtype=zyx.float32, device={name!r})"
    assert repr(on(array_device, np.zeros((0, 3), np.int8))) == (
        f"Tensor([], shape=(0, 3), dtype=zyx.int8, device={name!r})"
    )
    assert str(x + 1) == str(np.array([[2.5, -1.0], [4.25, 5.0]], np.float32))


def test_len_and_iteration(array_device: Device) -> None:
    a = np.arange(6, dtype=np.int32).reshape(3, 2)
    x = on(array_device, a)
    assert len(x) == 3
    assert [r.numpy().tolist() for r in x] == a.tolist()
    with pytest.raises(TypeError, match="len"):
        len(on(array_device, np.int32(1)))


# ---- attributes and methods ----------------------------------------------------------------


def test_attributes(array_device: Device) -> None:
    x = on(array_device, np.ones((2, 0, 3), np.uint16))
    assert (x.dtype, x.shape, x.ndim, x.size, x.device) == (
        zyx.uint16,
        (2, 0, 3),
        3,
        0,
        array_device,
    )
    assert x.__array_namespace__() is zyx
    assert x.__array_namespace__(api_version="2024.12") is zyx
    with pytest.raises(ValueError, match="2024.12, not '2021.12'"):
        x.__array_namespace__(api_version="2021.12")


def test_transposes(array_device: Device) -> None:
    a = data(np.random.default_rng(76), (2, 3, 4), DType.F32)
    x = on(array_device, a)
    with Expect(array_device) as expect:
        expect(x[0].T, a[0].T, DType.F32, "x.T")
        expect(x.mT, np.swapaxes(a, -1, -2), DType.F32, "x.mT")
    with pytest.raises(ValueError, match="x.T needs a 2-D array, got 3-D; use x.mT"):
        _ = x.T


def test_to_device_moves_between_devices() -> None:
    devices = zyx.devices()
    if len(devices) < 2:
        pytest.skip("one device here: nowhere to move to")
    a = np.arange(5, dtype=np.float32)
    x = on(devices[0], a)
    assert x.to_device(devices[0]) is x
    before = zyx.stats()
    moved = (x * 2).to_device(devices[1].name) + 1
    assert moved.device is devices[1]
    np.testing.assert_array_equal(moved.numpy(), a * 2 + 1)
    assert (zyx.stats() - before).copies == 1
    with pytest.raises(ValueError, match="stream must be None"):
        x.to_device(devices[1], stream=1)


METHODS: dict[str, tuple[Any, Any]] = {
    "sum": (lambda x: x.sum(axis=1), lambda a: a.sum(axis=1)),
    "prod": (lambda x: x.prod(), lambda a: a.prod()),
    "mean": (lambda x: x.mean(axis=-1, keepdims=True), lambda a: a.mean(-1, keepdims=True)),
    "var": (lambda x: x.var(correction=1), lambda a: a.var(ddof=1)),
    "std": (lambda x: x.std(axis=0), lambda a: a.std(0)),
    "max": (lambda x: x.max(axis=0), lambda a: a.max(0)),
    "min": (lambda x: x.min(), lambda a: a.min()),
    "argmax": (lambda x: x.argmax(axis=1), lambda a: a.argmax(1)),
    "argmin": (lambda x: x.argmin(), lambda a: a.argmin()),
    "all": (lambda x: (x > 0).all(axis=1), lambda a: (a > 0).all(1)),
    "any": (lambda x: (x > 3).any(), lambda a: (a > 3).any()),
    "clip": (lambda x: x.clip(-1.0, 1.0), lambda a: a.clip(-1, 1)),
    "reshape": (lambda x: x.reshape(6, 2), lambda a: a.reshape(6, 2)),
    "reshape tuple": (lambda x: x.reshape((2, -1)), lambda a: a.reshape(2, -1)),
    "transpose": (lambda x: x.transpose(), lambda a: a.transpose()),
    "transpose axes": (lambda x: x.transpose(1, 0), lambda a: a.transpose(1, 0)),
    "flatten": (lambda x: x.flatten(), lambda a: a.flatten()),
    "squeeze": (lambda x: x[:1].squeeze(), lambda a: a[:1].squeeze()),
    "astype": (lambda x: x.astype(zyx.float64), lambda a: a.astype(np.float64)),
}


def test_methods_are_the_namespaces_functions(array_device: Device) -> None:
    a = data(np.random.default_rng(77), (3, 4), DType.F32, 0.5, 4.0)
    a[0] *= -1
    x = strided(array_device, a)
    with Expect(array_device) as expect:
        for name, (ours, numpys) in METHODS.items():
            got, want = ours(x), numpys(reference(a))
            dtype = {"argmax": DType.I64, "argmin": DType.I64, "all": DType.BOOL, "any": DType.BOOL,
                     "astype": DType.F64}.get(name, DType.F32)  # fmt: skip
            expect(got, want, dtype, f"x.{name}")
    assert x.realize() is x and x.node.realized
