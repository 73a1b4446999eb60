"""``matmul``, ``tensordot`` and ``vecdot`` against numpy in float64: every numeric dtype,
1-D operands, batches that broadcast, transposed and strided operands, a contracted dim
of size 0; the shapes that do not align, named."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from array_support import ARITHMETIC, NUMERIC, Expect, claimed, data, on, reference, strided

import zyx
from zyx.backend import Device
from zyx.dtypes import DType

# (shape of x1, shape of x2): matrices, vectors on either side, batches that broadcast.
MATMUL_SHAPES = [
    ((3, 4), (4, 5)),
    ((4,), (4, 2)),
    ((2, 4), (4,)),
    ((4,), (4,)),
    ((2, 1, 3, 4), (5, 4, 2)),
    ((1, 4), (3, 4, 1)),
]


def _operands(rng: np.random.Generator, dtype: DType, *shapes: tuple[int, ...]) -> list[Any]:
    """Random operands whose products and sums stay in range (integers from -3 to 3)."""
    if dtype.is_float:
        return [data(rng, s, dtype) for s in shapes]
    low = -3 if dtype.is_signed else 1
    return [data(rng, s, dtype, low, 3) for s in shapes]


def _product(op: Any, dtype: DType, *xs: Any, **kwargs: Any) -> Any:
    """numpy's ``op`` in float64 for floats, in the dtype itself for integers."""
    return op(*(reference(x) for x in xs), **kwargs) if dtype.is_float else op(*xs, **kwargs)


def test_matmul_matches_numpy_on_every_numeric_dtype_and_shape(array_device: Device) -> None:
    """Every dtype with one of the shapes in turn, and float32 with all of them (each pair
    is a kernel of its own)."""
    rng = np.random.default_rng(60)
    dtypes = claimed(array_device, NUMERIC, ARITHMETIC)
    cases = [(DType.F32, shapes) for shapes in MATMUL_SHAPES]
    cases += [(dtype, MATMUL_SHAPES[i % len(MATMUL_SHAPES)]) for i, dtype in enumerate(dtypes)]
    with Expect(array_device) as expect:
        for dtype, (a, b) in cases:
            if dtype not in dtypes:
                continue
            x1, x2 = _operands(rng, dtype, a, b)
            got = zyx.matmul(strided(array_device, x1), strided(array_device, x2))
            expect(got, _product(np.matmul, dtype, x1, x2), dtype, f"{dtype.value} {a} @ {b}")


def _ones(device: Device, shape: tuple[int, ...], dtype: Any = np.float32) -> Any:
    return on(device, np.ones(shape, dtype))


def test_matmul_reads_transposed_operands_and_promotes(array_device: Device) -> None:
    rng = np.random.default_rng(61)
    x1, x2 = data(rng, (6, 3), DType.F32), data(rng, (5, 6), DType.F32)
    with Expect(array_device) as expect:
        got = zyx.matmul(on(array_device, x1).mT, on(array_device, x2).mT)
        expect(got, reference(x1).T @ reference(x2).T, DType.F32, "x1.mT @ x2.mT")
        square = on(array_device, x1[:3])
        expect(
            zyx.matmul(square, square.mT),
            reference(x1[:3]) @ reference(x1[:3]).T,
            DType.F32,
            "a @ a.mT",
        )
        i8, i32 = _operands(rng, DType.I8, (2, 3))[0], _operands(rng, DType.I32, (3, 2))[0]
        got = zyx.matmul(on(array_device, i8), on(array_device, i32))
        expect(got, i8.astype(np.int32) @ i32, DType.I32, "int8 @ int32")


