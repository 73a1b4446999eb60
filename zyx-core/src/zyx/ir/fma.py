"""``zyx.ir.Fma`` in numpy: ``a * b + c`` rounded once, as C's ``fma`` computes it.

numpy has no fused multiply-add, and ``a * b + c`` rounds twice. Exactly:

- f32 (and what the interpreter holds in float32): the product of two floats is exact in
  float64; its sum with ``c`` is rounded to odd there (rounded to nearest, then, where that
  was inexact and came out even, one step toward the exact sum, known from the sum's error
  term), and rounded once more to float32, which then rounds as the exact value would
  (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms
  using rounding to odd", IEEE TC 2008: 53 bits are at least float32's 24 and 2).
- f64: the same paper's emulated FMA, in float64 alone: the product split into an exact
  sum of two doubles (Dekker's, with Veltkamp's split), the lower part added to the
  error of ``c`` plus the upper part rounded to odd, that added to their rounded sum.
  Its proof assumes no underflow and no overflow: where a factor, the addend or the
  product lies outside ``2**-900 .. 2**900``, each element is computed in exact rationals
  (``fractions``) and rounded by Python; where a factor is infinite, NaN or zero,
  ``a * b + c`` is already the one-rounding result, and where only the addend is, it is
  the result.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

Vec = Any
"""A numpy array or scalar."""

_SAFE = (2.0**-900, 2.0**900)
"""Magnitudes of a factor, the addend and the product inside which the float64 algorithm
neither underflows nor overflows."""

_SPLIT = 2.0**27 + 1
"""Veltkamp's constant: splits a double into two halves of 26 bits."""


def fma(a: Vec, b: Vec, c: Vec) -> Vec:
    """``a * b + c`` rounded once, in the dtype numpy gives the three (float32 and float64
    exactly, others as ``a * b + c``)."""
    held = np.result_type(a, b, c)
    x, y, z = (np.asarray(v, held) for v in (a, b, c))
    if held == np.float32:
        wide = [v.astype(np.float64) for v in (x, y, z)]
        result = _round_odd(wide[0] * wide[1], wide[2]).astype(np.float32)
    elif held == np.float64:
        shape = np.broadcast_shapes(x.shape, y.shape, z.shape)
        flat = [np.broadcast_to(v, shape).ravel() for v in (x, y, z)]
        result = _fma64(*flat).reshape(shape)
    else:
        result = np.asarray(x * y + z)
    return result[()] if result.ndim == 0 else result


def _two_sum(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> tuple[npt.NDArray[Any], ...]:
    """``a + b`` rounded, and its error: their exact sum is the two's (Knuth's TwoSum)."""
    s = a + b
    back = s - a
    return s, (a - (s - back)) + (b - back)


def _round_odd(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``a + b`` rounded to odd: the nearest where exact, else the neighbour of the exact
    sum whose last bit is 1."""
    s, error = _two_sum(a, b)
    even = (np.atleast_1d(s).view(np.int64) & 1).reshape(s.shape) == 0
    inexact = (error != 0) & np.isfinite(s) & even
    return np.where(inexact, np.nextafter(s, np.copysign(np.inf, error)), s)


def _split(x: npt.NDArray[Any]) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    t = _SPLIT * x
    high = t - (t - x)
    return high, x - high


def _fma64(a: npt.NDArray[Any], b: npt.NDArray[Any], c: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``fma`` of three float64 vectors of one length."""
    high = a * b
    (ah, al), (bh, bl) = _split(a), _split(b)
    low = ((ah * bh - high) + ah * bl + al * bh) + al * bl  # a * b == high + low exactly
    th, tl = _two_sum(c, high)
    result = np.asarray(th + _round_odd(tl, low))
    factors = np.isfinite(a) & np.isfinite(b)
    plain = ~factors | (a == 0) | (b == 0)
    result = np.where(plain, a * b + c, result)
    result = np.where(factors & ~np.isfinite(c), c, result)  # the product is finite
    inside = [_within(v) for v in (a, b, high)] + [_within(c) | (c == 0)]
    rational = ~plain & np.isfinite(c) & ~np.logical_and.reduce(inside)
    for at in np.flatnonzero(rational):
        result[at] = _rational(float(a[at]), float(b[at]), float(c[at]))
    return result


def _within(x: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
    magnitude = np.abs(x)
    inside: npt.NDArray[np.bool_] = (magnitude >= _SAFE[0]) & (magnitude <= _SAFE[1])
    return inside


def _rational(a: float, b: float, c: float) -> float:
    """``a * b + c`` of finite doubles, exact, rounded once (to infinity past the largest
    double, as C's ``fma``)."""
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    try:
        return float(exact)
    except OverflowError:
        return float("inf") if exact > 0 else float("-inf")
