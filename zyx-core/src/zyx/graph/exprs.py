"""Kernel expressions: what lowering builds before it writes IR.

An ``Expr`` is interned by its structure in an ``Exprs`` table, so equal expressions are
one object (common subexpressions are shared for free) and index arithmetic on constants
folds as it is built. ``Emitter`` writes expressions into a ``KernelBuilder``: each one
once per scope, and a loop's invariant expressions before the loop opens.

Shape numbers (sizes, strides, offsets) are ``sym`` expressions, ``Variable`` params of the
kernel, never constants: a kernel built for one shape serves every shape of the same
structure, and its IR is the compile cache's key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from zyx.dtypes import DType
from zyx.ir.builder import KernelBuilder, Value
from zyx.ir.ops import INDEX, BOp, ParamKind, UOp


class Expr:
    """One interned expression. ``kind`` is one of the ``Exprs`` constructors' names."""

    __slots__ = ("kind", "arg", "srcs", "dtype", "depth", "id")

    def __init__(
        self, kind: str, arg: Any, srcs: tuple[Expr, ...], dtype: DType, depth: int, ident: int
    ) -> None:
        self.kind = kind
        self.arg = arg
        self.srcs = srcs
        self.dtype = dtype
        self.depth = depth
        """0: the same for the whole work-item; 1: changes with a loop's counter; more:
        with the counter of a loop nested that deep (the innermost)."""
        self.id = ident

    @property
    def constant(self) -> Any:
        """The value of a ``const``; ``None`` for anything else."""
        return self.arg if self.kind == "const" else None

    def __repr__(self) -> str:
        return f"{self.kind}({self.arg}, {[s.id for s in self.srcs]})#{self.id}"


_FOLD: dict[BOp, Callable[[int, int], int | bool]] = {
    BOp.ADD: lambda a, b: a + b,
    BOp.SUB: lambda a, b: a - b,
    BOp.MUL: lambda a, b: a * b,
    BOp.CMPLT: lambda a, b: a < b,
    BOp.CMPGE: lambda a, b: a >= b,
    BOp.EQ: lambda a, b: a == b,
}


class Exprs:
    """The interning table of one kernel, and the kernel's params in order of first use."""

    def __init__(self) -> None:
        self.table: dict[tuple[Any, ...], Expr] = {}
        self.buffers: list[tuple[DType, ParamKind]] = []
        """Buffer params: dtype and kind, in launch order."""
        self.syms: list[DType] = []
        """Variable params, after the buffers, in launch order."""

    def _make(
        self, kind: str, arg: Any, srcs: tuple[Expr, ...], dtype: DType, depth: int = -1
    ) -> Expr:
        key = (kind, arg, tuple(s.id for s in srcs), dtype)
        found = self.table.get(key)
        if found is None:
            if depth < 0:
                depth = max((s.depth for s in srcs), default=0)
            found = Expr(kind, arg, srcs, dtype, depth, len(self.table))
            self.table[key] = found
        return found

    # ---- leaves ---------------------------------------------------------------------------

    def const(self, value: bool | int | float, dtype: DType = INDEX) -> Expr:
        if dtype is DType.BOOL:
            value = bool(value)
        elif not dtype.is_float:
            value = int(value)
        return self._make("const", (value, type(value)), (), dtype)

    def sym(self, dtype: DType = INDEX) -> Expr:
        """A new ``Variable`` param (its position among the Variables is ``arg``)."""
        self.syms.append(dtype)
        return self._make("sym", len(self.syms) - 1, (), dtype)

    def buffer(self, dtype: DType, kind: ParamKind = ParamKind.GLOBAL) -> int:
        """A new buffer param; returns its slot."""
        self.buffers.append((dtype, kind))
        return len(self.buffers) - 1

    def special(self, kind: str, axis: int, depth: int = 0) -> Expr:
        """``gid``/``lid`` (work-group and work-item index on ``axis``), ``loop`` (the
        counter of loop ``axis``) or ``result`` (reduction pass ``axis``'s value)."""
        return self._make(kind, axis, (), INDEX, depth)

    def result(self, index: int, dtype: DType, depth: int = 0) -> Expr:
        """Reduction pass ``index``'s value: one per work-item, or (``depth``) one per trip
        of a loop of that depth (a work-item that reduces several rows, one per trip)."""
        return self._make("result", index, (), dtype, depth)

    def load(self, slot: int, index: Expr, dtype: DType) -> Expr:
        return self._make("load", slot, (index,), dtype)

    # ---- arithmetic -----------------------------------------------------------------------

    def binary(self, op: BOp, a: Expr, b: Expr) -> Expr:
        dtype = DType.BOOL if op.is_comparison else a.dtype
        ca, cb = a.constant, b.constant
        if ca is not None and cb is not None and op in _FOLD and a.dtype.is_int:
            folded = _FOLD[op](ca[0], cb[0])
            return self.const(folded if op.is_comparison else a.dtype.wrap(int(folded)), dtype)
        if a.dtype.is_int and not op.is_comparison:
            if op is BOp.MOD and cb == (1, int):
                return self.const(0, dtype)
            simpler = _identity(op, a, b)
            if simpler is not None:
                return simpler
        return self._make("binary", op, (a, b), dtype)

    def unary(self, op: UOp, x: Expr) -> Expr:
        return self._make("unary", op, (x,), x.dtype)

    def cast(self, x: Expr, dtype: DType) -> Expr:
        if x.dtype is dtype:
            return x
        if x.constant is not None and not dtype.is_float and not x.dtype.is_float:
            return self.const(dtype.wrap(int(x.constant[0])), dtype)
        return self._make("cast", dtype, (x,), dtype)

    def where(self, cond: Expr, a: Expr, b: Expr) -> Expr:
        if cond.constant is not None:
            return a if cond.constant[0] else b
        if a is b:
            return a
        return self._make("where", None, (cond, a, b), a.dtype)

    # ---- index helpers --------------------------------------------------------------------

    def add(self, a: Expr, b: Expr) -> Expr:
        return self.binary(BOp.ADD, a, b)

    def mul(self, a: Expr, b: Expr) -> Expr:
        return self.binary(BOp.MUL, a, b)

    def div(self, a: Expr, b: Expr) -> Expr:
        return self.binary(BOp.DIV, a, b)

    def mod(self, a: Expr, b: Expr) -> Expr:
        return self.binary(BOp.MOD, a, b)

    def lt(self, a: Expr, b: Expr) -> Expr:
        return self.binary(BOp.CMPLT, a, b)

    def all(self, conds: list[Expr]) -> Expr:
        """The conjunction of bool expressions (``True`` for none)."""
        out = self.const(True, DType.BOOL)
        for c in conds:
            out = (
                c if out.constant is not None and out.constant[0] else self.binary(BOp.AND, out, c)
            )
        return out