def test_matmul_over_an_empty_dim_is_zeros(array_device: Device) -> None:
    x1 = on(array_device, np.zeros((3, 0), np.float32))
    x2 = on(array_device, np.zeros((0, 2), np.float32))
    with Expect(array_device) as expect:
        expect(zyx.matmul(x1, x2), np.zeros((3, 2)), DType.F32, "(3, 0) @ (0, 2)")
    assert zyx.matmul(x2.mT, x1.mT).numpy().shape == (2, 3)


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        ((3, 4), (5, 2), r"shapes \(3, 4\) and \(5, 2\) do not align \(4 != 5\)"),
        ((2, 3, 4), (5, 4, 2), r"matmul: shapes \(2,\) and \(5,\) do not broadcast"),
        ((), (3,), "0-D"),
        ((4,), (3,), r"\(4,\) and \(3,\) do not align"),
    ],
)
def test_matmul_errors_name_the_shapes(
    array_device: Device, a: tuple[int, ...], b: tuple[int, ...], message: str
) -> None:
    x1, x2 = (_ones(array_device, s) for s in (a, b))
    with pytest.raises(ValueError, match=message):
        zyx.matmul(x1, x2)


def test_matmul_refuses_bool_and_mixed_kinds(array_device: Device) -> None:
    flags = on(array_device, np.ones((2, 2), bool))
    with pytest.raises(TypeError, match="matmul takes numeric arrays, got bool"):
        zyx.matmul(flags, flags)
    with pytest.raises(TypeError, match="do not promote"):
        zyx.matmul(
            on(array_device, np.ones((2, 2), np.int32)),
            on(array_device, np.ones((2, 2), np.float32)),
        )


@pytest.mark.parametrize(
    ("a", "b", "axes"),
    [
        ((3, 4, 5), (4, 5, 2), 2),
        ((3, 4), (4, 2), 1),
        ((2, 3), (4,), 0),
        ((3, 4, 5), (5, 3, 2), ([0, 2], [1, 0])),
        ((4, 3), (2, 4), ([-2], [-1])),
    ],
    ids=str,
)
def test_tensordot_matches_numpy(array_device: Device, a: Any, b: Any, axes: Any) -> None:
    rng = np.random.default_rng(62)
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, (DType.F32, DType.I64, DType.F16), ARITHMETIC):
            x1, x2 = _operands(rng, dtype, a, b)
            got = zyx.tensordot(strided(array_device, x1), on(array_device, x2), axes=axes)
            want = _product(np.tensordot, dtype, x1, x2, axes=axes)
            expect(got, want, dtype, f"tensordot {dtype.value}")


def test_tensordot_errors(array_device: Device) -> None:
    x1, x2 = (
        on(array_device, np.ones((3, 4), np.float32)),
        on(array_device, np.ones((5, 3), np.float32)),
    )
    with pytest.raises(ValueError, match=r"axes \(1,\) of \(3, 4\) and \(0,\) of \(5, 3\) differ"):
        zyx.tensordot(x1, x2, axes=1)
    with pytest.raises(ValueError, match="axes=3 for arrays of 2 and 2 dims"):
        zyx.tensordot(x1, x2, axes=3)


@pytest.mark.parametrize(
    ("a", "b", "axis"), [((3, 4), (3, 4), -1), ((2, 1, 4), (3, 4), -1), ((4, 3), (4, 1), -2)]
)
def test_vecdot_matches_numpy(array_device: Device, a: Any, b: Any, axis: int) -> None:
    rng = np.random.default_rng(63)
    with Expect(array_device) as expect:
        for dtype in claimed(array_device, NUMERIC, ARITHMETIC):
            x1, x2 = _operands(rng, dtype, a, b)
            got = zyx.vecdot(strided(array_device, x1), on(array_device, x2), axis=axis)
            want = _product(lambda u, v: np.sum(u * v, axis=axis), dtype, x1, x2)
            expect(got, want, dtype, f"vecdot {dtype.value}")


def test_vecdot_needs_the_axis_in_both(array_device: Device) -> None:
    x1, x2 = (
        on(array_device, np.ones((3, 4), np.float32)),
        on(array_device, np.ones((4,), np.float32)),
    )
    with pytest.raises(ValueError, match=r"axis -2 is not a shared dim of \(3, 4\) and \(4,\)"):
        zyx.vecdot(x1, x2, axis=-2)
