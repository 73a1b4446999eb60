"""Renders zyx IR as Python source that runs all work-items at once on numpy arrays.

This is the example backend's own kernel language, beside the C dialects of the other
backends: a plugin may render whatever its hardware runs from the same IR.

A rendered kernel runs a chunk of work-groups in lock-step. Each value is a numpy scalar
(the same for every work-item) or an array with one entry per work-item. All work-items
finish an op before any starts the next, so every ``Barrier`` holds by construction.
``If`` and ``Loop`` narrow a mask instead of branching per item; a masked-out item
neither loads nor stores.

Semantics are C's, as in the other backends: integer division truncates toward zero,
``%`` is ``fmod`` (the dividend's sign), a zero divisor gives 0, integers wrap,
float-to-int casts truncate, bools promote to integers in arithmetic. f16 and bf16
compute in float32 and are rounded to their type after every op, cast, constant and
variable; buffers hold them in their type.

For ``c[i] = a[i] + b[i]`` in groups of 256 the renderer writes::

    def add(p0, p1, p2, p3, groups, first, count):
        g0, g1, g2 = groups
        ITEM = np.arange(count * 256, dtype=np.int64)
        GROUP, LANE = ITEM // 256, ITEM % 256
        m = np.ones(ITEM.size, np.bool_)
        p3 = np.int64(p3)
        v4 = (first + GROUP) % g0
        ...
        m12 = m & v11
        if m12.any():
            v14 = load(p0, v10, m12)
"""

from __future__ import annotations

import math
from math import prod
from typing import Any

import numpy as np
from ml_dtypes import bfloat16
from zyx.codegen import Source, sanitize
from zyx.dtypes import DType
from zyx.ir import (
    Barrier,
    Binary,
    BOp,
    Cast,
    Const,
    Define,
    EndIf,
    EndLoop,
    Fma,
    If,
    Kernel,
    Load,
    Loop,
    Op,
    Param,
    ParamKind,
    Range,
    Ref,
    Scope,
    Storage,
    Store,
    Unary,
    UOp,
    Where,
)
from zyx.ir.fma import fma

DIALECT = "numpy-python"

_TYPE = {
    DType.BOOL: "np.bool_", DType.U8: "np.uint8", DType.U16: "np.uint16",
    DType.U32: "np.uint32", DType.U64: "np.uint64", DType.I8: "np.int8",
    DType.I16: "np.int16", DType.I32: "np.int32", DType.I64: "np.int64",
    DType.F16: "np.float16", DType.BF16: "bfloat16", DType.F32: "np.float32",
    DType.F64: "np.float64",
}  # fmt: skip
"""The numpy type that holds each dtype in memory (``bfloat16`` comes from ml_dtypes)."""

_HALF = (DType.F16, DType.BF16)

_UNARY = {
    UOp.NEG: "-{}", UOp.BITNOT: "~{}", UOp.EXP: "np.exp({})", UOp.EXP2: "np.exp2({})",
    UOp.LN: "np.log({})", UOp.LOG2: "np.log2({})", UOp.RECIPROCAL: "np.reciprocal({})",
    UOp.SQRT: "np.sqrt({})", UOp.SIN: "np.sin({})", UOp.COS: "np.cos({})",
    UOp.FLOOR: "np.floor({})", UOp.TRUNC: "np.trunc({})", UOp.ABS: "np.abs({})",
    UOp.TAN: "np.tan({})", UOp.TANH: "np.tanh({})", UOp.ASIN: "np.arcsin({})",
    UOp.ACOS: "np.arccos({})", UOp.ATAN: "np.arctan({})", UOp.SINH: "np.sinh({})",
    UOp.COSH: "np.cosh({})", UOp.ASINH: "np.arcsinh({})", UOp.ACOSH: "np.arccosh({})",
    UOp.ATANH: "np.arctanh({})", UOp.EXPM1: "np.expm1({})", UOp.LOG1P: "np.log1p({})",
    UOp.LOG10: "np.log10({})", UOp.CEIL: "np.ceil({})", UOp.RINT: "np.rint({})",
}  # fmt: skip

_BINARY = {
    BOp.ADD: "{} + {}", BOp.SUB: "{} - {}", BOp.MUL: "{} * {}", BOp.DIV: "{} / {}",
    BOp.POW: "np.power({}, {})", BOp.MOD: "np.fmod({}, {})", BOp.CMPLT: "{} < {}",
    BOp.CMPGT: "{} > {}", BOp.CMPGE: "{} >= {}", BOp.NOTEQ: "{} != {}", BOp.EQ: "{} == {}",
    BOp.MAX: "np.maximum({}, {})", BOp.OR: "{} | {}", BOp.AND: "{} & {}",
    BOp.BITXOR: "{} ^ {}", BOp.BITOR: "{} | {}", BOp.BITAND: "{} & {}",
    BOp.SHL: "{} << {}", BOp.SHR: "{} >> {}", BOp.MIN: "np.minimum({}, {})",
    BOp.ATAN2: "np.arctan2({}, {})", BOp.HYPOT: "np.hypot({}, {})",
    BOp.COPYSIGN: "np.copysign({}, {})",
}  # fmt: skip

