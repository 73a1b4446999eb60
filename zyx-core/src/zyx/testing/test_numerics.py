"""Numbers: all 28 unary and 24 binary ops, ``where`` and ``fma`` on every dtype they are
defined for, the float ops and casts on NaN, infinities and signed zeros, ``nextafter`` at
the edges of each float dtype, integer overflow (which wraps) and bounds checks at the ends of
i64, and the sample kernels of :mod:`zyx.testing.examples`, against the interpreter in
float64.

An op is tested on a dtype when the device claims what it needs (MATH for the float-only
ops and ``pow``, ARITHMETIC for the rest); all ops of one dtype share one kernel.
"""

from __future__ import annotations

import numpy as np
import pytest

from zyx.backend import Device
from zyx.dtypes import DType, DTypeCapability
from zyx.errors import IRError
from zyx.ir import INDEX, BOp, KernelBuilder, ParamKind, UOp, check_limits
from zyx.testing._suite import Batches
from zyx.testing.examples import Example, examples
from zyx.testing.harness import HostArg, reference, run
from zyx.testing.kernels import (
    WRAPPING_BINARY,
    WRAPPING_UNARY,
    Elementwise,
    binary,
    binary_ops,
    cast,
    division_by_constants,
    division_edges,
    fma,
    nextafter_steps,
    unary,
    unary_ops,
    where,
    with_special_values,
    wrapping,
)
from zyx.testing.numerics import assert_close

pytestmark = pytest.mark.zyx_area("numerics")

ARITHMETIC = DTypeCapability.ARITHMETIC


@pytest.mark.parametrize(
    "op, dtype", [(op, d) for d in DType for op in unary_ops(d)], ids=lambda x: str(x.value)
)
def test_unary(batches: Batches, op: UOp, dtype: DType) -> None:
    batches.outcome(f"ops_{dtype}", ops(dtype), unary(op, dtype)).check()


@pytest.mark.parametrize(
    "op, dtype", [(op, d) for d in DType for op in binary_ops(d)], ids=lambda x: str(x.value)
)
def test_binary(batches: Batches, op: BOp, dtype: DType) -> None:
    batches.outcome(f"ops_{dtype}", ops(dtype), binary(op, dtype)).check()


@pytest.mark.parametrize("dtype", list(DType), ids=str)
def test_where(batches: Batches, dtype: DType) -> None:
    """``cond ? a : b`` per element, either operand copied exactly."""
    batches.outcome(f"ops_{dtype}", ops(dtype), where(dtype)).check()


@pytest.mark.parametrize("dtype", [DType.F32, DType.F64], ids=str)
def test_fma(batches: Batches, dtype: DType) -> None:
    """``a * b + c`` rounded once, also where ``c`` nearly cancels the product. A kernel of
    its own: a renderer without ``Fma`` fails this test alone, not every op's batch."""
    part = fma(dtype)
    batches.outcome(f"fma_{dtype}", [part], part).check()


def ops(dtype: DType) -> list[Elementwise]:
    """Every unary and binary op on ``dtype``, and ``where``: one batch, one kernel."""
    unaries = [unary(op, dtype) for op in unary_ops(dtype)]
    return [*unaries, *(binary(op, dtype) for op in binary_ops(dtype)), where(dtype)]


FLOATS = [d for d in DType if d.is_float]
IEEE_OPS: list[tuple[UOp | BOp, DType]] = [
    *((op, d) for d in FLOATS for op in unary_ops(d)),
    *((op, d) for d in FLOATS for op in binary_ops(d)),
]


@pytest.mark.parametrize("op, dtype", IEEE_OPS, ids=lambda x: str(x.value))
def test_special_values(batches: Batches, op: UOp | BOp, dtype: DType) -> None:
    """NaN, infinities and signed zeros in, and out as IEEE 754 (C's Annex F) has them:
    ``inf - inf`` and ``0 * inf`` are NaN, ``1 / -0`` is ``-inf``, ``ln(0)`` is ``-inf``,
    ``fmax(NaN, x)`` is ``x``, a comparison with NaN is false (``!=`` true), ``pow(1, NaN)``
    is 1. Not on a device built for finite math, where they are undefined."""
    _refuse_finite_math(batches.device)
    batches.outcome(f"ieee_{dtype}", _ieee_parts(dtype), _ieee_op(op, dtype)).check()


