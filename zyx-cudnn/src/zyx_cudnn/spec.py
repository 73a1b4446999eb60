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

    @property
    def nbytes(self) -> int:
        """The bytes of its buffer it reaches, its offset included."""
        last = sum((d - 1) * s for d, s in zip(self.dims, self.strides, strict=True))
        return (self.offset + last + 1) * self.dtype.itemsize


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
class Input:
    """One of a claim's inputs as its launches take it: a number of dtype ``number``, else
    a buffer of which they read the first ``nbytes``."""

    number: DType | None
    nbytes: int = 0


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

    @property
    def layouts(self) -> tuple[Layout, ...]:
        """Every tensor in device memory: the operands of the product, the output, then the
        epilogue's tensors."""
        return (self.a, self.b, self.out, *(o for o in self.operands if isinstance(o, Layout)))

    @property
    def inputs(self) -> tuple[Input, ...]:
        """The claim's inputs, by ``source``."""
        numbers = {
            o.source: o.dtype
            for o in self.operands
            if isinstance(o, Scalar) and o.source is not None
        }
        reads: dict[int, int] = {}
        for t in self.layouts:
            if t.source != OUTPUT:
                reads[t.source] = max(reads.get(t.source, 0), t.nbytes)
        count = 1 + max(*numbers, *reads)
        return tuple(
            Input(numbers[i]) if i in numbers else Input(None, reads[i]) for i in range(count)
        )

    def describe(self) -> str:
        """``bf16 [8, 64, 32] @ [8, 32, 16] -> add, max`` for logs."""
        steps = ", ".join(s.op for s in self.steps)
        a, b = list(self.a.dims), list(self.b.dims)
        return f"{self.dtype.value} {a} @ {b}" + (f" -> {steps}" if steps else "")