_FLOAT_BINARY = {BOp.MAX: "np.fmax({}, {})", BOp.MIN: "np.fmin({}, {})"}
"""Where floats differ from the other dtypes: a NaN operand loses (C's fmax and fmin)."""

# C computes these on bools as ints (true is 1); storing the result back tests for nonzero.
_BOOL_AS_INT = frozenset({BOp.ADD, BOp.SUB, BOp.MUL, BOp.DIV, BOp.MOD, BOp.SHL, BOp.SHR})


def value_type(dtype: DType) -> str:
    """The numpy type of a value in a kernel: f16 and bf16 compute in float32."""
    return "np.float32" if dtype in _HALF else _TYPE[dtype]


def render(kernel: Kernel) -> Source:
    """``kernel`` as the source of a Python function named after it."""
    return _Renderer(kernel).run()


class _Renderer:
    """One pass over the op list, one line per op; ``masks`` tracks the open If/Loop scopes."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.lines: list[str] = []
        self.masks = ["m"]

    def emit(self, line: str) -> None:
        self.lines.append("    " * len(self.masks) + line)

    def run(self) -> Source:
        kernel, name = self.kernel, sanitize(self.kernel.name)
        params = [f"p{i}" for i in range(len(kernel.params))]
        group_size = prod(kernel.local_size)
        self.lines.append(f"def {name}({', '.join([*params, 'groups', 'first', 'count'])}):")
        self.emit("g0, g1, g2 = groups")
        self.emit(f"ITEM = np.arange(count * {group_size}, dtype=np.int64)")
        self.emit(f"GROUP, LANE = ITEM // {group_size}, ITEM % {group_size}")
        self.emit("m = np.ones(ITEM.size, np.bool_)")
        for p, param in zip(params, kernel.params, strict=True):
            if param.kind is ParamKind.VARIABLE:
                self.emit(f"{p} = {self.scalar(p, param.dtype)}")
        for ref, op in enumerate(kernel.ops):
            if isinstance(op, (EndLoop, EndIf)):
                self.close()
            elif not isinstance(op, (Param, Barrier)):
                self.render_op(ref, op)
        return Source(name, "\n".join(self.lines) + "\n", DIALECT)

    def close(self) -> None:
        """End the innermost If or Loop; an empty body still needs a statement."""
        if self.lines[-1].endswith(":"):
            self.emit("pass")
        self.masks.pop()

    def name(self, ref: Ref) -> str:
        op = self.kernel.ops[ref]
        return f"p{self.kernel.param_refs.index(ref)}" if isinstance(op, Param) else f"v{ref}"

    def render_op(self, ref: Ref, op: Op) -> None:  # noqa: C901 - one branch per op kind
        n, v, mask = self.name, f"v{ref}", self.masks[-1]
        if isinstance(op, Range):
            self.emit(f"{v} = {self.range_index(op)}")
        elif isinstance(op, Const):
            self.emit(f"{v} = {self.scalar(_literal(op), op.dtype)}")
        elif isinstance(op, Define):
            rows = "ITEM.size" if op.storage is Storage.REGISTER else "count"
            self.emit(f"{v} = np.zeros(({rows}, {op.length}), {value_type(op.dtype)})")
        elif isinstance(op, Load):
            dtype = self.kernel.dtype_of(ref)
            widen = f".astype({value_type(dtype)})" if dtype in _HALF else ""
            self.emit(f"{v} = load({n(op.src)}, {n(op.index)}, {mask}{self.rows(op.src)}){widen}")
        elif isinstance(op, Store):
            args = f"{n(op.dst)}, {n(op.index)}, {n(op.value)}, {mask}{self.rows(op.dst)}"
            self.emit(f"store({args})")
        elif isinstance(op, Cast):
            self.emit(f"{v} = {self.cast(n(op.x), op.dtype)}")
        elif isinstance(op, Unary):
            dtype = self.kernel.dtype_of(op.x)
            self.emit(f"{v} = {self.rounded(_UNARY[op.op].format(n(op.x)), dtype)}")
        elif isinstance(op, Binary):
            dtype = self.kernel.dtype_of(op.a)
            value = self.binary(op.op, n(op.a), n(op.b), dtype)
            self.emit(f"{v} = {value if op.op.is_comparison else self.rounded(value, dtype)}")
        elif isinstance(op, Fma):  # f32 or f64: nothing to round after
            self.emit(f"{v} = fma({n(op.a)}, {n(op.b)}, {n(op.c)})")
        elif isinstance(op, Where):
            self.emit(f"{v} = np.where({n(op.cond)}, {n(op.a)}, {n(op.b)})")
        elif isinstance(op, Loop):
            self.emit(f"for {v} in np.arange(trips({n(op.size)}, {mask}), dtype=np.int64):")
            self.masks.append(f"m{ref}")
            self.emit(f"m{ref} = {mask} & ({v} < {n(op.size)})")
        elif isinstance(op, If):
            self.emit(f"m{ref} = {mask} & {n(op.cond)}")
            self.emit(f"if m{ref}.any():")
            self.masks.append(f"m{ref}")
        else:
            raise TypeError(f"cannot render {op}")

    def range_index(self, op: Range) -> str:
        """A work-group or work-item index; axis 0 varies fastest in both."""
        if op.scope is Scope.LOCAL:
            stride = prod(self.kernel.local_size[: op.axis])
            return f"LANE{f' // {stride}' if stride > 1 else ''} % {op.size}"
        stride_name = ["", " // g0", " // (g0 * g1)"][op.axis]
        return f"(first + GROUP){stride_name} % g{op.axis}"

    def rows(self, ref: Ref) -> str:
        """For a Define, which row of its storage each work-item uses: its own or its group's."""
        op = self.kernel.ops[ref]
        if not isinstance(op, Define):
            return ""
        return ", ITEM" if op.storage is Storage.REGISTER else ", GROUP"

    def scalar(self, value: str, dtype: DType) -> str:
        """A constant or variable as a numpy scalar, rounded to f16 or bf16 (``cast``)."""
        if dtype in _HALF:
            return self.cast(f"np.float64({value})", dtype)
        return f"{_TYPE[dtype]}({value})"

    def cast(self, x: str, dtype: DType) -> str:
        """C's conversion: to bool tests for nonzero, float to int truncates toward zero.
        f16 rounds once from the source type; bf16 through float32, as the IR defines it
        (ml_dtypes rounds a float64 straight to bf16)."""
        if dtype is DType.BOOL:
            return f"{x} != 0"
        if dtype is DType.F16:
            return f"{x}.astype(np.float16).astype(np.float32)"
        if dtype is DType.BF16:
            return f"{x}.astype(np.float32).astype(bfloat16).astype(np.float32)"
        return f"{x}.astype({_TYPE[dtype]})"

    def rounded(self, value: str, dtype: DType) -> str:
        """An op's float32 result rounded to f16/bf16 if ``dtype`` is one."""
        if dtype not in _HALF:
            return value
        return f"({value}).astype({_TYPE[dtype]}).astype(np.float32)"

    def binary(self, op: BOp, a: str, b: str, dtype: DType) -> str:
        if dtype is DType.BOOL and op in _BOOL_AS_INT:
            return f"({self.binary(op, f'np.uint8({a})', f'np.uint8({b})', DType.U8)}) != 0"
        if op is BOp.DIV and not dtype.is_float:
            # numpy's // floors where C truncates; a - fmod(a, b) is an exact multiple of b.
            # numpy gives 0 for a zero divisor and wraps MIN // -1, as the IR defines both.
            return f"({a} - np.fmod({a}, {b})) // {b}" if dtype.is_signed else f"{a} // {b}"
        if op is BOp.NEXTAFTER:
            return f"nextafter({a}, {b}, {_TYPE[dtype]})"
        if op in _FLOAT_BINARY and dtype.is_float:
            return _FLOAT_BINARY[op].format(a, b)
        return _BINARY[op].format(a, b)


