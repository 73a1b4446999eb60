"""Write kernels by hand.

Example, ``c[i] = a[i] + b[i]`` for ``i < n`` in groups of 256 work-items::

    kb = KernelBuilder("add")
    a, b = kb.param(DType.F32), kb.param(DType.F32)
    c = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    n = kb.variable(DType.I64)
    i = kb.group(0, ceil_div(n, 256)) * 256 + kb.local(0, 256)
    with kb.if_(i < n):
        c[i] = a[i] + b[i]
    kernel = kb.build()

``Value`` overloads Python's operators (``+ - * / % ** < > <= >= & | ^ << >> -x ~x``) and
turns Python numbers into constants of the other operand's dtype; ``unary``, ``binary``
and ``where`` build every other op (``kb.where(x < 0, 0.0, x)``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeAlias

from zyx.dtypes import DType
from zyx.errors import IRError
from zyx.ir.ops import (
    INDEX,
    Barrier,
    Binary,
    BOp,
    Cast,
    CommitCopies,
    Const,
    CopyAsync,
    Define,
    Dim,
    EndIf,
    EndLoop,
    Fma,
    If,
    Kernel,
    LdMatrix,
    Load,
    Loop,
    Mma,
    Op,
    Param,
    ParamKind,
    Range,
    Ref,
    Scope,
    Shuffle,
    Storage,
    Store,
    SymDim,
    Unary,
    UOp,
    WaitCopies,
    Where,
    own_dtype,
)
from zyx.ir.verify import verify

Scalar: TypeAlias = bool | int | float
Operand: TypeAlias = "Value | Scalar"

_log = logging.getLogger("zyx.ir")


class Value:
    """A value in a kernel under construction. Indexing a buffer or ``Define`` loads/stores."""

    __slots__ = ("builder", "ref", "dtype")

    def __init__(self, builder: KernelBuilder, ref: Ref, dtype: DType) -> None:
        self.builder = builder
        self.ref = ref
        self.dtype = dtype

    def _bin(self, op: BOp, other: Operand, swap: bool = False) -> Value:
        rhs = self.builder.value(other, self.dtype)
        return self.builder.binary(op, rhs, self) if swap else self.builder.binary(op, self, rhs)

    def __add__(self, o: Operand) -> Value:
        return self._bin(BOp.ADD, o)

    def __radd__(self, o: Operand) -> Value:
        return self._bin(BOp.ADD, o, True)

    def __sub__(self, o: Operand) -> Value:
        return self._bin(BOp.SUB, o)

    def __rsub__(self, o: Operand) -> Value:
        return self._bin(BOp.SUB, o, True)

    def __mul__(self, o: Operand) -> Value:
        return self._bin(BOp.MUL, o)

    def __rmul__(self, o: Operand) -> Value:
        return self._bin(BOp.MUL, o, True)

    def __truediv__(self, o: Operand) -> Value:
        return self._bin(BOp.DIV, o)

    def __rtruediv__(self, o: Operand) -> Value:
        return self._bin(BOp.DIV, o, True)

    def __mod__(self, o: Operand) -> Value:
        return self._bin(BOp.MOD, o)

    def __pow__(self, o: Operand) -> Value:
        return self._bin(BOp.POW, o)

    def __lt__(self, o: Operand) -> Value:
        return self._bin(BOp.CMPLT, o)

    def __gt__(self, o: Operand) -> Value:
        return self._bin(BOp.CMPGT, o)

    def __ge__(self, o: Operand) -> Value:
        return self._bin(BOp.CMPGE, o)

    def __le__(self, o: Operand) -> Value:
        return self._bin(BOp.CMPGE, o, True)

    def __and__(self, o: Operand) -> Value:
        return self._bin(BOp.BITAND, o)

    def __or__(self, o: Operand) -> Value:
        return self._bin(BOp.BITOR, o)

    def __xor__(self, o: Operand) -> Value:
        return self._bin(BOp.BITXOR, o)

    def __lshift__(self, o: Operand) -> Value:
        return self._bin(BOp.SHL, o)

    def __rshift__(self, o: Operand) -> Value:
        return self._bin(BOp.SHR, o)

    def __neg__(self) -> Value:
        return self.builder.unary(UOp.NEG, self)

    def __invert__(self) -> Value:
        return self.builder.unary(UOp.BITNOT, self)

    def eq(self, o: Operand) -> Value:
        return self._bin(BOp.EQ, o)

    def ne(self, o: Operand) -> Value:
        return self._bin(BOp.NOTEQ, o)

    def cast(self, dtype: DType) -> Value:
        return self.builder.cast(self, dtype)

    def __getitem__(self, index: Operand) -> Value:
        return self.builder.load(self, index)

    def __setitem__(self, index: Operand, value: Operand) -> None:
        self.builder.store(self, index, value)

    def __repr__(self) -> str:
        return f"%{self.ref}:{self.dtype}"


class KernelBuilder:
    """Appends ops in order; ``build()`` verifies and returns the ``Kernel``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.ops: list[Op] = []
        self._dtypes: list[DType | None] = []
        """The dtype of each op's value (``None``: it has none)."""

    def _emit(self, op: Op) -> Ref:
        self._dtypes.append(own_dtype(op, self._dtypes))
        self.ops.append(op)
        return len(self.ops) - 1

    def _val(self, op: Op) -> Value:
        ref = self._emit(op)
        dtype = self._dtypes[ref]
        if dtype is None:
            raise TypeError(f"%{ref} ({type(op).__name__}) produces no value")
        return Value(self, ref, dtype)

    def param(self, dtype: DType, kind: ParamKind = ParamKind.GLOBAL, name: str = "") -> Value:
        """A buffer param (read-only by default) or, with ``VARIABLE``, a scalar."""
        return self._val(Param(dtype, kind, name))

    def variable(self, dtype: DType = INDEX, name: str = "") -> Value:
        return self.param(dtype, ParamKind.VARIABLE, name)

    def group(self, axis: int, size: Dim) -> Value:
        """The work-group index along ``axis``; ``size`` groups (may be a ``SymDim``)."""
        return self._val(Range(axis, Scope.GROUP, size))

    def local(self, axis: int, size: int) -> Value:
        """The work-item index within its group along ``axis``."""
        return self._val(Range(axis, Scope.LOCAL, size))

    def const(self, value: Scalar, dtype: DType) -> Value:
        return self._val(Const(dtype, value))

    def value(self, x: Operand, dtype: DType) -> Value:
        """``x`` itself, or a constant of ``dtype`` when ``x`` is a Python number."""
        if isinstance(x, Value):
            self._own(x)
            return x
        return self.const(x, dtype)

    def _own(self, x: Value) -> Ref:
        """``x``'s ref, once ``x`` is known to be a value of this kernel: a ref names an op
        of the kernel that made it, and in another it would name some other op."""
        if x.builder is not self:
            raise IRError(
                f"kernel {self.name!r}: a value of kernel {x.builder.name!r} is used here; "
                "build each kernel from its own params and values"
            )
        return x.ref

    def define(self, dtype: DType, length: int = 1, storage: Storage = Storage.REGISTER) -> Value:
        return self._val(Define(dtype, storage, length))

    def load(self, src: Value, index: Operand) -> Value:
        return self._val(Load(self._own(src), self.value(index, INDEX).ref))

    def store(self, dst: Value, index: Operand, value: Operand) -> None:
        v = self.value(value, dst.dtype)
        self._emit(Store(self._own(dst), self.value(index, INDEX).ref, v.ref))

    def cast(self, x: Value, dtype: DType) -> Value:
        return self._val(Cast(self._own(x), dtype))

    def unary(self, op: UOp, x: Value) -> Value:
        return self._val(Unary(op, self._own(x)))

    def binary(self, op: BOp, a: Operand, b: Operand) -> Value:
        av = self.value(a, b.dtype if isinstance(b, Value) else INDEX)
        bv = self.value(b, av.dtype)
        return self._val(Binary(op, av.ref, bv.ref))

    def maximum(self, a: Value, b: Operand) -> Value:
        return self.binary(BOp.MAX, a, b)

    def minimum(self, a: Value, b: Operand) -> Value:
        return self.binary(BOp.MIN, a, b)

    def fma(self, a: Value, b: Operand, c: Operand) -> Value:
        """``a * b + c`` rounded once (``zyx.ir.Fma``); a Python number takes ``a``'s dtype."""
        av = self.value(a, a.dtype)
        bv, cv = self.value(b, a.dtype), self.value(c, a.dtype)
        return self._val(Fma(av.ref, bv.ref, cv.ref))

    def where(self, cond: Operand, a: Operand, b: Operand) -> Value:
        """``a`` where ``cond`` is true, else ``b`` (both computed: a select). A Python
        number takes the other operand's dtype, as in ``binary``."""
        av = self.value(a, b.dtype if isinstance(b, Value) else INDEX)
        bv = self.value(b, av.dtype)
        return self._val(Where(self.value(cond, DType.BOOL).ref, av.ref, bv.ref))

    def barrier(self) -> None:
        self._emit(Barrier())

    def mma(
        self, c: Value, a: Value, b: Value, c_at: int = 0, a_at: int = 0, b_at: int = 0
    ) -> None:
        """``C += A @ B`` by each warp, on register fragments from these offsets (``Mma``)."""
        self._emit(Mma(self._own(c), self._own(a), self._own(b), c_at, a_at, b_at))

    def ldmatrix(
        self, dst: Value, src: Value, index: Value, count: int = 4, trans: bool = False, at: int = 0
    ) -> None:
        """A warp's ``count`` 8 x 8 matrices from local memory into fragments (``LdMatrix``)."""
        self._emit(LdMatrix(self._own(dst), self._own(src), self._own(index), count, trans, at))

    def shuffle(self, x: Value, mask: int) -> Value:
        """``x`` of the work-item of lane ``lane ^ mask`` in this one's warp (``Shuffle``)."""
        return self._val(Shuffle(self._own(x), mask))

    def copy_async(
        self, dst: Value, index: Operand, src: Value, src_index: Operand, count: int,
        cond: Operand = True,
    ) -> None:  # fmt: skip
        """``count`` elements of ``src`` from ``src_index`` into local ``dst`` from ``index``
        (zeros where ``cond`` is false), completed by a later ``wait_copies`` (``CopyAsync``)."""
        at, src_at = self.value(index, INDEX).ref, self.value(src_index, INDEX).ref
        flag = self.value(cond, DType.BOOL).ref
        self._emit(CopyAsync(self._own(dst), at, self._own(src), src_at, flag, count))

    def commit_copies(self) -> None:
        """The copies issued since the last commit become a group (``CommitCopies``)."""
        self._emit(CommitCopies())

    def wait_copies(self, pending: int = 0) -> None:
        """Until at most ``pending`` committed groups of copies are incomplete (``WaitCopies``)."""
        self._emit(WaitCopies(pending))

    @contextmanager
    def loop(self, size: Operand) -> Iterator[Value]:
        """``for i in range(size)``: yields the counter."""
        counter = self._val(Loop(self.value(size, INDEX).ref))
        yield counter
        self._emit(EndLoop())

    @contextmanager
    def if_(self, cond: Value) -> Iterator[None]:
        self._emit(If(self._own(cond)))
        yield
        self._emit(EndIf())

    def build(self) -> Kernel:
        kernel = Kernel(self.name, tuple(self.ops))
        verify(kernel)
        if _log.isEnabledFor(logging.DEBUG):
            _log.debug("%s", kernel)  # its listing, one op per line
        return kernel


def ceil_div(variable: Value, div: int) -> SymDim:
    """A group count of ``ceil(variable / div)`` for a ``Variable`` param ``variable``."""
    ops = variable.builder.ops
    op = ops[variable.ref]
    if not (isinstance(op, Param) and op.kind is ParamKind.VARIABLE):
        raise TypeError(f"ceil_div needs a Variable param, got {op}")
    position = sum(isinstance(o, Param) for o in ops[: variable.ref])
    return SymDim(position, div)