@pytest.mark.parametrize("op, dtype", IEEE_OPS, ids=lambda x: str(x.value))
def test_subnormals(batches: Batches, op: UOp | BOp, dtype: DType) -> None:
    """Subnormals in and out are kept, not flushed to zero: ``least * 1`` is ``least``, a
    product below the normal range rounds to a subnormal, ``sqrt(least)`` is not 0. Not on
    a device that flushes them (``DeviceInfo.subnormals``) or builds for finite math."""
    _refuse_flushing(batches.device)
    parts = _ieee_parts(dtype, subnormals=True)
    outcome = batches.outcome(f"subnormal_{dtype}", parts, _ieee_op(op, dtype, subnormals=True))
    outcome.check()


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_where_special_values(batches: Batches, dtype: DType) -> None:
    """NaN, infinities and signed zeros pass through a select as they are."""
    _refuse_finite_math(batches.device)
    part = with_special_values(where(dtype))
    batches.outcome(f"ieee_{dtype}", _ieee_parts(dtype), part).check()


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_where_subnormals(batches: Batches, dtype: DType) -> None:
    """Subnormals pass through a select unflushed."""
    _refuse_flushing(batches.device)
    part = with_special_values(where(dtype), subnormals=True)
    batches.outcome(f"subnormal_{dtype}", _ieee_parts(dtype, subnormals=True), part).check()


def _ieee_parts(dtype: DType, subnormals: bool = False) -> list[Elementwise]:
    """The batch of ``dtype``'s special-value (or subnormal) tests: every op, and ``where``."""
    parts = [_ieee_op(o, d, subnormals) for o, d in IEEE_OPS if d is dtype]
    return [*parts, with_special_values(where(dtype), subnormals=subnormals)]


def _ieee_op(op: UOp | BOp, dtype: DType, subnormals: bool = False) -> Elementwise:
    """``op`` on ``dtype`` with special values (or subnormals) among its inputs."""
    if isinstance(op, UOp):
        return with_special_values(unary(op, dtype), subnormals=subnormals)
    # fmax(-0, +0) and fmin(-0, +0) may give either zero.
    signed_zeros = op not in (BOp.MAX, BOp.MIN)
    return with_special_values(binary(op, dtype), signed_zeros=signed_zeros, subnormals=subnormals)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_nextafter_steps_in_its_own_dtype(batches: Batches, dtype: DType) -> None:
    """``nextafter`` between the least subnormal, the least normal, 1 and its neighbours and
    the largest finite value, of both signs, steps one ulp of ``dtype`` (f16 and bf16 too,
    which compute in float32): into and out of the subnormals, across zero, to 1's
    neighbours, down from the largest. Not where subnormals may be flushed."""
    if not batches.device.info.subnormals:
        pytest.skip(f"{batches.device.name} may flush subnormals to zero (DeviceInfo.subnormals)")
    parts = [nextafter_steps(d) for d in FLOATS]
    batches.outcome("nextafter_steps", parts, nextafter_steps(dtype)).check()


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_nextafter_special_values(batches: Batches, dtype: DType) -> None:
    """``nextafter`` of and toward zeros, infinities and NaN as well: from either zero to
    the least subnormal with the target's sign, from -least toward +1 to -0, from the
    largest finite toward inf to inf and back, ``a == b`` to ``b``, NaN in to NaN out."""
    _refuse_flushing(batches.device)
    parts = [nextafter_steps(d, special=True) for d in FLOATS]
    batches.outcome("nextafter_ieee", parts, nextafter_steps(dtype, special=True)).check()


IEEE_CASTS = [(s, d) for s in FLOATS for d in (*FLOATS, DType.BOOL) if d is not s]


@pytest.mark.parametrize("src, dst", IEEE_CASTS, ids=str)
def test_special_values_cast(batches: Batches, src: DType, dst: DType) -> None:
    """NaN, infinities and signed zeros converted between floats keep what they are; to
    bool, NaN and the infinities are true, both zeros false."""
    _refuse_finite_math(batches.device)
    parts = [with_special_values(cast(s, d)) for s, d in IEEE_CASTS]
    batches.outcome("ieee_casts", parts, with_special_values(cast(src, dst))).check()


@pytest.mark.parametrize("src, dst", IEEE_CASTS, ids=str)
def test_subnormals_cast(batches: Batches, src: DType, dst: DType) -> None:
    """Subnormals converted between floats round as any value does (to zero only where
    the target's least subnormal is larger); to bool they are true."""
    _refuse_flushing(batches.device)
    parts = [with_special_values(cast(s, d), subnormals=True) for s, d in IEEE_CASTS]
    part = with_special_values(cast(src, dst), subnormals=True)
    batches.outcome("subnormal_casts", parts, part).check()


def _refuse_finite_math(device: Device) -> None:
    """Skip on a device that builds for finite math: there the special values' results
    are undefined."""
    if device.info.finite_math:
        pytest.skip(
            f"{device.name} builds kernels for finite math: NaN, infinities and signed zeros "
            "are undefined there"
        )