def _literal(op: Const) -> str:
    """Python source for a constant's exact value (``repr`` of a float round-trips); an
    integer past its dtype's range wraps to it, as the IR defines (numpy refuses it)."""
    value = op.wrapped
    if isinstance(value, float) and not math.isfinite(value):
        return f"float('{value}')"
    return repr(value)


def prelude() -> dict[str, Any]:
    """The names rendered kernels use besides their own: numpy, four helpers, and zyx's
    fused multiply-add in numpy (numpy has none; ``a * b + c`` rounds twice)."""
    return {
        "np": np,
        "bfloat16": bfloat16,
        "fma": fma,
        "load": load,
        "store": store,
        "trips": trips,
        "nextafter": nextafter,
    }


def load(memory: Any, index: Any, mask: Any, rows: Any = None) -> Any:
    """Element ``index`` of ``memory`` for each work-item; ``rows`` picks a Define's row.

    Masked-out work-items may hold any index, so they read element 0 instead.
    """
    index = np.where(mask, index, 0)
    return memory[index] if rows is None else memory[rows, index]


def store(memory: Any, index: Any, value: Any, mask: Any, rows: Any = None) -> None:
    """Write ``value`` at ``index`` for each active work-item (the last writer wins a race)."""
    index = np.broadcast_to(index, mask.shape)[mask]
    value = np.broadcast_to(value, mask.shape)[mask]
    if rows is None:
        memory[index] = value
    else:
        memory[rows[mask], index] = value


def trips(size: Any, mask: Any) -> int:
    """How often a loop runs: the largest trip count among the active work-items."""
    return int(np.max(np.where(mask, size, 0), initial=0))


def nextafter(a: Any, b: Any, dtype: Any) -> Any:
    """C's ``nextafter`` in ``dtype`` itself (an f16 or bf16 value computes in float32,
    whose steps are smaller), held as ``a`` is; ``a == b`` gives ``b`` (numpy's float16
    gives ``a``, a zero of the other sign)."""
    x, y = a.astype(dtype), b.astype(dtype)
    return np.where(x == y, y, np.nextafter(x, y)).astype(a.dtype)
