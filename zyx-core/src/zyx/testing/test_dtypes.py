"""Dtypes: the capabilities a device claims are coherent, and each claimed dtype is stored
bit-exactly, cast to every other claimed dtype, and passed as a ``Variable`` scalar."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from zyx.backend import Device
from zyx.dtypes import DType, DTypeCapability
from zyx.ir.interpreter import interpret
from zyx.testing._suite import ELEMENTS, Batches, Require
from zyx.testing.harness import HostArg, reference, run
from zyx.testing.kernels import axpb, cast, copy, elementwise
from zyx.testing.numerics import (
    OP_BOUNDS,
    Array,
    assert_close,
    assert_poison,
    assert_prefix,
    poisoned,
    random,
)

pytestmark = pytest.mark.zyx_area("dtype")

STORAGE = DTypeCapability.STORAGE
ARITHMETIC = DTypeCapability.ARITHMETIC
MATH = DTypeCapability.MATH


def test_claims_are_coherent(device: Device) -> None:
    """ARITHMETIC implies STORAGE; MATH implies ARITHMETIC and is for floats only."""
    for dtype, claim in device.info.dtypes.items():
        assert isinstance(dtype, DType) and isinstance(claim, DTypeCapability)
        if ARITHMETIC in claim:
            assert STORAGE in claim, f"{dtype}: ARITHMETIC without STORAGE"
        if MATH in claim:
            assert ARITHMETIC in claim, f"{dtype}: MATH without ARITHMETIC"
            assert dtype.is_float, f"{dtype}: MATH claimed for a dtype that is not a float"


@pytest.mark.parametrize("dtype", list(DType), ids=str)
def test_storage_is_bit_exact(batches: Batches, dtype: DType) -> None:
    """A kernel that loads and stores copies every bit (floats are finite)."""
    outcome = batches.outcome("copies", [copy(d) for d in DType], copy(dtype))
    raw = outcome.out.view(np.uint8)
    assert_close(raw, outcome.inputs[0].view(np.uint8), DType.U8, f"bytes of {dtype}")
    assert_poison(outcome.tail, dtype, "past n")


@pytest.mark.parametrize("src, dst", [(s, d) for s in DType for d in DType], ids=lambda d: str(d))
def test_cast(batches: Batches, src: DType, dst: DType) -> None:
    """C's conversions: to bool is ``!= 0``, float to int truncates toward zero."""
    parts = [cast(src, to) for to in DType]
    batches.outcome(f"casts_from_{src}", parts, cast(src, dst)).check()


NEAR_TIES = {
    DType.F16: [1 + 2**-11 + 2**-40, -(3 + 2**-10 + 2**-38), 2**-15 + 2**-25 + 2**-50],
    DType.BF16: [1 + 2**-8 + 2**-30, -(5 + 2**-6 + 2**-28), 2**-120 * (1 + 2**-8 + 2**-31)],
}
"""Doubles just past a tie of the half dtype (normal and subnormal): rounded once they
round away from it, rounded through float32 they land on the tie and round to even."""


@pytest.mark.parametrize("dst", list(NEAR_TIES), ids=str)
def test_f64_to_half_casts_round_as_the_ir_defines(
    device: Device, local: int, require: Require, rng: np.random.Generator, dst: DType
) -> None:
    """A cast from f64 rounds f16 once and bf16 through float32 (the IR's definition, the
    interpreter's): exactly, and so a double rounding of f16 or a single one of bf16 fails."""
    require(DType.F64, ARITHMETIC)
    require(dst, ARITHMETIC)
    x = np.concatenate([NEAR_TIES[dst], rng.uniform(-4.0, 4.0, 256)]).astype(np.float64)
    n = len(x)
    kernel = elementwise(f"f64_to_{dst}", [cast(DType.F64, dst)], local)
    want = poisoned(dst, n)
    interpret(kernel, [x, want, n])
    got = run(device, kernel, [x, poisoned(dst, n), n])[1]
    wrong = got.view(np.uint16) != want.view(np.uint16)
    assert not wrong.any(), (
        f"(f64 -> {dst}) {x[wrong][:4]}: got {got[wrong][:4]}, want {want[wrong][:4]}"
    )


@pytest.mark.parametrize("dtype", [d for d in DType if d is not DType.BOOL], ids=str)
def test_variable_scalars(
    device: Device, local: int, require: Require, rng: np.random.Generator, dtype: DType
) -> None:
    """``y = x * alpha + beta`` with ``alpha`` and ``beta`` passed as ``dtype`` scalars that
    no narrower type holds, so a scalar passed in fewer bits fails."""
    require(dtype, ARITHMETIC)
    x, alpha, beta = _axpb_operands(rng, dtype, ELEMENTS)
    kernel = axpb(dtype, local)
    args: list[HostArg] = [x, poisoned(dtype, ELEMENTS + local), alpha, beta, ELEMENTS]
    got, want = run(device, kernel, args), reference(kernel, args)
    assert_prefix(got[1], want[1], dtype, ELEMENTS, f"x * {alpha!r} + {beta!r}", OP_BOUNDS)


@pytest.mark.parametrize("dtype", [d for d in DType if d is not DType.BOOL], ids=str)
def test_numpy_scalars_are_variables_too(
    device: Device, local: int, require: Require, rng: np.random.Generator, dtype: DType
) -> None:
    """A numpy scalar (``np.prod(shape)``, an ``np.float64`` factor) is taken as the Python
    number it holds: the results equal those of Python scalars, bit for bit."""
    require(dtype, ARITHMETIC)
    x, alpha, beta = _axpb_operands(rng, dtype, ELEMENTS)
    kernel = axpb(dtype, local)
    holder = np.float64 if dtype.is_float else np.int64 if dtype.is_signed else np.uint64
    plain = run(device, kernel, [x, poisoned(dtype, ELEMENTS), alpha, beta, ELEMENTS])[1]
    scalars: list[Any] = [holder(alpha), holder(beta), np.int64(ELEMENTS)]
    wrapped = run(device, kernel, [x, poisoned(dtype, ELEMENTS), *scalars])[1]
    assert wrapped.tobytes() == plain.tobytes(), f"{dtype}: numpy scalars gave other results"


def _axpb_operands(
    rng: np.random.Generator, dtype: DType, n: int
) -> tuple[Array, float | int, float | int]:
    """``x``, ``alpha`` and ``beta`` for ``x * alpha + beta`` in ``dtype``.

    Floats: random Python floats, which the device rounds to ``dtype`` (an f16 or bf16
    Variable too, so its rounding is tested). Integers: magnitudes of at least half the
    dtype's bits (64-bit ones at least 2**32), where ``|x| <= 10`` keeps the result in range.
    """
    if dtype.is_float:
        alpha = float(rng.uniform(0.25, 4.0)) * float(rng.choice([-1, 1]))
        return random(rng, dtype, n, -4, 4), alpha, float(rng.uniform(-4.0, 4.0))
    top = dtype.int_range[1]
    least = 1 << (dtype.itemsize * 4) if dtype.itemsize > 1 else 1
    x = random(rng, dtype, n, -10 if dtype.is_signed else 1, 10)
    alpha, beta = (_int_scalar(rng, dtype, least, most) for most in (top // 20, top // 2))
    return x, alpha, beta


def _int_scalar(rng: np.random.Generator, dtype: DType, least: int, most: int) -> int:
    """A random int of magnitude in ``[least, most]``, of either sign where ``dtype`` has."""
    magnitude = int(rng.integers(least, most, endpoint=True))
    return -magnitude if dtype.is_signed and rng.random() < 0.5 else magnitude
