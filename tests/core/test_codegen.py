"""The C-family renderer: deterministic, sanitized, exact literals, typed values."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from zyx.codegen import CDialect, sanitize
from zyx.codegen.c import ENTRY_NAME_CHARS
from zyx.dtypes import DType, round_to
from zyx.ir import BOp, Kernel, KernelBuilder, ParamKind, Range, Scope, UOp


class _Plain(CDialect):
    """A minimal dialect: enough hooks to render, no language specifics."""

    name = "plain"

    def storage_type(self, dtype: DType) -> str:
        return f"T_{dtype.value}"

    def signature(self, kernel: Kernel, name: str, params: list[str]) -> str:
        return f"void {name}({', '.join(params)})"

    def range_index(self, op: Range) -> str:
        return f"{'group' if op.scope is Scope.GROUP else 'item'}({op.axis})"

    def round16(self, x: str, dtype: DType) -> str:
        return f"round_{dtype.value}({x})"


def _kernel(name: str = "k") -> Kernel:
    kb = KernelBuilder(name)
    a = kb.param(DType.F32)
    out = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    i = kb.group(0, 8)
    out[i] = a[i] * 0.1 + 3
    return kb.build()


def test_rendering_is_deterministic() -> None:
    first = _Plain().render(_kernel())
    second = _Plain().render(_kernel())
    assert first == second
    assert first.digest == second.digest


def test_float_literals_are_the_exact_value_of_their_dtype() -> None:
    code = _Plain().render(_kernel()).code
    f32 = float(np.float32(0.1))
    assert f"{f32.hex()}f" in code
    assert round_to(0.1, DType.F16) == float(np.float16(0.1))
    assert round_to(0.1, DType.BF16) == float(np.float32(ml_dtypes.bfloat16(0.1)))
    assert round_to(0.1, DType.F64) == 0.1
    assert round_to(70000.0, DType.F16) == math.inf
    assert round_to(-1e39, DType.F32) == -math.inf


def test_negated_negative_literal_is_not_a_decrement() -> None:
    kb = KernelBuilder("negneg")
    out = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    out[0] = -kb.const(-1.5, DType.F32)
    code = _Plain().render(kb.build()).code
    assert "--" not in code
    assert f"(-({(-1.5).hex()}f))" in code


def test_every_value_is_assigned_to_a_typed_local() -> None:
    code = _Plain().render(_kernel()).code
    assert "const T_f32 v3 = p0[v2];" in code
    assert "T_f32* restrict p1" in code
    assert "const T_f32* restrict p0" in code


def test_entry_points_are_prefixed_and_bounded() -> None:
    """A plain C target includes <string.h>: a kernel named memcpy must not clash; drivers
    name files after kernels (PoCL aborted on a name of 251 characters)."""
    assert _Plain().render(_kernel("memcpy")).name == "zyx_kernel_memcpy"
    long, longer = "k" * 300, "k" * 299 + "j"
    names = {_Plain().render(_kernel(name)).name for name in (long, longer)}
    assert len(names) == 2 and all(len(name) <= ENTRY_NAME_CHARS for name in names)
    assert all(name.startswith("zyx_kernel_kkk") for name in names)
    assert _Plain().render(_kernel(long)).name in names  # the same name each time


def test_an_f64_to_f16_cast_rounds_the_double_once() -> None:
    """CDialect's default converted the double to float and rounded that to f16: twice."""
    kb = KernelBuilder("narrow")
    x, out = kb.param(DType.F64), kb.param(DType.F16, ParamKind.GLOBAL_MUT)
    i = kb.local(0, 1)
    out[i] = x[i].cast(DType.F16)
    code = _Plain().render(kb.build()).code
    assert "= round_f16(v3);" in code and "(float)" not in code, code


def test_identifiers_are_sanitized() -> None:
    assert sanitize("int") == "int_"
    assert sanitize("exp") == "exp_"
    assert sanitize("9lives") == "_9lives"
    assert sanitize("a-b.c") == "a_b_c"
    assert _Plain().render(_kernel("double")).name == "zyx_kernel_double_"


@pytest.mark.parametrize(
    "name", ["tanh", "rint", "nextafter", "copysign", "hypot", "atan2", "expm1", "log10"]
)
def test_kernels_named_like_a_math_function_get_another_name(name: str) -> None:
    assert _Plain().render(_kernel(name)).name == f"zyx_kernel_{name}_"


def test_where_is_a_select_of_two_computed_values() -> None:
    kb = KernelBuilder("w")
    a = kb.param(DType.I32)
    out = kb.param(DType.I32, ParamKind.GLOBAL_MUT)
    i = kb.group(0, 4)
    x = a[i]
    out[i] = kb.where(x < 0, -x, x)
    code = _Plain().render(kb.build()).code
    assert "const T_i32 v7 = (v5 ? v6 : v3);" in code