def _refuse_flushing(device: Device) -> None:
    """Skip where subnormals may be flushed to zero, or where the finite-math build leaves
    the overflow of ``x / least`` undefined."""
    _refuse_finite_math(device)
    if not device.info.subnormals:
        pytest.skip(f"{device.name} may flush subnormals to zero (DeviceInfo.subnormals)")


INTEGERS = [d for d in DType if d.is_int]


@pytest.mark.parametrize("op", [BOp.DIV, BOp.MOD], ids=lambda op: str(op.value))
@pytest.mark.parametrize("dtype", INTEGERS, ids=str)
def test_integer_division_edges(batches: Batches, op: BOp, dtype: DType) -> None:
    """A zero divisor gives 0 and MIN / -1 wraps: the IR defines what C leaves undefined."""
    parts = [division_edges(o, d) for d in INTEGERS for o in (BOp.DIV, BOp.MOD)]
    batches.outcome("division_edges", parts, division_edges(op, dtype)).check()


@pytest.mark.parametrize("op", [BOp.DIV, BOp.MOD], ids=lambda op: str(op.value))
@pytest.mark.parametrize("dtype", INTEGERS, ids=str)
def test_integer_division_by_constants(batches: Batches, op: BOp, dtype: DType) -> None:
    """A constant divisor, 0 and -1 and ones that wrap to them included, gives what a
    variable one does (a renderer may drop the guard only for the others)."""
    parts = [division_by_constants(o, d) for d in INTEGERS for o in (BOp.DIV, BOp.MOD)]
    batches.outcome("division_by_constants", parts, division_by_constants(op, dtype)).check()


WRAPS: list[tuple[UOp | BOp, DType]] = [
    *((op, d) for d in INTEGERS for op in WRAPPING_BINARY),
    *((op, d) for d in INTEGERS if d.is_signed for op in WRAPPING_UNARY),
]


@pytest.mark.parametrize("op, dtype", WRAPS, ids=lambda x: str(x.value))
def test_integer_overflow_wraps(batches: Batches, op: UOp | BOp, dtype: DType) -> None:
    """``MAX + 1`` is ``MIN``, and so on: the IR wraps where signed overflow is undefined
    in C, and a compiler that assumes it away (``x + 1 > x``) gives other numbers."""
    parts = [wrapping(o, d) for o, d in WRAPS if d is dtype]
    batches.outcome(f"wraps_{dtype}", parts, wrapping(op, dtype)).check()


BOUNDS_CHECKS = [(3, 40), (-5, 3), (1 << 62, -(1 << 62)), (-(2**63), 1), (2**63 - 1, -5),
                 (2**63 - 10, 2**63 - 1), (-(2**63) + 5, -(2**63) + 20)]  # fmt: skip
"""``(offset, limit)`` of ``l + offset < limit``: in range, and where ``l + offset`` or
``limit - offset`` wraps."""


@pytest.mark.parametrize("offset, limit", BOUNDS_CHECKS, ids=str)
def test_bounds_check_with_offsets_at_the_ends_of_i64(
    device: Device, local: int, offset: int, limit: int
) -> None:
    """``if (l + offset < limit) out[l] = 1``, the bounds check of elementwise kernels, with
    i64 ``Variable``s: each work-item's own wrapped sum decides, not a bound derived from
    ``limit - offset``."""
    kb = KernelBuilder("bounds_check")
    out = kb.param(DType.I32, ParamKind.GLOBAL_MUT)
    at, end = kb.variable(INDEX, "offset"), kb.variable(INDEX, "limit")
    item = kb.local(0, local)
    with kb.if_(item + at < end):
        out[item] = kb.const(1, DType.I32)
    kernel = kb.build()
    args: list[HostArg] = [np.zeros(local, np.int32), offset, limit]
    assert_close(run(device, kernel, args)[0], reference(kernel, args)[0], DType.I32, "out")


@pytest.mark.parametrize("example", examples(), ids=lambda e: e.name)
def test_example(device: Device, example: Example) -> None:
    """The kernels ``zyx check`` runs, each output compared with the reference."""
    missing = sorted(str(d) for d in example.dtypes if not device.info.supports(d, ARITHMETIC))
    if missing:
        pytest.skip(f"{device.name} does not claim ARITHMETIC for {', '.join(missing)}")
    try:
        check_limits(example.kernel, device.info)
    except IRError as error:
        pytest.skip(f"the example is too big for the device: {error}")
    args = example.arguments(np.random.default_rng(11))
    got, want = run(device, example.kernel, args), reference(example.kernel, args)
    params = example.kernel.params
    buffers = [i for i, p in enumerate(params) if p.kind is not ParamKind.VARIABLE]
    for position in example.outputs:
        index = buffers.index(position)
        assert_close(got[index], want[index], params[position].dtype, f"output {position}")
