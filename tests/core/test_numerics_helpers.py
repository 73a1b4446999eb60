"""The conformance suite's comparison helpers (``zyx.testing.numerics``) on known values."""

from __future__ import annotations

import numpy as np
import pytest

from zyx.dtypes import DType
from zyx.ir import BOp
from zyx.testing.kernels import ulp_budget
from zyx.testing.numerics import assert_close, assert_ieee, assert_ulps, is_poison, poisoned, ulps


def test_ulps_are_counted_in_the_binade_of_the_reference() -> None:
    out = np.array([1 + 2**-23, 0.0, 2**-149, 1 - 2**-24], np.float32)
    ref = np.array([1.0, 0.0, 0.0, 1.0])
    assert ulps(out, ref, DType.F32).tolist() == [1.0, 0.0, 1.0, 0.5]
    # just below a power of two, the spacing of the binade below: 0.5 is correct rounding
    assert ulps(np.array([1.0], np.float16), np.array([1 - 2**-12]), DType.F16)[0] == 0.5


def test_equal_infinities_and_nans_are_no_error() -> None:
    out = np.array([np.inf, -np.inf, np.nan], np.float32)
    assert ulps(out, out.astype(np.float64), DType.F32).tolist() == [0.0, 0.0, 0.0]
    assert_ulps(out, out.astype(np.float64), DType.F32, 0.5)


def test_the_message_names_the_worst_element_and_its_operands() -> None:
    out = np.array([1.0, 1 + 2**-20, np.nan], np.float32)
    ref = np.array([1.0, 1.0, 2.0])
    with pytest.raises(AssertionError) as caught:
        assert_ulps(out, ref, DType.F32, 0.5, "op", [np.array([7, 8, 9])])
    assert "2 of 3 elements more than 0.5 ulps off; worst at index 2: (np.int64(9))" in str(
        caught.value
    )


def test_poison_is_a_nan_no_arithmetic_makes() -> None:
    for dtype in (DType.F16, DType.BF16, DType.F32, DType.F64):
        poison = poisoned(dtype, 2)
        assert np.isnan(poison.astype(np.float64)).all()
        assert is_poison(poison, dtype).all()
        with np.errstate(invalid="ignore"):
            computed = (np.zeros(2, np.float32) / np.float32(0)).astype(dtype.numpy)
        assert not is_poison(computed, dtype).any(), dtype


@pytest.mark.parametrize(
    "got, want, message",
    [
        ([np.nan, 1.0], [np.nan, np.nan], "NaN against a number"),
        ([2.0, np.inf], [2.0, -np.inf], "not the reference's infinity"),
        ([3.4e38, 1.0], [np.inf, 1.0], "not the reference's infinity"),
        ([0.0, -0.0], [0.0, 0.0], "zero with the wrong sign"),
        ([1.0, 1.0000001], [1.0, 1.0], "ulps off"),
    ],
)
def test_assert_ieee_refuses(got: list[float], want: list[float], message: str) -> None:
    out, ref = np.array(got, np.float32), np.array(want)
    with pytest.raises(AssertionError, match=message):
        assert_ieee(out, ref, DType.F32, 0.5, "f", [ref])


def test_assert_ieee_rounds_the_reference_to_the_dtype() -> None:
    """A float64 reference past f32's range is f32's infinity; NaN matches NaN; fmax's
    zeros may differ in sign when told so."""
    out = np.array([np.inf, np.nan, -0.0, 1.5], np.float32)
    ref = np.array([1e39, np.nan, 0.0, 1.5])
    assert_ieee(out, ref, DType.F32, 0.5, signed_zeros=False)
    with pytest.raises(AssertionError, match="never written"):
        assert_ieee(poisoned(DType.F32, 4), ref, DType.F32, 0.5)


def test_assert_ieee_rounds_a_bf16_reference_through_float32() -> None:
    """Just under bf16's overflow threshold, float64 rounds to float32's tie, which rounds
    to even: infinity, as the IR rounds (straight from float64, bf16's largest)."""
    ref = np.array([(2 - 2**-8) * 2.0**127 * (1 - 2**-40)])
    assert_ieee(np.array([np.inf], DType.BF16.numpy), ref, DType.BF16, 0.5)


def test_f64_math_functions_are_checked_per_element() -> None:
    """A wrong result next to one near float64's largest: a norm would not see it."""
    budget = ulp_budget(BOp.POW, DType.F64)
    assert budget == 20
    ref = np.array([1.7e308, 1.0, 2.0])
    assert_ieee(ref * (1 + 1e-15), ref, DType.F64, budget)
    with pytest.raises(AssertionError, match="1 of 3 elements"):
        assert_ieee(np.array([1.7e308, 1.0 + 1e-13, 2.0]), ref, DType.F64, budget)


@pytest.mark.parametrize("dtype", [DType.F32, DType.I32])
def test_assert_close_names_the_element_of_an_n_d_array(dtype: DType) -> None:
    """The message names the first wrong (integers) or worst (floats) element by its index
    per dim, for any number of dims (a flat index used to raise IndexError past dim 0)."""
    ref = np.ones((3, 4, 2))
    out = ref.astype(dtype.numpy)
    out[2, 1, 1] = 5
    with pytest.raises(AssertionError, match=r"index \(2, 1, 1\): np\.\w+\(5"):
        assert_close(out, ref, dtype)
    with pytest.raises(AssertionError, match=r"index \(\)"):
        assert_close(out[2, 1, 1, ...], ref[2, 1, 1, ...], dtype)


def test_an_overflow_within_the_budget_of_the_largest_number_passes() -> None:
    """The infinity counts as the step past the largest number: a result 2 ulps off of the
    largest may be it (CUDA's f64 hypot of the largest and 1); farther from it, or of the
    other sign, it may not."""
    top = float(np.finfo(np.float64).max)
    assert_ieee(np.array([np.inf, -np.inf]), np.array([top, -top]), DType.F64, 2.0)
    for got, want in ((np.inf, top * (1 - 2**-50)), (-np.inf, top)):
        with pytest.raises(AssertionError, match="not the reference's infinity"):
            assert_ieee(np.array([got]), np.array([want]), DType.F64, 2.0)
