"""What zyx-cudnn claims, as plain data: a matmul and its epilogue described the way a cuDNN
graph is built from them (``zyx_cudnn.graphs``). A ``Spec`` is hashable and says everything
a claim's launches depend on besides the data: it is the claim's key and the plan cache's.

Every tensor is three-dimensional, (batch, rows, columns), as cuDNN's matmul wants it; a
dim of 1 broadcasts. The product is value 0 of the epilogue; step ``i`` computes value
``i + 1`` from earlier values and operands; the last value is the output.
"""

from __future__ import annotations

from dataclasses import dataclass

from zyx.dtypes import DType

OUTPUT = -1
"""The ``source`` of the output's layout: the claim's own output buffer."""


@dataclass(frozen=True)
class Layout:
    """A tensor in device memory: ``dims`` and ``strides`` (elements) over (batch, rows,
    columns), read from the claim's input ``source`` (``OUTPUT``: its output) starting
    ``offset`` elements into that buffer."""

    dims: tuple[int, int, int]
    strides: tuple[int, int, int]
    offset: int
    dtype: DType
    source: int


@dataclass(frozen=True)
class Scalar:
    """A number passed by value (cuDNN's pass-by-value tensor): the claim's input ``source``,
    a Python number at each launch (an ``Op.SCALAR`` node, whose value is not part of the
    graph's structure), else the constant ``value``. ``nan`` passes NaN where that number
    is NaN and 0.0 otherwise (``nan_guard``)."""

    dtype: DType
    source: int | None = None
    value: float | None = None
    nan: bool = False


Operand = Layout | Scalar

Ref = tuple[str, int]
"""``("value", i)`` or ``("operand", j)``."""


@dataclass(frozen=True)
class Step:
    """One pointwise op of the epilogue: cuDNN's ``op`` (the frontend's method name) of
    ``args``; ``dtype`` is zyx's dtype of the result (bool for a comparison)."""

    op: str
    args: tuple[Ref, ...]
    dtype: DType


@dataclass(frozen=True)
class Spec:
    """``out = epilogue(a @ b)``, accumulated in f32. ``tf32``: an f32 product may use
    TF32 tensor cores (``cudnn.allow_tf32``); else an f32 product is true fp32."""

    a: Layout
    b: Layout
    out: Layout
    operands: tuple[Operand, ...] = ()
    steps: tuple[Step, ...] = ()
    tf32: bool = False

    @property
    def dtype(self) -> DType:
        """The product's dtype (both operands have it)."""
        return self.a.dtype

    def describe(self) -> str:
        """``bf16 [8, 64, 32] @ [8, 32, 16] -> add, max`` for logs."""
        steps = ", ".join(s.op for s in self.steps)
        a, b = list(self.a.dims), list(self.b.dims)
        return f"{self.dtype.value} {a} @ {b}" + (f" -> {steps}" if steps else "")