def _identity(op: BOp, a: Expr, b: Expr) -> Expr | None:
    """``a op b`` where an integer operand makes it trivial (``x + 0``, ``x * 1``, ...)."""
    ca = a.constant[0] if a.constant is not None else None
    cb = b.constant[0] if b.constant is not None else None
    if op is BOp.ADD:
        return b if ca == 0 else a if cb == 0 else None
    if op is BOp.SUB:
        return a if cb == 0 else None
    if op is BOp.MUL:
        if ca == 0 or cb == 0:
            return a if ca == 0 else b
        return b if ca == 1 else a if cb == 1 else None
    if op is BOp.DIV:
        return a if cb == 1 else None
    return None


class Emitter:
    """Writes expressions into a ``KernelBuilder``, each once per scope.

    ``params`` maps buffer slots and ``sym`` positions to the builder's param values;
    ``specials`` holds the values of ``gid``/``lid``/``loop``/``result`` expressions as
    the kernel's structure creates them.
    """

    def __init__(self, kb: KernelBuilder, buffers: list[Value], syms: list[Value]) -> None:
        self.kb = kb
        self.buffers = buffers
        self.syms = syms
        self.scopes: list[dict[int, Value]] = [{}]

    def bind(self, expr: Expr, value: Value) -> None:
        """``expr`` (a special) has ``value`` in the current scope."""
        self.scopes[-1][expr.id] = value

    @contextmanager
    def scope(self) -> Iterator[None]:
        """Values emitted inside are forgotten after (they live in a loop or an if)."""
        self.scopes.append({})
        try:
            yield
        finally:
            self.scopes.pop()

    def hoist(self, exprs: list[Expr], depth: int = 1) -> None:
        """Emit now every part of ``exprs`` invariant in a loop whose counter has ``depth``
        (before that loop opens): the parts of a lower depth."""
        stack = list(exprs)
        seen: set[int] = set()  # each shared operand once: a walk of paths is exponential
        while stack:
            e = stack.pop()
            if e.id in seen:
                continue
            seen.add(e.id)
            if e.depth < depth:
                self.value(e)
            else:
                stack.extend(e.srcs)

    def value(self, expr: Expr) -> Value:
        for scope in reversed(self.scopes):
            found = scope.get(expr.id)
            if found is not None:
                return found
        # Operands first, iteratively: an expression may be thousands of ops deep.
        stack = [expr]
        while stack:
            e = stack[-1]
            missing = [s for s in e.srcs if self._known(s) is None]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            if self._known(e) is None:
                self.scopes[-1][e.id] = self._emit(e)
        return self.scopes[-1][expr.id]

    def _known(self, expr: Expr) -> Value | None:
        for scope in reversed(self.scopes):
            found = scope.get(expr.id)
            if found is not None:
                return found
        return None

    def _emit(self, e: Expr) -> Value:
        kb = self.kb
        srcs = [self._known(s) for s in e.srcs]
        if e.kind == "const":
            return kb.const(e.arg[0], e.dtype)
        if e.kind == "sym":
            return self.syms[int(e.arg)]
        if e.kind == "load":
            return kb.load(self.buffers[e.arg], srcs[0])  # type: ignore[arg-type]
        if e.kind == "binary":
            return kb.binary(e.arg, srcs[0], srcs[1])  # type: ignore[arg-type]
        if e.kind == "unary":
            return kb.unary(e.arg, srcs[0])  # type: ignore[arg-type]
        if e.kind == "cast":
            return kb.cast(srcs[0], e.arg)  # type: ignore[arg-type]
        if e.kind == "where":
            return kb.where(srcs[0], srcs[1], srcs[2])  # type: ignore[arg-type]
        raise KeyError(f"{e!r} has no value in this scope")
