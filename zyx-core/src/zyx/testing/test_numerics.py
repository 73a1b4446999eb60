"""Numbers: all 13 unary and 19 binary ops on every dtype they are defined for, and the
sample kernels of :mod:`zyx.ir.examples`, against the interpreter in float64.

An op is tested on a dtype when the device claims what it needs (MATH for the float-only
ops and ``pow``, ARITHMETIC for the rest); all ops of one dtype share one kernel.
"""

from __future__ import annotations

import numpy as np
import pytest

from zyx.backend import Device
from zyx.dtypes import DType, DTypeCapability
from zyx.errors import IRError
from zyx.ir import BOp, ParamKind, UOp, check_limits
from zyx.ir.examples import Example, examples
from zyx.testing._suite import Batches
from zyx.testing.harness import reference, run
from zyx.testing.kernels import Elementwise, binary, binary_ops, division_edges, unary, unary_ops
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


def ops(dtype: DType) -> list[Elementwise]:
    """Every unary and binary op on ``dtype``: one batch, one kernel."""
    unaries = [unary(op, dtype) for op in unary_ops(dtype)]
    return unaries + [binary(op, dtype) for op in binary_ops(dtype)]


INTEGERS = [d for d in DType if d.is_int]


@pytest.mark.parametrize("op", [BOp.DIV, BOp.MOD], ids=lambda op: str(op.value))
@pytest.mark.parametrize("dtype", INTEGERS, ids=str)
def test_integer_division_edges(batches: Batches, op: BOp, dtype: DType) -> None:
    """A zero divisor gives 0 and MIN / -1 wraps: the IR defines what C leaves undefined."""
    parts = [division_edges(o, d) for d in INTEGERS for o in (BOp.DIV, BOp.MOD)]
    batches.outcome("division_edges", parts, division_edges(op, dtype)).check()


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
