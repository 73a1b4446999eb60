"""Dtypes: the capabilities a device claims are coherent, and each claimed dtype is stored
bit-exactly, cast to every other claimed dtype, and passed as a ``Variable`` scalar."""

from __future__ import annotations

import numpy as np
import pytest

from zyx.backend import Device
from zyx.dtypes import DType, DTypeCapability
from zyx.testing._suite import ELEMENTS, Batches, Require
from zyx.testing.harness import HostArg, reference, run
from zyx.testing.kernels import axpb, cast, copy
from zyx.testing.numerics import assert_close, assert_poison, assert_prefix, poisoned, random

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


_SCALARS = {
    # x's range, alpha, beta: no overflow in the narrowest dtype of the kind
    "float": ((-4.0, 4.0), 1.5, -0.25),
    "signed": ((-10, 10), 3, -5),
    "unsigned": ((1, 10), 3, 7),
}


@pytest.mark.parametrize("dtype", [d for d in DType if d is not DType.BOOL], ids=str)
def test_variable_scalars(
    device: Device, local: int, require: Require, rng: np.random.Generator, dtype: DType
) -> None:
    """``y = x * alpha + beta`` with ``alpha`` and ``beta`` passed as ``dtype`` scalars."""
    require(dtype, ARITHMETIC)
    kind = "float" if dtype.is_float else "signed" if dtype.is_signed else "unsigned"
    (low, high), alpha, beta = _SCALARS[kind]
    kernel = axpb(dtype, local)
    n = ELEMENTS
    args: list[HostArg] = [
        random(rng, dtype, n, low, high),
        poisoned(dtype, n + local),
        alpha,
        beta,
        n,
    ]
    got, want = run(device, kernel, args), reference(kernel, args)
    assert_prefix(got[1], want[1], dtype, n, f"x * {alpha} + {beta}")
