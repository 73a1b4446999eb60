"""The conformance suite's comparison helpers (``zyx.testing.numerics``) on known values."""

from __future__ import annotations

import numpy as np
import pytest

from zyx.dtypes import DType
from zyx.testing.numerics import assert_ulps, ulps


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
