"""Property tests: random valid kernels give the same results compiled on the host device and
in the interpreter.

Elementwise expression trees over every dtype, on random 2-D shapes with broadcast inputs,
and row reductions. The host compiles without floating-point contraction and rounds f16
and bf16 after each op as the interpreter does, so IEEE ops (add, sub, mul, div, sqrt, ...)
must agree bit for bit; transcendental functions (libm vs numpy) are compared with a
tolerance, one op at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zyx.dtypes import DType
from zyx.host.compiler import toolchain
from zyx.host.device import HostDevice
from zyx.host.pool import HostPool
from zyx.ir import BOp, Kernel, KernelBuilder, ParamKind, UOp, Value
from zyx.ir.interpreter import interpret
from zyx.testing.harness import run
from zyx.testing.numerics import poisoned, random

pytestmark = pytest.mark.skipif(toolchain() is None, reason="no working C compiler")

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

INTS = [DType.I8, DType.I16, DType.I32, DType.I64, DType.U8, DType.U16, DType.U32, DType.U64]
FLOATS = [DType.F16, DType.BF16, DType.F32, DType.F64]

_INT_BINARY = [BOp.ADD, BOp.SUB, BOp.MUL, BOp.DIV, BOp.MOD, BOp.MAX, BOp.BITAND, BOp.BITOR,
               BOp.BITXOR, BOp.SHL, BOp.SHR]  # fmt: skip
_FLOAT_BINARY = [BOp.ADD, BOp.SUB, BOp.MUL, BOp.DIV, BOp.MOD, BOp.MAX]
_COMPARISONS = [BOp.CMPLT, BOp.CMPGT, BOp.CMPGE, BOp.EQ, BOp.NOTEQ]
_BOOL_BINARY = [BOp.OR, BOp.AND, BOp.BITXOR, BOp.EQ, BOp.NOTEQ]
_EXACT_FLOAT_UNARY = [UOp.NEG, UOp.ABS, UOp.SQRT, UOp.FLOOR, UOp.TRUNC, UOp.RECIPROCAL]
_MATH_UNARY = [UOp.EXP, UOp.EXP2, UOp.LN, UOp.LOG2, UOp.SIN, UOp.COS]


@pytest.fixture(scope="module")
def device(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostDevice]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ZYX_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield HostDevice(HostPool())


# ---- expression trees --------------------------------------------------------------------

Expr = tuple[Any, ...]
"""``("input", k)``, ``("const", value)``, ``("unary", op, x)``, ``("binary", op, a, b)``,
``("compare", op, a, b)`` (cast back to the tree's dtype) or ``("via", dtype, x)`` (a cast
to ``dtype`` and back)."""


def constants(dtype: DType) -> st.SearchStrategy[Any]:
    if dtype is DType.BOOL:
        return st.booleans()
    if dtype.is_float:
        return st.floats(-8, 8, allow_nan=False).filter(bool)
    info = np.iinfo(dtype.numpy)
    return st.integers(int(info.min), int(info.max))


def trees(dtype: DType, inputs: int) -> st.SearchStrategy[Expr]:
    leaves = st.one_of(
        st.tuples(st.just("input"), st.integers(0, inputs - 1)),
        st.tuples(st.just("const"), constants(dtype)),
    )

    def extend(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
        return st.one_of(
            st.tuples(st.just("unary"), st.sampled_from(_unary_ops(dtype)), children),
            st.tuples(st.just("binary"), st.sampled_from(_binary_ops(dtype)), children, children),
            st.tuples(st.just("compare"), st.sampled_from(_COMPARISONS), children, children),
            st.tuples(st.just("via"), st.sampled_from(_casts(dtype)), children),
        )

    return st.recursive(leaves, extend, max_leaves=8)


def _unary_ops(dtype: DType) -> list[UOp]:
    if dtype.is_float:
        return _EXACT_FLOAT_UNARY
    if dtype is DType.BOOL or not dtype.is_signed:
        return [UOp.BITNOT]
    return [UOp.NEG, UOp.ABS, UOp.BITNOT]


def _binary_ops(dtype: DType) -> list[BOp]:
    if dtype is DType.BOOL:
        return _BOOL_BINARY
    return _FLOAT_BINARY if dtype.is_float else _INT_BINARY


def _casts(dtype: DType) -> list[DType]:
    """Round trips defined for every value of ``dtype``: a float never goes through an
    integer (out-of-range conversions are undefined), an integer goes through any integer
    (wrapping) and through the floats that hold all its values exactly."""
    if dtype.is_float:
        return FLOATS
    if dtype is DType.BOOL:
        return [*INTS, DType.BOOL, *FLOATS]
    bits = dtype.itemsize * 8
    exact = [f for f, mantissa in _MANTISSA_BITS.items() if mantissa >= bits]
    return [*INTS, DType.BOOL, *exact]


_MANTISSA_BITS = {DType.F16: 11, DType.BF16: 8, DType.F32: 24, DType.F64: 53}


def build(expr: Expr, dtype: DType, leaves: list[Value]) -> Value:
    kb = leaves[0].builder
    kind = expr[0]
    if kind == "input":
        return leaves[expr[1]]
    if kind == "const":
        return kb.const(expr[1], dtype)
    if kind == "unary":
        return kb.unary(expr[1], build(expr[2], dtype, leaves))
    if kind == "via":
        return build(expr[2], dtype, leaves).cast(expr[1]).cast(dtype)
    a, b = build(expr[2], dtype, leaves), build(expr[3], dtype, leaves)
    if kind == "compare":
        return kb.binary(expr[1], a, b).cast(dtype)
    if expr[1] in (BOp.SHL, BOp.SHR):
        b = b & (dtype.itemsize * 8 - 1)  # shifts past the width are undefined in C
    return kb.binary(expr[1], a, b)


# ---- kernels -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    rows: int
    cols: int
    local: int
    broadcasts: tuple[str, ...]
    """Per input: ``"full"`` ([rows, cols]), ``"row"`` ([cols], the same for every row) or
    ``"col"`` ([rows], the same across a row)."""

    def length(self, broadcast: str) -> int:
        return {"full": self.rows * self.cols, "row": self.cols, "col": self.rows}[broadcast]


def shapes(inputs: int) -> st.SearchStrategy[Shape]:
    return st.builds(
        Shape,
        rows=st.integers(1, 40),
        cols=st.integers(1, 300),
        local=st.sampled_from([1, 3, 32, 64, 256]),
        broadcasts=st.lists(
            st.sampled_from(["full", "row", "col"]), min_size=inputs, max_size=inputs
        ).map(tuple),  # fmt: skip
    )


def elementwise(
    dtype: DType, shape: Shape, compute: Callable[[list[Value]], Value], out: DType
) -> Kernel:
    """``out[r, c] = compute(inputs at [r, c], broadcast as ``shape`` says)``, a 2-D grid."""
    kb = KernelBuilder("expr")
    params = [kb.param(dtype) for _ in shape.broadcasts]
    result = kb.param(out, ParamKind.GLOBAL_MUT)
    c = kb.group(0, -(-shape.cols // shape.local)) * shape.local + kb.local(0, shape.local)
    r = kb.group(1, shape.rows)
    with kb.if_(c < shape.cols):
        index = {"full": r * shape.cols + c, "row": c, "col": r}
        leaves = [p[index[b]] for p, b in zip(params, shape.broadcasts)]
        result[r * shape.cols + c] = compute(leaves)
    return kb.build()


def arguments(dtype: DType, shape: Shape, out: DType, seed: int) -> list[Any]:
    rng = np.random.default_rng(seed)
    inputs = [random(rng, dtype, shape.length(b)) for b in shape.broadcasts]
    return [*inputs, poisoned(out, shape.rows * shape.cols)]


def on_both(device: HostDevice, kernel: Kernel, args: list[Any]) -> tuple[Any, Any]:
    """The output (the last buffer) computed on the host device and by the interpreter."""
    host = run(device, kernel, args)[-1]
    expected = args[-1].copy()
    interpret(kernel, [*args[:-1], expected])
    return host, expected


def assert_identical(host: Any, expected: Any, dtype: DType) -> None:
    if dtype.is_float:  # NaN equals NaN here, and -0 equals 0
        np.testing.assert_array_equal(host.astype(np.float64), expected.astype(np.float64))
    else:
        np.testing.assert_array_equal(host, expected)


# ---- properties --------------------------------------------------------------------------


@st.composite
def expression_cases(draw: st.DrawFn) -> tuple[DType, Expr, Shape, int]:
    dtype = draw(st.sampled_from([*INTS, *FLOATS, DType.BOOL]))
    inputs = draw(st.integers(1, 3))
    return dtype, draw(trees(dtype, inputs)), draw(shapes(inputs)), draw(st.integers(0, 2**32))


@SETTINGS
@given(expression_cases())
def test_expression_trees_agree_bit_for_bit(
    device: HostDevice, case: tuple[DType, Expr, Shape, int]
) -> None:
    dtype, expr, shape, seed = case
    kernel = elementwise(dtype, shape, lambda leaves: build(expr, dtype, leaves), dtype)
    host, expected = on_both(device, kernel, arguments(dtype, shape, dtype, seed))
    assert_identical(host, expected, dtype)


@SETTINGS
@given(
    st.sampled_from(FLOATS),
    st.sampled_from([*_MATH_UNARY, BOp.POW]),
    shapes(2),
    st.integers(0, 2**32),
)
def test_transcendental_functions_agree_within_an_ulp_or_so(
    device: HostDevice, dtype: DType, op: UOp | BOp, shape: Shape, seed: int
) -> None:
    def compute(leaves: list[Value]) -> Value:
        kb, x = leaves[0].builder, leaves[0]
        positive = kb.unary(UOp.ABS, x)  # inputs are never zero
        if isinstance(op, BOp):
            return kb.binary(op, positive, leaves[1])
        return kb.unary(op, positive if op in (UOp.LN, UOp.LOG2) else x)

    kernel = elementwise(dtype, shape, compute, dtype)
    host, expected = on_both(device, kernel, arguments(dtype, shape, dtype, seed))
    # libm and numpy are both within about an ulp; f16/bf16 round float32 results, which
    # may land on either side of a rounding boundary: one ulp of the narrow type.
    rtol = {DType.F16: 2**-10, DType.BF16: 2**-7, DType.F32: 2**-21, DType.F64: 2**-50}[dtype]
    tiny = float(ml_dtypes.finfo(dtype.numpy).smallest_subnormal)
    np.testing.assert_allclose(
        host.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=tiny
    )


@st.composite
def reduction_cases(draw: st.DrawFn) -> tuple[DType, BOp, int, int, int, int]:
    dtype = draw(st.sampled_from([*INTS, *FLOATS]))
    op = draw(st.sampled_from([BOp.ADD, BOp.MAX, BOp.MUL] if not dtype.is_float else
                              [BOp.ADD, BOp.MAX]))  # fmt: skip
    rows, cols = draw(st.integers(1, 70)), draw(st.integers(1, 200))
    lanes = draw(st.integers(1, 5))
    return dtype, op, rows, cols, lanes, draw(st.integers(0, 2**32))


def reduction(dtype: DType, op: BOp, rows: int, cols: int, lanes: int) -> Kernel:
    """``out[r] = op-reduce(x[r, :])``: one work-item per row, ``lanes`` partial results
    (column ``j`` goes to lane ``j % lanes``) combined at the end."""
    kb = KernelBuilder("reduce")
    x = kb.param(dtype)
    out = kb.param(dtype, ParamKind.GLOBAL_MUT)
    r = kb.group(0, -(-rows // 32)) * 32 + kb.local(0, 32)
    neutral = identity(op, dtype)
    with kb.if_(r < rows):
        acc = kb.define(dtype, lanes)
        with kb.loop(lanes) as k:
            acc[k] = neutral
        with kb.loop(cols) as j:
            k = j % lanes
            acc[k] = kb.binary(op, acc[k], x[r * cols + j])
        total = kb.define(dtype)
        total[0] = neutral
        with kb.loop(lanes) as k:
            total[0] = kb.binary(op, total[0], acc[k])
        out[r] = total[0]
    return kb.build()


def identity(op: BOp, dtype: DType) -> int | float:
    if op is BOp.MAX:
        return -np.inf if dtype.is_float else int(np.iinfo(dtype.numpy).min)
    return 1 if op is BOp.MUL else 0


@SETTINGS
@given(reduction_cases())
def test_row_reductions_agree_bit_for_bit(
    device: HostDevice, case: tuple[DType, BOp, int, int, int, int]
) -> None:
    dtype, op, rows, cols, lanes, seed = case
    kernel = reduction(dtype, op, rows, cols, lanes)
    rng = np.random.default_rng(seed)
    args = [random(rng, dtype, rows * cols), poisoned(dtype, rows)]
    host, expected = on_both(device, kernel, args)
    assert_identical(host, expected, dtype)


def test_the_reduction_kernel_computes_what_it_claims() -> None:
    """In float64, the interpreter's results of the reduction kernel are numpy's."""
    x = np.random.default_rng(7).uniform(-1, 1, (9, 13))
    for op, expected in ((BOp.ADD, x.sum(axis=1)), (BOp.MAX, x.max(axis=1))):
        out = np.full(9, np.nan)
        interpret(reduction(DType.F32, op, 9, 13, 3), [x.ravel(), out], compute=np.float64)
        np.testing.assert_allclose(out, expected, rtol=1e-12)
