"""Comparing a backend's numbers with the reference: bounds, poison, random data.

A device's output is compared with the IR interpreter run in float64
(:func:`zyx.testing.harness.reference`): floats by the relative norm of the difference,
``‖out − ref‖ / ‖ref‖`` under the output dtype's bound; integers and bools exactly. A
single elementwise op has tighter bounds (``OP_BOUNDS``) than a kernel whose rounding
errors accumulate (``BOUNDS``), and each of its elements is checked in ulps as well
(:func:`assert_ulps`): a norm forgives a few far-off elements, or a rounding that is
consistently a little off.

Outputs are *poisoned* before a launch (a NaN no arithmetic makes for floats, ``0xAB``
bytes otherwise), so an element the device never wrote cannot pass for a result, not even
for a NaN it computed. Bools are compared as bytes: a stored bool must be exactly 0 or 1,
and ``0xAB`` is neither.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import log2
from typing import Any

import ml_dtypes
import numpy as np
import numpy.typing as npt

from zyx.dtypes import DType

BOUNDS: dict[DType, float] = {
    DType.F16: 1e-2,
    DType.BF16: 1e-2,
    DType.F32: 1e-5,
    DType.F64: 1e-12,
}
"""Relative error bound ‖out − ref‖ / ‖ref‖ per float dtype, for kernels whose rounding
errors accumulate (reductions, matmul, chains of launches); other dtypes compare exactly."""

OP_BOUNDS: dict[DType, float] = {**BOUNDS, DType.F16: 2**-10, DType.BF16: 2**-7}
"""The bounds of one elementwise op or cast (or two, as ``x * alpha + beta``). f16 and bf16
compute in float32 and round to nearest once per op, at most half an ulp off: 2**-11
relative for f16, 2**-8 for bf16. Their bound is one ulp, so a result that kept fewer bits
fails (f16 at bf16's precision does). f32 and f64 keep ``BOUNDS``: their math functions may
be several ulps off on some devices. A single op is also checked per element, against the
budget of :func:`zyx.testing.kernels.ulp_budget` (:func:`assert_ulps`)."""

POISON_BYTE = 0xAB
"""Fills the bytes of non-float outputs before a launch."""

POISON_NAN: dict[DType, int] = {
    DType.F16: 0x7E5A, DType.BF16: 0x7FDA, DType.F32: 0x7FC5A5A5, DType.F64: 0x7FF8A5A5A5A5A5A5,
}  # fmt: skip
"""Fills float outputs before a launch, as bits: a quiet NaN whose payload arithmetic never
makes (a NaN it computes carries the default payload, or one of its operands'), so a NaN
result and an element never written stay apart."""

Array = npt.NDArray[Any]


def poisoned(dtype: DType, n: int) -> Array:
    """``n`` elements that no kernel computes: :data:`POISON_NAN` for floats, ``0xAB``
    bytes otherwise."""
    out = np.empty(n, dtype.numpy)
    if dtype.is_float:
        out.view(f"u{dtype.itemsize}").fill(POISON_NAN[dtype])
    else:
        out.view(np.uint8).fill(POISON_BYTE)
    return out


def is_poison(values: Array, dtype: DType) -> npt.NDArray[np.bool_]:
    """Per element: does it still hold the poison, i.e. was it never written?"""
    if dtype.is_float:
        same: npt.NDArray[np.bool_] = values.view(f"u{dtype.itemsize}") == POISON_NAN[dtype]
        return same
    raw = values.view(np.uint8).reshape(len(values), dtype.itemsize)
    poison: npt.NDArray[np.bool_] = np.all(raw == POISON_BYTE, axis=1)
    return poison


def random(
    rng: np.random.Generator,
    dtype: DType,
    n: int,
    low: float | None = None,
    high: float | None = None,
) -> Array:
    """``n`` random values of ``dtype`` in ``[low, high]``, never zero.

    Floats are drawn uniformly and rounded to ``dtype`` (bf16 through ml_dtypes); a value
    that rounds to zero is redrawn. Integers default to the dtype's whole range. Bools
    are random, both values (the one dtype where zero is not avoided).
    """
    if dtype is DType.BOOL:
        return rng.random(n) < 0.5
    if dtype.is_float:
        lo, hi = (-4.0 if low is None else low), (4.0 if high is None else high)
        values = rng.uniform(lo, hi, n).astype(dtype.numpy)
        while not np.all(values):
            zeros = values == 0
            values[zeros] = rng.uniform(lo, hi, int(zeros.sum())).astype(dtype.numpy)
        return values
    info = np.iinfo(dtype.numpy)
    lo_i = info.min if low is None else int(low)
    hi_i = info.max if high is None else int(high)
    if lo_i == 0 == hi_i:
        raise ValueError("the range [0, 0] holds no value but zero")
    values = rng.integers(lo_i, hi_i, n, dtype=dtype.numpy, endpoint=True)
    while not np.all(values):
        zeros = values == 0
        values[zeros] = rng.integers(lo_i, hi_i, int(zeros.sum()), dtype=dtype.numpy, endpoint=True)
    return values


def spread(rng: np.random.Generator, dtype: DType, n: int, top: float, signed: bool) -> Array:
    """``n`` nonzero values of ``dtype`` in ``(-top, top)`` (``(0, top)`` where not
    ``signed``) whose magnitudes spread evenly over the orders of magnitude, from 1/16
    (integers: from 1) up to ``top``."""
    x = (
        _float_magnitudes(rng, dtype, n, top)
        if dtype.is_float
        else _int_magnitudes(rng, dtype, n, top)
    )
    if signed:
        x[rng.random(n) < 0.5] *= -1
    return x


def _float_magnitudes(rng: np.random.Generator, dtype: DType, n: int, top: float) -> Array:
    """Each two to a random power, the exponent drawn evenly, rounded to ``dtype``."""
    wide = np.minimum(np.exp2(rng.uniform(-4.0, log2(top), n)), top)
    x = wide.astype(dtype.numpy)
    # Rounded to dtype, a value may reach top: halved, it is below top, and exact.
    over = x.astype(np.float64) >= top
    x[over] = (x[over].astype(np.float64) / 2).astype(dtype.numpy)
    return x


def _int_magnitudes(rng: np.random.Generator, dtype: DType, n: int, top: float) -> Array:
    """Each a random number of bits long, then its bits random (the leading one set)."""
    bits = rng.integers(1, (int(top) - 1).bit_length(), n, endpoint=True).astype(np.uint64)
    low = np.left_shift(np.uint64(1), bits - np.uint64(1))
    x = rng.integers(low, low + (low - np.uint64(1)), dtype=np.uint64, endpoint=True)
    x[x > int(top) - 1] >>= np.uint64(1)
    magnitudes: Array = x.astype(dtype.numpy)
    return magnitudes


def relative_error(out: Array, ref: Array) -> float:
    """‖out − ref‖ / ‖ref‖ computed in float64 (NaN anywhere makes it NaN).

    Both are first divided by the largest finite ``|ref|``: the norms of values near
    float64's largest would overflow.
    """
    out64, ref64 = out.astype(np.float64), ref.astype(np.float64)
    top = float(np.max(np.abs(ref64), initial=0.0))
    if 0 < top < np.inf:
        out64, ref64 = out64 / top, ref64 / top
    scale = float(np.linalg.norm(ref64))
    diff = float(np.linalg.norm(out64 - ref64))
    return diff / scale if scale else diff


def assert_close(
    out: Array,
    ref: Array,
    dtype: DType,
    what: str = "result",
    bounds: Mapping[DType, float] = BOUNDS,
) -> None:
    """Raise ``AssertionError`` unless ``out`` (of ``dtype``) matches the reference ``ref``.

    Floats: relative norm error under ``bounds[dtype]``, and no NaN where the reference has
    none. Integers: equal. Bools: bytes exactly 0 or 1 and equal.
    """
    if out.shape != ref.shape:
        raise AssertionError(f"{what}: shape {out.shape}, expected {ref.shape}")
    if dtype.is_float:
        unwritten = np.isnan(out.astype(np.float64)) & ~np.isnan(ref.astype(np.float64))
        if unwritten.any():
            raise AssertionError(
                f"{what}: {int(unwritten.sum())} of {out.size} elements are NaN where the "
                f"reference is not (never written?), first at index {_first(unwritten)}"
            )
        error, bound = relative_error(out, ref), bounds[dtype]
        if not error <= bound:
            with np.errstate(over="ignore", invalid="ignore"):
                gap = np.abs(out.astype(np.float64) - ref.astype(np.float64))
                worst = _index(int(np.argmax(gap)), out.shape)
            raise AssertionError(
                f"{what}: relative error {error:.3g} over the {dtype} bound {bound:g}; "
                f"worst at index {worst}: {out[worst]!r}, expected {ref[worst]!r}"
            )
        return
    got = out.view(np.uint8) if dtype is DType.BOOL else out
    want = ref.astype(dtype.numpy).view(np.uint8) if dtype is DType.BOOL else ref
    wrong = got != want
    if wrong.any():
        i = _first(wrong)
        raise AssertionError(
            f"{what}: {int(wrong.sum())} of {out.size} {dtype} elements differ; first at "
            f"index {i}: {got[i]!r}, expected {want[i]!r}"
        )


def ulps(out: Array, ref: Array, dtype: DType) -> Array:
    """Per element, ``|out − ref|`` in units in the last place of ``dtype`` at ``ref``: the
    spacing of ``dtype``'s values in the binade of the exact ``ref`` (below the normal
    range, the subnormal spacing). A correctly rounded result is at most 0.5 off."""
    info = ml_dtypes.finfo(dtype.numpy)
    out64, ref64 = out.astype(np.float64), ref.astype(np.float64)
    _, exponent = np.frexp(ref64)  # ref = m * 2**exponent, 0.5 <= |m| < 1
    binade = np.where(ref64 == 0, info.minexp, np.maximum(exponent - 1, info.minexp))
    spacing = np.exp2((binade - info.nmant).astype(np.float64))
    with np.errstate(over="ignore", invalid="ignore"):
        off: Array = np.abs(out64 - ref64) / spacing
    # Equal infinities (inf - inf is NaN) and NaN where the reference is NaN are no error.
    off[(out64 == ref64) | (np.isnan(out64) & np.isnan(ref64))] = 0.0
    return off


def assert_ulps(
    out: Array,
    ref: Array,
    dtype: DType,
    budget: float,
    what: str = "result",
    inputs: Sequence[Array] = (),
) -> None:
    """Raise ``AssertionError`` unless every element of ``out`` is within ``budget``
    :func:`ulps` of ``ref``; the message shows the worst element and its ``inputs``."""
    off = ulps(out, ref, dtype)
    over = ~(off <= budget)
    if over.any():
        worst = int(np.argmax(np.where(over, np.nan_to_num(off, nan=np.inf), -1.0)))
        operands = ", ".join(repr(x[worst]) for x in inputs)
        raise AssertionError(
            f"{what}: {int(over.sum())} of {out.size} elements more than {budget:.4g} ulps "
            f"off; worst at index {worst}: ({operands}) gave {out[worst]!r}, expected "
            f"{ref[worst]!r} ({off[worst]:.3g} ulps)"
        )


def assert_ieee(
    out: Array,
    ref: Array,
    dtype: DType,
    budget: float,
    what: str = "result",
    inputs: Sequence[Array] = (),
    signed_zeros: bool = True,
) -> None:
    """Raise ``AssertionError`` unless float ``out`` follows IEEE 754 where the reference
    ``ref`` rounded to ``dtype`` does: NaN exactly where it is NaN, the same infinities, the
    same sign of zero (where ``signed_zeros``); every finite element within ``budget`` ulps
    of ``ref``, an infinity past a reference within ``budget`` ulps of the overflow too
    (``overflows_within``). No element may be unwritten."""
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = dtype.round_array(ref).astype(np.float64)
    got = out.astype(np.float64)
    overflowed = overflows_within(got, rounded, dtype, budget)
    infinite = (np.isinf(got) | np.isinf(rounded)) & ~np.isnan(rounded) & ~overflowed
    zeros = (got == 0) & (rounded == 0)
    wrong_sign = zeros & (np.signbit(got) != np.signbit(rounded)) & signed_zeros
    for wrong, how in (
        (is_poison(out, dtype), "never written"),
        (np.isnan(got) != np.isnan(rounded), "NaN against a number, or a number against NaN"),
        (infinite & (got != rounded), "not the reference's infinity"),
        (wrong_sign, "zero with the wrong sign"),
    ):
        if wrong.any():
            i = _first(wrong)
            operands = ", ".join(repr(x[i]) for x in inputs)
            raise AssertionError(
                f"{what}: {int(wrong.sum())} of {out.size} elements {how}; first at index "
                f"{i}: ({operands}) gave {out[i]!r}, expected {ref[i]!r}"
            )
    finite = np.isfinite(rounded) & ~overflowed
    assert_ulps(out[finite], ref[finite], dtype, budget, what, [x[finite] for x in inputs])


def overflows_within(got: Array, ref: Array, dtype: DType, budget: float) -> Array:
    """Where ``got`` is the infinity of the finite ``ref``'s sign and ``ref`` lies within
    ``budget`` ulps of it, the infinity counting as the step past ``dtype``'s largest number:
    an overflow that a result ``budget`` ulps off may make, as IEEE rounding of a value past
    the largest number does (CUDA's f64 ``hypot`` of the largest number and 1, 2 ulps off
    at most, gives inf)."""
    info = ml_dtypes.finfo(dtype.numpy)
    top, spacing = float(info.max), 2.0 ** (info.maxexp - 1 - info.nmant)
    with np.errstate(invalid="ignore"):
        steps = (top - np.abs(ref)) / spacing + 1
    same_sign = np.signbit(got) == np.signbit(ref)
    result: Array = np.isinf(got) & np.isfinite(ref) & same_sign & (steps <= budget)
    return result


def assert_poison(values: Array, dtype: DType, what: str = "tail") -> None:
    """Raise ``AssertionError`` unless every element still holds the poison."""
    written = ~is_poison(values, dtype)
    if written.any():
        raise AssertionError(
            f"{what}: {int(written.sum())} of {values.size} elements past the end were "
            f"written, first at offset {int(np.flatnonzero(written)[0])}"
        )


def assert_prefix(
    out: Array,
    ref: Array,
    dtype: DType,
    n: int,
    what: str = "result",
    bounds: Mapping[DType, float] = BOUNDS,
) -> None:
    """``out[:n]`` matches ``ref[:n]`` and every element of ``out`` past ``n`` is poison."""
    assert_close(out[:n], ref[:n], dtype, what, bounds)
    assert_poison(out[n:], dtype, f"{what} past element {n}")


def _first(mask: npt.NDArray[np.bool_]) -> tuple[int, ...]:
    """The index of ``mask``'s first true element, one number per dim."""
    return _index(int(np.flatnonzero(mask)[0]), mask.shape)


def _index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, shape))
