"""How far into its buffers a kernel's loads and stores reach: what a launch checks.

``extents(kernel)`` finds, once per kernel (``Program`` calls it at compile time), the
indices each ``Load`` and ``Store`` of a buffer param reaches, as bounds in terms of the
launch's ``Variable`` arguments. A launch then only evaluates them (not at all where no
``Variable`` enters them; once per distinct set of values where one does) and compares
each buffer's size with what its param needs: ``Program.inspect`` in Python, tracker.c's
``zyx_fits`` in the backends' native launchers, from the same instructions (``code``).

**Known and unknown.** A launch is refused only where the kernel would certainly go out
of bounds: where the bound an access reaches is *reached* by some work-item that runs it,
for the arguments given. The analysis proves that for accesses whose index is an affine
form of independent work-group and work-item ranges, loop counters (a trip count of
``Variable``\\s and constants) and ``Variable``\\s, divided by or clamped (``min``,
``max``) with ``Variable``\\s, under ``If``\\s that compare such a form whose values have no
gaps (``gid * 256 + lid``, not ``gid * 1024 + lid`` with 256 work-items) with a bound, or
that compare ``Variable``\\s. Every other access is *unknown* and not checked at launch
(``Extents.unchecked`` says which and why): an index computed from loaded data (a gather),
a ``Where`` or ``%`` in the index, an access under an ``If`` whose condition is not such a
comparison or inside a loop whose trip count differs between work-items, ranges combined
so that their extremes need not meet (``i % n * s + i / n``). The ``zyx.ir`` package
docstring lists what stays undefined; the bounds-checked mode (``zyx.debug.BOUNDS``)
checks every access as it runs.

**The instructions.** Bounds are nodes of one program, ``code``, in which every node is
``(op, a, b, c)`` over earlier nodes (``a``, ``b``, ``c``; a constant's value, a
``Variable``'s param position), evaluated in exact integers in Python and in ``long long``
in C, where an overflow hands the launch to the Python path. ``needs[i]`` is the node of
param ``i``'s need in bytes (``-1``: nothing known): the largest ``(index + 1) * itemsize``
its known accesses reach, ``0`` where none of them runs (no work-group, a loop of no trip,
a guard no work-item passes), ``NEGATIVE`` where one reaches a negative index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from zyx.dtypes import DType
from zyx.ir.ops import (
    INDEX,
    Binary,
    BOp,
    Cast,
    Const,
    CopyAsync,
    Define,
    EndIf,
    EndLoop,
    Fma,
    If,
    Kernel,
    Load,
    Loop,
    Param,
    ParamKind,
    Range,
    Ref,
    Shuffle,
    Store,
    SymDim,
    Unary,
    UOp,
    Where,
    always,
    format_op,
)

CONST, VAR, ADD, MUL, NEG, TDIV, TMOD, MIN, MAX, SEL, FDIV = range(11)
"""The ops of ``code``: ``CONST`` (value ``a``), ``VAR`` (the ``Variable`` at param position
``a``), ``ADD``, ``MUL``, ``NEG``, ``TDIV`` and ``TMOD`` (C's ``/`` and ``%``: truncating, 0
for a zero divisor, as the IR has them), ``MIN``, ``MAX``, ``SEL`` (``b`` where ``a >= 1``,
else ``c``), ``FDIV`` (floor division, 0 for a zero divisor)."""

NEGATIVE = (1 << 63) - 1
"""The need of a param that an access reaches at a negative index: more than any buffer."""

Instruction = tuple[int, int, int, int]


def _tdiv(a: int, b: int) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _tmod(a: int, b: int) -> int:
    return 0 if b == 0 else a - b * _tdiv(a, b)


def run(code: Sequence[Instruction], values: Sequence[Any]) -> list[int]:
    """Every node of ``code`` for the launch arguments ``values``, in exact integers (the
    specification of tracker.c's ``zyx_extents_run``)."""
    r: list[int] = []
    append = r.append
    for op, a, b, c in code:
        if op == CONST:
            append(a)
        elif op == VAR:
            append(int(values[a]))
        elif op == ADD:
            append(r[a] + r[b])
        elif op == MUL:
            append(r[a] * r[b])
        elif op == NEG:
            append(-r[a])
        elif op == SEL:
            append(r[b] if r[a] >= 1 else r[c])
        elif op == MIN:
            append(min(r[a], r[b]))
        elif op == MAX:
            append(max(r[a], r[b]))
        elif op == TDIV:
            append(_tdiv(r[a], r[b]))
        elif op == TMOD:
            append(_tmod(r[a], r[b]))
        else:
            append(r[a] // r[b] if r[b] else 0)
    return r


class _Nodes:
    """The nodes of ``code`` as they are made: each distinct node once, constants folded."""

    def __init__(self) -> None:
        self.code: list[Instruction] = []
        self._index: dict[Instruction, int] = {}

    def node(self, op: int, a: int, b: int = 0, c: int = 0) -> int:
        key = (op, a, b, c)
        found = self._index.get(key)
        if found is None:
            found = self._index[key] = len(self.code)
            self.code.append(key)
        return found

    def value(self, n: int) -> int | None:
        """The constant node ``n`` is, or ``None``."""
        op, a, _, _ = self.code[n]
        return a if op == CONST else None

    def const(self, value: int) -> int:
        return self.node(CONST, value)

    def var(self, position: int) -> int:
        return self.node(VAR, position)

    def add(self, a: int, b: int) -> int:
        x, y = self.value(a), self.value(b)
        if x is not None and y is not None:
            return self.const(x + y)
        if x == 0:
            return b
        if y == 0:
            return a
        return self.node(ADD, min(a, b), max(a, b))

    def neg(self, a: int) -> int:
        x = self.value(a)
        if x is not None:
            return self.const(-x)
        op, inner, _, _ = self.code[a]
        return inner if op == NEG else self.node(NEG, a)

    def sub(self, a: int, b: int) -> int:
        return self.add(a, self.neg(b))

    def mul(self, a: int, b: int) -> int:
        x, y = self.value(a), self.value(b)
        if x is not None and y is not None:
            return self.const(x * y)
        if x == 0 or y == 0:
            return self.const(0)
        if x == 1:
            return b
        if y == 1:
            return a
        return self.node(MUL, min(a, b), max(a, b))

    def tdiv(self, a: int, b: int) -> int:
        x, y = self.value(a), self.value(b)
        if x is not None and y is not None:
            return self.const(_tdiv(x, y))
        if y == 1:
            return a
        return self.const(0) if y == 0 else self.node(TDIV, a, b)

    def tmod(self, a: int, b: int) -> int:
        x, y = self.value(a), self.value(b)
        if x is not None and y is not None:
            return self.const(_tmod(x, y))
        return self.const(0) if y in (0, 1, -1) else self.node(TMOD, a, b)

    def fdiv(self, a: int, b: int) -> int:
        x, y = self.value(a), self.value(b)
        if x is not None and y is not None:
            return self.const(x // y if y else 0)
        return a if y == 1 else self.node(FDIV, a, b)

    def ceil_div(self, a: int, d: int) -> int:
        return self.neg(self.fdiv(self.neg(a), self.const(d)))

    def min(self, a: int, b: int) -> int:
        x, y = self.value(a), self.value(b)
        if x is not None and y is not None:
            return self.const(min(x, y))
        return a if a == b else self.node(MIN, min(a, b), max(a, b))

    def max(self, a: int, b: int) -> int:
        x, y = self.value(a), self.value(b)
        if x is not None and y is not None:
            return self.const(max(x, y))
        return a if a == b else self.node(MAX, min(a, b), max(a, b))

    def sel(self, cond: int, a: int, b: int) -> int:
        x = self.value(cond)
        if x is not None:
            return a if x >= 1 else b
        return a if a == b else self.node(SEL, cond, a, b)

    def uses_variables(self, n: int) -> bool:
        return any(op == VAR for op, *_ in self.code[: n + 1])


@dataclass(frozen=True, eq=False)
class _Atom:
    """A value that ranges over ``lo..hi`` (nodes), both reached in the region its scope
    runs: a range, a loop counter, or one derived from a form of others (``base``: the
    ranges and counters it depends on; ``accounts``: the guards whose restriction its
    bounds already take into account)."""

    ident: int
    lo: int
    hi: int
    base: frozenset[int]
    accounts: frozenset[int]
    dense: bool
    """Whether it takes every integer of ``lo..hi``."""
    span: int
    """A constant lower bound of ``hi - lo``."""


@dataclass(frozen=True)
class _Form:
    """``const + sum(coef * atom)`` (nodes for ``const`` and the coefficients)."""

    const: int
    terms: tuple[tuple[_Atom, int], ...] = ()


@dataclass
class _Scope:
    conds: list[int] = field(default_factory=list)
    """Nodes that are ``>= 1`` exactly where the scope's body runs for some work-item."""
    guards: list[_Atom] = field(default_factory=list)
    """The atoms its ``If`` restricted: values of their bases not accounting for them
    are not reached in the body as they were outside."""
    overrides: dict[Ref, _Form] = field(default_factory=dict)
    modeled: bool = True


@dataclass(frozen=True)
class Access:
    """A ``Load``, ``Store`` or ``CopyAsync`` of a buffer param."""

    ref: Ref
    """The op."""
    kind: str
    """``"Load"``, ``"Store"`` or ``"CopyAsync"``."""
    param: int
    """The param's position."""
    lo: int = -1
    hi: int = -1
    """The nodes of the lowest and highest index it reaches (``-1``: unknown)."""
    conds: tuple[int, ...] = ()
    """Nodes that are all ``>= 1`` exactly where some work-item runs it."""
    reason: str = ""
    """Why its extent is unknown; ``""`` where it is known."""

    @property
    def known(self) -> bool:
        return not self.reason


@dataclass(frozen=True)
class Reach:
    """What one known access reaches at a launch (``Extents.reaches``)."""

    access: Access
    runs: bool
    lo: int
    hi: int


class Extents:
    """What a kernel's accesses reach in each of its buffer params (the module docstring)."""

    def __init__(self, kernel: Kernel, accesses: list[Access], nodes: _Nodes) -> None:
        self.name = kernel.name
        self.params = kernel.params
        self._kernel = kernel
        self.accesses = tuple(accesses)
        self._nodes = nodes.code
        needs = [-1] * len(kernel.params)
        for access in accesses:
            if access.known:
                need = _need(nodes, access, kernel.params[access.param].dtype.itemsize)
                current = needs[access.param]
                needs[access.param] = need if current < 0 else nodes.max(current, need)
        self.code, self.needs = _prune(nodes.code, needs)
        """The instructions of the needs (only those), and each param's node (``-1``:
        nothing known)."""
        self.sized = tuple(i for i, n in enumerate(self.needs) if n >= 0)
        """The positions of the params with a known need."""
        self.variables = tuple(sorted({a for op, a, _, _ in self.code if op == VAR}))
        """The ``Variable`` positions the needs depend on."""
        self.static: tuple[int, ...] | None = None
        """The needs in bytes of every launch (0 where unknown), where they depend on no
        ``Variable``; ``None`` where they do."""
        if not self.variables:
            self.static = self._evaluate(())
        self._single = self.variables[0] if len(self.variables) == 1 else -1
        self._last: tuple[object, tuple[int, ...]] = (_NO_KEY, ())
        self._seen: dict[object, tuple[int, ...]] = {}

    @property
    def unchecked(self) -> tuple[Access, ...]:
        """The accesses whose extent is unknown: a launch does not check them."""
        return tuple(a for a in self.accesses if not a.known)

    def needs_of(self, values: Sequence[Any]) -> tuple[int, ...]:
        """Per param, the bytes a launch with ``values`` (checked: plain ints at the
        ``Variable``\\s) needs its buffer to hold; 0 where nothing is known. Remembered per
        distinct values of the ``variables``."""
        if self.static is not None:
            return self.static
        single = self._single
        key: object = values[single] if single >= 0 else tuple([values[p] for p in self.variables])
        last = self._last
        if last[0] == key:
            return last[1]
        needs = self._seen.get(key)
        if needs is None:
            needs = self._evaluate(values)
            if len(self._seen) >= _REMEMBERED:
                self._seen.clear()
            self._seen[key] = needs
        self._last = (key, needs)
        return needs

    def _evaluate(self, values: Sequence[Any]) -> tuple[int, ...]:
        r = run(self.code, values)
        return tuple(0 if n < 0 else r[n] for n in self.needs)

    def reaches(self, values: Sequence[Any], param: int) -> list[Reach]:
        """What each known access of ``param`` reaches at a launch of ``values``."""
        r = run(self._nodes, values)
        return [
            Reach(a, all(r[c] >= 1 for c in a.conds), r[a.lo], r[a.hi])
            for a in self.accesses
            if a.param == param and a.known
        ]

    def describe(self, param: int) -> str:
        """``"argument 2 ('c', GlobalMut f32)"``: a param as messages name it."""
        return describe_param(self._kernel, param)

    def refusal(self, values: Sequence[Any], param: int, nbytes: int) -> str:
        """Why a launch of ``values`` whose buffer at ``param`` holds ``nbytes`` is refused."""
        itemsize = self.params[param].dtype.itemsize
        worst: Reach | None = None
        for reach in self.reaches(values, param):
            if reach.runs and (reach.lo < 0 or (reach.hi + 1) * itemsize > nbytes):
                if worst is None or reach.lo < 0 or reach.hi > worst.hi:
                    worst = reach
                    if reach.lo < 0:
                        break
        holds = f"holds {nbytes // itemsize} elements ({nbytes} bytes)"
        if worst is None:  # cannot happen: the needs say one does
            return f"{self.name}: the buffer of {self.describe(param)} {holds}: too few"
        index = worst.lo if worst.lo < 0 else worst.hi
        return (
            f"{self.name}: op %{worst.access.ref} ({worst.access.kind}) reaches index {index} "
            f"of {self.describe(param)} for these arguments, whose buffer {holds}"
        )

    def __repr__(self) -> str:
        known = sum(a.known for a in self.accesses)
        return f"<Extents of {self.name}: {known} of {len(self.accesses)} accesses known>"


_NO_KEY = object()
_REMEMBERED = 256
"""The most distinct ``Variable`` values a program remembers its needs for."""


def describe_param(kernel: Kernel, position: int) -> str:
    """``"argument 2 ('c', GlobalMut f32)"``: a param as messages name it."""
    p = kernel.params[position]
    name = f"{p.name!r}, " if p.name else ""
    return f"argument {position} ({name}{p.kind.value} {p.dtype})"


def out_of_bounds(
    kernel: Kernel, ref: Ref, index: int, length: int, memory: Ref | None = None
) -> str:
    """The message of the ``Load`` or ``Store`` ``ref`` at ``index`` of a buffer or array of
    ``length`` elements (or of a ``CopyAsync``'s, in ``memory``, its source or destination):
    what the interpreter and the bounds-checked mode raise."""
    op = kernel.ops[ref]
    if memory is None:
        assert isinstance(op, (Load, Store))
        memory = op.src if isinstance(op, Load) else op.dst
    if memory in kernel.param_refs:
        what = describe_param(kernel, kernel.param_refs.index(memory))
    else:
        define = kernel.ops[memory]
        assert isinstance(define, Define)
        what = f"%{memory} ({define.storage.value} {define.dtype}[{define.length}])"
    return (
        f"kernel {kernel.name!r}, op %{ref} ({format_op(op)}): index {index} out of bounds "
        f"for {length} elements of {what}"
    )


def _need(nodes: _Nodes, access: Access, itemsize: int) -> int:
    need = nodes.sel(
        nodes.add(access.lo, nodes.const(1)),
        nodes.mul(nodes.add(access.hi, nodes.const(1)), nodes.const(itemsize)),
        nodes.const(NEGATIVE),
    )
    for cond in reversed(access.conds):
        need = nodes.sel(cond, need, nodes.const(0))
    return need


def _prune(
    code: list[Instruction], roots: list[int]
) -> tuple[tuple[Instruction, ...], tuple[int, ...]]:
    """The instructions ``roots`` depend on, renumbered in order, and the roots' new numbers."""
    keep = [False] * len(code)
    stack = [r for r in roots if r >= 0]
    while stack:
        n = stack.pop()
        if keep[n]:
            continue
        keep[n] = True
        op, a, b, c = code[n]
        if op in (CONST, VAR):
            continue
        stack.append(a)
        if op != NEG:
            stack.append(b)
        if op == SEL:
            stack.append(c)
    number: dict[int, int] = {}
    out: list[Instruction] = []
    for n, (op, a, b, c) in enumerate(code):
        if not keep[n]:
            continue
        if op not in (CONST, VAR):
            a = number[a]
            b = number[b] if op != NEG else 0
            c = number[c] if op == SEL else 0
        number[n] = len(out)
        out.append((op, a, b, c))
    return tuple(out), tuple(number[r] if r >= 0 else -1 for r in roots)


def extents(kernel: Kernel) -> Extents:
    """What ``kernel``'s loads and stores of buffer params reach (the module docstring)."""
    return _Analysis(kernel).run()


_NARROW_INTS = frozenset({DType.I8, DType.I16, DType.I32, DType.U8, DType.U16, DType.U32})
"""Int dtypes whose every value an ``INDEX`` cast keeps (not u64: its upper half wraps)."""

_DATA = "its index depends on data the kernel loads"
_OPS = (
    "its index is computed by ops the check does not follow (a Where, %, a cast, or a "
    "product of two ranges)"
)
_UNREACHED = (
    "its index combines values whose extremes need not meet in one work-item (ranges "
    "used twice, or a guard's range used beside its guarded form)"
)
_SCOPE = (
    "it runs under an If whose condition is not a comparison of a gap-free form with a "
    "bound (or of Variables), or in a loop whose trip count is not one of Variables"
)


_GUARDS = {
    (True, BOp.CMPLT): (True, -1), (True, BOp.CMPGT): (False, 1), (True, BOp.CMPGE): (False, 0),
    (False, BOp.CMPLT): (False, 1), (False, BOp.CMPGT): (True, -1), (False, BOp.CMPGE): (True, 0),
}  # fmt: skip
"""``(form on the left, comparison)`` to ``(whether it bounds the form from above, the
offset of the bound)``: ``form < u`` is ``hi <= u - 1``, ``u >= form`` is ``hi <= u``."""


class _Analysis:
    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.ops = kernel.ops
        self.nodes = _Nodes()
        self.forms: list[_Form | None] = [None] * len(self.ops)
        self.narrow: dict[Ref, int] = {}
        """Uniform values of int params and constants of other dtypes than ``INDEX``,
        for the ``Cast`` that makes them indices."""
        self.compares: dict[Ref, tuple[Any, Ref, Ref]] = {}
        """Comparisons of ``INDEX`` values, and ``and`` of bools: ``(op, a, b)``."""
        self.data: set[Ref] = set()
        self.position = {ref: i for i, ref in enumerate(kernel.param_refs)}
        # No work-item runs without a group on every axis: a launch of none touches nothing.
        groups = [d for d in kernel.global_size if isinstance(d, SymDim)]
        self.scopes = [
            _Scope(conds=[self.nodes.ceil_div(self.nodes.var(d.param), d.div) for d in groups])
        ]
        self.accesses: list[Access] = []
        self.atoms = 0

    # ---- values -------------------------------------------------------------------------

    def atom(self, lo: int, hi: int, *, base: frozenset[int] | None = None,
             accounts: frozenset[int] = frozenset(), dense: bool = True, span: int = 0,
             guard: bool = False) -> _Atom:  # fmt: skip
        ident = self.atoms
        self.atoms += 1
        return _Atom(
            ident, lo, hi, frozenset({ident}) if base is None else base,
            accounts | {ident} if guard else accounts, dense, max(0, span),
        )  # fmt: skip

    def uniform(self, node: int) -> _Form:
        return _Form(node)

    def of_atom(self, atom: _Atom) -> _Form:
        return _Form(self.nodes.const(0), ((atom, self.nodes.const(1)),))

    def form(self, ref: Ref) -> _Form | None:
        for scope in reversed(self.scopes):
            if ref in scope.overrides:
                return scope.overrides[ref]
        return self.forms[ref]

    def add(self, f: _Form, g: _Form) -> _Form:
        n = self.nodes
        coefs: dict[int, tuple[_Atom, int]] = {a.ident: (a, c) for a, c in f.terms}
        for atom, coef in g.terms:
            if atom.ident in coefs:
                coef = n.add(coefs[atom.ident][1], coef)
            coefs[atom.ident] = (atom, coef)
        terms = tuple((a, c) for _, (a, c) in sorted(coefs.items()) if n.value(c) != 0)
        return _Form(n.add(f.const, g.const), terms)

    def scale(self, f: _Form, s: int) -> _Form:
        n = self.nodes
        if n.value(s) == 0:
            return _Form(n.const(0))
        return _Form(n.mul(f.const, s), tuple((a, n.mul(c, s)) for a, c in f.terms))

    def valid(self, atom: _Atom) -> bool:
        """Whether ``atom``'s bounds are reached in the current scope: no guard around it
        restricts the ranges it depends on without its bounds accounting for that."""
        return all(
            not (atom.base & guard.base) or guard.ident in atom.accounts
            for scope in self.scopes
            for guard in scope.guards
        )

    def bounds(self, f: _Form) -> tuple[int, int, bool, int] | None:
        """``(lo, hi, dense, span)`` of ``f`` in the current scope, both bounds reached by
        some work-item where the scope runs; ``None`` where that is not known."""
        n = self.nodes
        seen: frozenset[int] = frozenset()
        for atom, _ in f.terms:
            if not self.valid(atom) or atom.base & seen:
                return None
            seen |= atom.base
        lo = hi = f.const
        steps: list[tuple[int, _Atom]] = []
        for atom, coef in f.terms:
            value = n.value(coef)
            if value is not None:
                steps.append((abs(value), atom))
            if value is not None and value > 0:
                lo, hi = n.add(lo, n.mul(coef, atom.lo)), n.add(hi, n.mul(coef, atom.hi))
            elif value is not None:
                lo, hi = n.add(lo, n.mul(coef, atom.hi)), n.add(hi, n.mul(coef, atom.lo))
            else:
                x, y = n.mul(coef, atom.lo), n.mul(coef, atom.hi)
                lo, hi = n.add(lo, n.min(x, y)), n.add(hi, n.max(x, y))
        dense = len(steps) == len(f.terms)
        reach = 0
        for step, atom in sorted(steps, key=lambda s: s[0]):
            # Mixed radix: each coefficient at most one past what the smaller ones span.
            dense = dense and atom.dense and step <= reach + 1
            reach += step * atom.span
        return lo, hi, dense, reach if len(steps) == len(f.terms) else 0

    def derived(self, f: _Form, make: Any) -> _Form | None:
        """An atom of ``make(lo, hi, dense, span) -> (lo, hi, dense, span)`` over ``f``'s
        bounds, depending on what ``f`` does; ``None`` where they are not known."""
        found = self.bounds(f)
        if found is None:
            return None
        lo, hi, dense, span = make(*found)
        base: frozenset[int] = frozenset().union(*(a.base for a, _ in f.terms))
        accounts: frozenset[int] = frozenset().union(*(a.accounts for a, _ in f.terms))
        return self.of_atom(self.atom(lo, hi, base=base, accounts=accounts, dense=dense, span=span))

    def binary(self, op: Binary) -> _Form | None:  # noqa: C901 - one branch per op
        n = self.nodes
        f, g = self.form(op.a), self.form(op.b)
        if f is None or g is None:
            return None
        fu, gu = not f.terms, not g.terms
        if op.op is BOp.ADD:
            return self.add(f, g)
        if op.op is BOp.SUB:
            return self.add(f, self.scale(g, n.const(-1)))
        if op.op is BOp.MUL:
            return self.scale(f, g.const) if gu else self.scale(g, f.const) if fu else None
        if op.op is BOp.SHL:
            shift = n.value(g.const) if gu else None
            if shift is None or not 0 <= shift < 63:
                return None
            return self.scale(f, n.const(1 << shift))
        if op.op in (BOp.DIV, BOp.MOD, BOp.MIN, BOp.MAX) and fu and gu:
            make = {BOp.DIV: n.tdiv, BOp.MOD: n.tmod, BOp.MIN: n.min, BOp.MAX: n.max}[op.op]
            return self.uniform(make(f.const, g.const))
        if op.op is BOp.DIV and gu:
            d = g.const

            def divided(lo: int, hi: int, dense: bool, span: int) -> tuple[int, int, bool, int]:
                dv = n.value(d)
                if dv is not None and dv > 0:
                    return n.tdiv(lo, d), n.tdiv(hi, d), dense, span // dv
                x, y = n.tdiv(lo, d), n.tdiv(hi, d)
                return n.min(x, y), n.max(x, y), dense, 0  # monotone in either direction

            return self.derived(f, divided)
        if op.op in (BOp.MIN, BOp.MAX) and (fu or gu):
            form, u = (g, f.const) if fu else (f, g.const)
            clamp = n.min if op.op is BOp.MIN else n.max
            return self.derived(
                form, lambda lo, hi, dense, _: (clamp(lo, u), clamp(hi, u), dense, 0)
            )
        return None

    # ---- scopes -------------------------------------------------------------------------

    def condition(self, cond: Ref, scope: _Scope) -> bool:
        """Fill ``scope`` with what the ``If`` on ``cond`` restricts; whether it could."""
        compare = self.compares.get(cond)
        if compare is None:
            return False
        op, a, b = compare
        if op == "and":
            return self.condition(a, scope) and self.condition(b, scope)
        self.scopes.append(scope)  # a later comparison of an `and` sees the earlier ones
        try:
            return self.comparison(op, a, b, scope)
        finally:
            self.scopes.pop()

    def comparison(self, op: BOp, a: Ref, b: Ref, scope: _Scope) -> bool:
        n = self.nodes
        f, g = self.form(a), self.form(b)
        if f is None or g is None:
            return False
        if not f.terms and not g.terms:  # of Variables: all work-items or none
            x, y = f.const, g.const
            held = {BOp.CMPLT: n.sub(y, x), BOp.CMPGT: n.sub(x, y)}.get(op)
            if held is None:
                held = n.add(n.sub(x, y), n.const(1))  # CMPGE
            scope.conds.append(held)
            return True
        if f.terms and g.terms:
            return False
        # Which bound of the form the comparison moves, and by how much past the other side.
        ref, form, bound = (a, f, g.const) if f.terms else (b, g, f.const)
        upper, offset = _GUARDS[bool(f.terms), op]
        found = self.bounds(form)
        if found is None or not found[2]:
            return False
        lo, hi, _, _ = found
        limit = n.add(bound, n.const(offset))
        if upper:
            hi = n.min(hi, limit)
        else:
            lo = n.max(lo, limit)
        base: frozenset[int] = frozenset().union(*(x.base for x, _ in form.terms))
        accounts: frozenset[int] = frozenset().union(*(x.accounts for x, _ in form.terms))
        guard = self.atom(lo, hi, base=base, accounts=accounts, guard=True)
        scope.guards.append(guard)
        scope.overrides[ref] = self.of_atom(guard)
        scope.conds.append(n.add(n.sub(hi, lo), n.const(1)))
        return True

    def open_if(self, op: If) -> _Scope:
        scope = _Scope()
        if any(not s.modeled for s in self.scopes) or not self.condition(op.cond, scope):
            scope = _Scope(modeled=False)
        return scope

    def open_loop(self, ref: Ref, op: Loop) -> _Scope:
        n = self.nodes
        trip = self.form(op.size)
        if trip is None or trip.terms:
            return _Scope(modeled=False)
        span = n.value(trip.const)
        counter = self.atom(n.const(0), n.sub(trip.const, n.const(1)), span=(span or 1) - 1)
        self.forms[ref] = self.of_atom(counter)
        return _Scope(conds=[trip.const])

    # ---- the walk -----------------------------------------------------------------------

    def run(self) -> Extents:
        data, visits = self.data, _VISITS
        for ref, op in enumerate(self.ops):
            kind = type(op)
            if data and any(getattr(op, f) in data for f in _OPERANDS.get(kind, ())):
                data.add(ref)
            visit = visits.get(kind)
            if visit is not None:
                visit(self, ref, op)
        return Extents(self.kernel, self.accesses, self.nodes)

    def const(self, ref: Ref, op: Const) -> None:
        if not op.dtype.is_int:
            return
        value = self.nodes.const(int(op.wrapped))
        if op.dtype is INDEX:
            self.forms[ref] = self.uniform(value)
        else:
            self.narrow[ref] = value

    def load(self, ref: Ref, op: Load) -> None:
        self.data.add(ref)
        self.access(ref, op.src, op.index, "Load")

    def store(self, ref: Ref, op: Store) -> None:
        self.access(ref, op.dst, op.index, "Store")

    def copy_async(self, ref: Ref, op: CopyAsync) -> None:
        """Its read of ``src``: ``count`` elements, where its condition holds (a guard as an
        ``If``'s, unless it is the constant true: its index, computed before the guard, is
        known only where it does not use the guarded form)."""
        guarded = not always(self.ops[op.cond])
        if guarded:
            self.scopes.append(self.open_if(If(op.cond)))
        self.access(ref, op.src, op.src_index, "CopyAsync", op.count)
        if guarded:
            self.scopes.pop()

    def cast(self, ref: Ref, op: Cast) -> None:
        if op.dtype is not INDEX:
            return
        source = self.kernel.dtype_of(op.x)
        if source is INDEX:
            self.forms[ref] = self.form(op.x)
        elif op.x in self.narrow:
            self.forms[ref] = self.uniform(self.narrow[op.x])

    def unary(self, ref: Ref, op: Unary) -> None:
        if op.op is UOp.NEG and self.kernel.dtype_of(op.x) is INDEX:
            f = self.form(op.x)
            self.forms[ref] = None if f is None else self.scale(f, self.nodes.const(-1))

    def binary_op(self, ref: Ref, op: Binary) -> None:
        if self.kernel.dtype_of(op.a) is INDEX:
            if op.op in (BOp.CMPLT, BOp.CMPGT, BOp.CMPGE):
                self.compares[ref] = (op.op, op.a, op.b)
            else:
                self.forms[ref] = self.binary(op)
        elif op.op is BOp.AND:
            self.compares[ref] = ("and", op.a, op.b)

    def if_(self, ref: Ref, op: If) -> None:
        self.scopes.append(self.open_if(op))

    def loop(self, ref: Ref, op: Loop) -> None:
        self.scopes.append(
            self.open_loop(ref, op) if all(s.modeled for s in self.scopes)
            else _Scope(modeled=False)
        )  # fmt: skip

    def end(self, ref: Ref, op: EndIf | EndLoop) -> None:
        self.scopes.pop()

    def param(self, ref: Ref, op: Param) -> None:
        if op.kind is not ParamKind.VARIABLE or not op.dtype.is_int:
            return
        value = self.nodes.var(self.position[ref])
        if op.dtype is INDEX:
            self.forms[ref] = self.uniform(value)
        elif op.dtype in _NARROW_INTS:
            self.narrow[ref] = value

    def range(self, ref: Ref, op: Range) -> None:
        n = self.nodes
        size = op.size
        if isinstance(size, SymDim):
            count, span = n.ceil_div(n.var(size.param), size.div), 0
        else:
            count, span = n.const(size), size - 1
        if size == 1:
            self.forms[ref] = self.uniform(n.const(0))
        else:
            self.forms[ref] = self.of_atom(
                self.atom(n.const(0), n.sub(count, n.const(1)), span=span)
            )

    def access(self, ref: Ref, src: Ref, index: Ref, kind: str, count: int = 1) -> None:
        """The access ``ref`` of ``count`` elements of ``src`` from ``index``."""
        position = self.position.get(src)
        if position is None:  # a Define: checked by the bounds-checked mode only
            return
        reason = ""
        found = None
        if any(not s.modeled for s in self.scopes):
            reason = _SCOPE
        elif (form := self.form(index)) is None:
            reason = _DATA if index in self.data else _OPS
        elif (found := self.bounds(form)) is None:
            reason = _UNREACHED
        if found is None:
            self.accesses.append(Access(ref, kind, position, reason=reason or _OPS))
            return
        conds = tuple(c for s in self.scopes for c in s.conds)
        hi = found[1] if count == 1 else self.nodes.add(found[1], self.nodes.const(count - 1))
        self.accesses.append(Access(ref, kind, position, found[0], hi, conds))


_OPERANDS: dict[type, tuple[str, ...]] = {
    Load: ("src", "index"), Cast: ("x",), Unary: ("x",), Binary: ("a", "b"),
    Fma: ("a", "b", "c"), Where: ("cond", "a", "b"), If: ("cond",), Shuffle: ("x",),
}  # fmt: skip
"""Per op type, the operands through which its value (or an If's body) depends on data the
kernel loaded."""

_VISITS: dict[type, Any] = {
    Param: _Analysis.param, Range: _Analysis.range, Const: _Analysis.const,
    Load: _Analysis.load, Store: _Analysis.store, Cast: _Analysis.cast,
    Unary: _Analysis.unary, Binary: _Analysis.binary_op, If: _Analysis.if_,
    Loop: _Analysis.loop, EndIf: _Analysis.end, EndLoop: _Analysis.end,
    CopyAsync: _Analysis.copy_async,
}  # fmt: skip
"""What the walk does at each op type: a lookup by type, where an ``isinstance`` chain
cost more than the rest of the walk at a kernel's first compile."""