def test_every_float_function_renders_as_its_c_name() -> None:
    kb = KernelBuilder("f")
    a = kb.param(DType.F64)
    out = kb.param(DType.F64, ParamKind.GLOBAL_MUT)
    x = a[kb.group(0, 4)]
    out[0] = kb.unary(UOp.RINT, x) + kb.binary(BOp.NEXTAFTER, x, 1.0) + kb.minimum(x, 2.0)
    code = _Plain().render(kb.build()).code
    assert "rint(" in code and "nextafter(" in code and "fmin(" in code


def test_half_precision_arithmetic_is_rounded_each_op() -> None:
    kb = KernelBuilder("h")
    a = kb.param(DType.F16)
    out = kb.param(DType.F16, ParamKind.GLOBAL_MUT)
    i = kb.group(0, 4)
    out[i] = a[i] + a[i]
    code = _Plain().render(kb.build()).code
    assert "round_f16((" in code


def test_int64_extremes_render_without_overflowing_literals() -> None:
    kb = KernelBuilder("extremes")
    out = kb.param(DType.I64, ParamKind.GLOBAL_MUT)
    out[0] = -(2**63)
    out[1] = 2**40
    code = _Plain().render(kb.build()).code
    assert "-9223372036854775807LL - 1" in code
    assert "1099511627776LL" in code


def _divided_by(op: BOp, dtype: DType, divisor: int) -> str:
    kb = KernelBuilder("divide")
    a = kb.param(dtype)
    out = kb.param(dtype, ParamKind.GLOBAL_MUT)
    i = kb.group(0, 8)
    out[i] = kb.binary(op, a[i], kb.const(divisor, dtype))
    return _Plain().render(kb.build()).code


@pytest.mark.parametrize("op", [BOp.DIV, BOp.MOD], ids=lambda op: str(op.value))
@pytest.mark.parametrize(
    "dtype, divisor, wrapped",
    [
        (DType.I32, 7, 7),
        (DType.U8, 255, 255),
        (DType.I32, 0, 0),
        (DType.I32, -1, -1),
        (DType.U8, 256, 0),
        (DType.U8, -256, 0),
        (DType.U32, 2**32, 0),
        (DType.I64, 2**64, 0),
        (DType.I32, 2**32 - 1, -1),
        (DType.I8, 2**8 + 7, 7),
        (DType.U64, -1, 2**64 - 1),
    ],
)
def test_division_by_a_constant_is_by_the_value_it_wraps_to(
    op: BOp, dtype: DType, divisor: int, wrapped: int
) -> None:
    """A constant divisor is rendered as the value it wraps to, and one that wraps to 0 or
    -1 is no division at all (C would trap or be undefined; a guard would test constants)."""
    code = _divided_by(op, dtype, divisor)
    divides = wrapped not in (0, -1)
    assert (("/" if op is BOp.DIV else "%") in code) is divides
    if divides:
        assert str(wrapped) in code
        assert divisor == wrapped or str(divisor) not in code


def _moves(dtype: DType) -> Kernel:
    """``out[i] = a[i]`` through a register, and ``out[i + 8] = a[i] + 1``."""
    kb = KernelBuilder("moves")
    a = kb.param(dtype)
    out = kb.param(dtype, ParamKind.GLOBAL_MUT)
    i = kb.group(0, 8)
    held = kb.define(dtype, 1)
    held[0] = a[i]
    out[i] = held[0]
    out[i + 8] = a[i] + 1
    return kb.build()


def test_copies_are_the_loads_only_stored() -> None:
    kernel = _moves(DType.BF16)
    loads = [ref for ref, op in enumerate(kernel.ops) if type(op).__name__ == "Load"]
    assert kernel.copies == frozenset(loads[:2])  # a[i] into the register, and out of it


class _Held(_Plain):
    """A dialect that holds 16-bit floats in registers as memory does, and moves copies."""

    moves_as_held = True

    def register_type(self, dtype: DType) -> str:
        return self.storage_type(dtype)

    def load(self, ptr: str, index: str, dtype: DType) -> str:
        return f"widen({ptr}[{index}])"

    def store(self, ptr: str, index: str, value: str, dtype: DType) -> str:
        return f"{ptr}[{index}] = narrow({value})"


def test_a_dialect_may_move_copies_as_held() -> None:
    code = _Held().render(_moves(DType.BF16)).code
    assert "T_bf16 v3[1];" in code  # the register holds what memory does
    assert "const T_bf16 v4 = p0[v2];" in code and "v3[((T_i64)0)] = v4;" in code
    assert "const T_bf16 v8 = v3[((T_i64)0)];" in code and "p1[v2] = v8;" in code
    assert "const float v10 = widen(p0[v2]);" in code  # a[i] + 1 computes in float
    assert code.count("widen(") == 1 and code.count("narrow(") == 1
