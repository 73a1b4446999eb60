"""Random, valid IR kernels for differential fuzzing (``fuzz.py``).

A kernel mixes every dtype, op, select (``where``) and cast, with edge constants (MIN,
MAX, NaN, inf, subnormals), Variables, 1-3-D ranges, Ifs, Loops with uniform and per-item
trip counts, register arrays, local memory with barriers (also inside Loops and Ifs), tree
reductions and data-dependent loads, and stores to up to three outputs. It never relies on
what the IR leaves undefined (docs/writing-a-backend.md): shift counts are masked into
range, floats are clamped before a cast to an integer, copysign never takes its sign from
a NaN, and a Barrier is only emitted where every work-item of the group reaches it.

Each value carries a *taint*, how exactly a backend must reproduce it: ``EXACT``
(integer and bool arithmetic, copies), ``IEEE`` (correctly rounded float ops) or
``APPROX`` (the ops the conformance suite gives a budget of more than half an ulp,
``F32_ULPS`` and ``F64_ULPS``: libm functions, and f32 division, square root and
reciprocal, which OpenCL allows a few ulps off).

Built with ``watch=True``, the same seed gives the same kernel plus an extra bool output
that says, per work-item, whether any float value it computed or loaded was NaN or
infinite. Only the reference runs that variant: a device built for finite math
(zyx-opencl) is compared on the work-groups where it stays false for every work-item
(a group's work-items share values through local memory, not only floats).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import ml_dtypes
import numpy as np

from zyx.dtypes import DType
from zyx.ir import INDEX, BOp, KernelBuilder, ParamKind, Storage, UOp, Value, ceil_div
from zyx.testing.kernels import F32_ULPS, F64_ULPS
from zyx.testing.numerics import Array, poisoned

EXACT, IEEE, APPROX = 0, 1, 2
PAST_END = 5
"""Elements of every output past the last work-item's, which must stay poison."""
T = TypeVar("T")

ALL = list(DType)
FLOAT_UNARY = [op for op in UOp if op is not UOp.BITNOT]
ARITH = [BOp.ADD, BOp.SUB, BOp.MUL, BOp.DIV, BOp.MOD, BOp.MAX, BOp.MIN]
FLOAT_BINARY = [BOp.POW, BOp.ATAN2, BOp.HYPOT, BOp.COPYSIGN, BOp.NEXTAFTER]
CMP = [BOp.CMPLT, BOp.CMPGT, BOp.CMPGE, BOp.NOTEQ, BOp.EQ]
BITS = [BOp.BITXOR, BOp.BITOR, BOp.BITAND]
SHIFTS = [BOp.SHL, BOp.SHR]


def float_taint(op: UOp | BOp, d: DType) -> int:
    """``APPROX`` for a float op that need not be correctly rounded in ``d`` (the f16 and
    bf16 ops compute in f32), else ``IEEE``."""
    return APPROX if op in (F64_ULPS if d is DType.F64 else F32_ULPS) else IEEE


def int_edges(d: DType) -> list[int]:
    """Small values, the range's ends and powers of two around every width."""
    lo, hi = d.int_range
    vals = {0, 1, 2, 3, 7, 8, 100, lo, lo + 1, hi - 1, hi}
    if d.is_signed:
        vals |= {-1, -2, -7, -100}
    for b in (7, 8, 15, 16, 31, 32, 63):
        vals |= {1 << b, (1 << b) - 1, -(1 << b)}
    return sorted(v for v in vals if lo <= v <= hi)


def float_edges(d: DType) -> list[float]:
    """The range's ends, the smallest normal and subnormal, inf, NaN and values that sit
    at the limits of f16 and of the integer types."""
    fi = ml_dtypes.finfo(d.numpy)
    mx = float(fi.max)
    return [
        0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, -3.5, 1e-3, 0.1, 1.0 / 3, 100.0, 255.5, -128.5,
        65504.0, 65520.0, 1e10, 2.0**31, 2.0**63, 4294967295.0,
        mx, -mx, float(fi.smallest_normal), float(fi.smallest_subnormal),
        math.inf, -math.inf, math.nan,
    ]  # fmt: skip


def float_clamp(f: DType, t: DType) -> tuple[float, float]:
    """The widest values ``[lo, hi]`` of float dtype ``f`` whose truncation integer dtype
    ``t`` holds: a cast of anything outside is undefined in the IR."""
    lo, hi = t.int_range
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[f.itemsize]

    def fit(v: float) -> float:
        with np.errstate(over="ignore"):  # 2**63 is inf in f16: stepped down below
            x = np.array([v], np.float64).astype(f.numpy)
        while not (math.isfinite(float(x[0])) and lo <= math.trunc(float(x[0])) <= hi):
            x = (x.view(bits) - bits(1)).view(f.numpy)  # the next value toward zero
        return float(x[0])

    return fit(float(lo)), fit(float(hi))


@dataclass
class V:
    """A value of the kernel being built, with its taint."""

    v: Value
    taint: int

    @property
    def dtype(self) -> DType:
        return self.v.dtype


@dataclass
class Case:
    """A generated kernel and its arguments, in param order."""

    kernel: Any
    args: list[Any]
    out_taint: dict[int, int]
    """Param position of each output -> the highest taint of a value stored there."""
    watch: int | None
    """Param position of the non-finite flag output (``watch=True`` only)."""
    group_size: int
    """Work-items per group: work-item ``i`` (and output element ``i``) is of group
    ``i // group_size``."""


class Gen:
    """One kernel from ``rng``; each method draws from it in a fixed order, so a seed
    always gives the same kernel (the ``watch`` ops draw nothing)."""

    def __init__(
        self, rng: np.random.Generator, name: str = "fz", size: int = 12, watch: bool = False
    ) -> None:
        self.rng = rng
        self.size = size
        self.watching = watch
        self.kb = KernelBuilder(name)
        self.depth = 0
        self.scopes: list[list[V]] = []
        self.inputs: list[tuple[Value, DType]] = []
        self.outs: list[tuple[Value, int]] = []  # (param, its position)
        self.locals: list[tuple[Value, DType]] = []
        self.out_taint: dict[int, int] = {}
        self.uniform: set[int] = set()
        self.seen_nonfinite: Value | None = None
        self.watch_pos: int | None = None

    # ---------------------------------------------------------------- random choices
    def pick(self, xs: Sequence[T]) -> T:
        return xs[int(self.rng.integers(len(xs)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def const_value(self, d: DType) -> Any:
        if d is DType.BOOL:
            return self.chance(0.5)
        if d.is_float:
            if self.chance(0.5):
                return float(self.pick(float_edges(d)))
            return float(np.round(self.rng.uniform(-10, 10), int(self.rng.integers(0, 3))))
        if self.chance(0.6):
            return int(self.pick(int_edges(d)))
        lo, hi = d.int_range
        return int(self.rng.integers(max(lo, -1000), min(hi, 1000), endpoint=True))

    def data(self, d: DType, n: int) -> Array:
        if d is DType.BOOL:
            return self.rng.random(n) < 0.5
        return self.float_data(d, n) if d.is_float else self.int_data(d, n)

    def float_data(self, d: DType, n: int) -> Array:
        r = self.rng
        kind = r.integers(4)
        if kind == 0:
            x = r.uniform(-4, 4, n)
        elif kind == 1:
            x = np.round(r.uniform(-300, 300, n), 1)
        elif kind == 2:
            x = r.standard_normal(n) * 10.0 ** r.integers(-3, 4, n)
        else:  # some edges among small values
            x = r.uniform(-4, 4, n)
            edges = float_edges(d)
            m = r.random(n) < 0.2
            x[m] = [edges[i] for i in r.integers(len(edges), size=int(m.sum()))]
        with np.errstate(over="ignore"):  # to inf in f16 or bf16: meant
            return np.asarray(x, np.float64).astype(d.numpy)

    def int_data(self, d: DType, n: int) -> Array:
        r = self.rng
        lo, hi = d.int_range
        kind = r.integers(3)
        if kind == 1:
            return r.integers(max(lo, -20), min(hi, 20), n, endpoint=True).astype(d.numpy)
        x = r.integers(lo, hi, n, endpoint=True, dtype=d.numpy)
        if kind == 2:  # some edges among the whole range
            edges = int_edges(d)
            m = r.random(n) < 0.3
            picked = [edges[i] for i in r.integers(len(edges), size=int(m.sum()))]
            x[m] = np.array(picked, dtype=object).astype(d.numpy)
        return x

    # ---------------------------------------------------------------- values
    def val(self, v: Value, taint: int) -> V:
        """``v`` as a value of the kernel; ``watch`` notes whether it is finite."""
        if self.watching and v.dtype.is_float and self.seen_nonfinite is not None:
            kb = self.kb
            # x - x is 0 for every finite x, NaN for NaN and the infinities.
            bad = kb.binary(BOp.NOTEQ, kb.binary(BOp.SUB, v, v), kb.const(0.0, v.dtype))
            flag = self.seen_nonfinite
            flag[0] = kb.binary(BOp.OR, flag[0], bad)
        return V(v, taint)

    def any_value(self, d: DType | None = None) -> V:
        """A value from the enclosing scopes or a constant, converted to ``d`` if given."""
        pool = [x for scope in self.scopes for x in scope]
        if d is None:
            return self.const(self.pick(ALL)) if self.chance(0.1) else self.pick(pool)
        same = [x for x in pool if x.dtype is d]
        if same and self.chance(0.7):
            return self.pick(same)
        if self.chance(0.15):
            return self.const(d)
        return self.convert(self.pick(pool), d)

    def const(self, d: DType) -> V:
        value = self.const_value(d)
        if d.is_int and self.chance(0.1):  # past its range: the IR wraps it
            value += self.pick((-1, 1)) << 8 * d.itemsize
        return self.val(self.kb.const(value, d), EXACT)

    def add(self, x: V) -> V:
        self.scopes[-1].append(x)
        return x

    def convert(self, x: V, d: DType) -> V:
        if x.dtype is d:
            return x
        if x.dtype.is_float and d.is_int:
            x = self.clamp_for(x, d)
        taint = max(x.taint, IEEE) if (x.dtype.is_float or d.is_float) else x.taint
        return self.val(x.v.cast(d), taint)

    def clamp_for(self, x: V, d: DType) -> V:
        """``x`` clamped into the range whose truncation ``d`` holds, NaN to its low end
        (``fmax`` ignores NaN), with ``max`` and negation only."""
        lo, hi = float_clamp(x.dtype, d)
        kb = self.kb
        a = kb.maximum(x.v, kb.const(lo, x.dtype))
        return V(-kb.maximum(-a, kb.const(-hi, x.dtype)), x.taint)

    def expr(self, depth: int = 0) -> V:
        r = self.rng.random()
        if depth > 3 or r < 0.15:
            return self.any_value()
        if r < 0.35:
            return self.unary(self.expr(depth + 1))
        if r < 0.45:
            return self.convert(self.expr(depth + 1), self.pick(ALL))
        if r < 0.52:
            return self.select(depth)
        return self.binary(self.expr(depth + 1), depth)

    def unary(self, x: V) -> V:
        if x.dtype.is_float:
            op = self.pick(FLOAT_UNARY)
            return self.val(self.kb.unary(op, x.v), max(x.taint, float_taint(op, x.dtype)))
        # NEG and ABS of unsigned and bool are not in the IR.
        ops = [UOp.NEG, UOp.ABS, UOp.BITNOT] if x.dtype.is_signed else [UOp.BITNOT]
        return self.val(self.kb.unary(self.pick(ops), x.v), x.taint)

    def binary(self, a: V, depth: int) -> V:
        kb, d = self.kb, a.dtype
        b = self.any_value(d) if self.chance(0.5) else self.convert(self.expr(depth + 1), d)
        if d is DType.BOOL:
            ops = ARITH + CMP + BITS + SHIFTS + [BOp.OR, BOp.AND]
        elif d.is_float:
            ops = ARITH + CMP + FLOAT_BINARY
        else:
            ops = ARITH + CMP + BITS + SHIFTS
        op = self.pick(ops)
        if op in SHIFTS and d is not DType.BOOL:  # a count of the width or more is undefined
            b = V(kb.binary(BOp.BITAND, b.v, kb.const(8 * d.itemsize - 1, d)), b.taint)
        if op is BOp.COPYSIGN:
            # The sign of a NaN that arithmetic made is the hardware's (x86's is negative,
            # NVIDIA's positive), and copysign reads it: a NaN sign becomes 1's.
            b = V(kb.where(b.v.eq(b.v), b.v, 1.0), b.taint)
        taint = max(a.taint, b.taint)
        if d.is_float:
            taint = max(taint, float_taint(op, d))
        return self.val(kb.binary(op, a.v, b.v), taint)

    def select(self, depth: int) -> V:
        """``cond ? a : b``. Both are computed: a NaN or an inf in the one not chosen still
        counts as computed (``watch``)."""
        c = self.cond()
        a = self.expr(depth + 1)
        b = (
            self.any_value(a.dtype)
            if self.chance(0.5)
            else self.convert(self.expr(depth + 1), a.dtype)
        )
        return self.val(self.kb.where(c.v, a.v, b.v), max(c.taint, a.taint, b.taint))

    def cond(self) -> V:
        x = self.expr(1)
        if x.dtype is DType.BOOL:
            return x
        y = self.any_value(x.dtype)
        return V(self.kb.binary(self.pick(CMP), x.v, y.v), max(x.taint, y.taint))

    # ---------------------------------------------------------------- statements
    def store(self, slot: int, x: V) -> None:
        out, pos = self.outs[slot]
        y = self.convert(x, out.dtype)
        out[self.gid] = y.v
        self.out_taint[pos] = max(self.out_taint.get(pos, EXACT), y.taint)

    def statements(self, budget: int, in_if: bool, uniform: bool) -> None:
        """``budget`` statements; ``uniform``: every work-item of the group gets here
        (only then may a Barrier be emitted)."""
        for _ in range(budget):
            r = self.rng.random()
            if r < 0.45:
                self.add(self.expr())
            elif r < 0.6:
                self.store(int(self.rng.integers(len(self.outs))), self.any_value())
            elif r < 0.7 and self.depth < 3:
                self.if_block(uniform)
            elif r < 0.8 and self.depth < 3:
                self.loop_block(in_if, uniform)
            elif r < 0.88 and not in_if and uniform and self.lsize > 1:
                self.exchange()
            elif r < 0.93:
                self.register_array()
            else:
                self.gather()

    def if_block(self, uniform: bool) -> None:
        if self.l0 is not None and self.chance(0.25):
            c = self.bounds_check(self.l0)
        else:
            c = self.cond()
        self.depth += 1
        self.scopes.append([])
        with self.kb.if_(c.v):
            self.statements(int(self.rng.integers(1, 4)), True, uniform)
            self.store(int(self.rng.integers(len(self.outs))), self.any_value())
        self.scopes.pop()
        self.depth -= 1

    def bounds_check(self, l0: Value) -> V:
        """``l0 (+ uniform) < uniform``: the form the host backend turns into a loop bound."""
        idx = [x for x in self.scopes[0] if x.dtype is INDEX and x.v.ref in self.uniform]
        idx.append(self.loopvar)
        a = l0 if self.chance(0.4) else self.kb.binary(BOp.ADD, l0, self.pick(idx).v)
        return V(self.kb.binary(BOp.CMPLT, a, self.pick(idx).v), EXACT)

    def trip_count(self) -> tuple[Value, bool]:
        """A Loop's size, and whether it is the same for every work-item."""
        kind = self.rng.integers(3)
        if kind == 0:
            return self.kb.const(int(self.rng.integers(0, 5)), INDEX), True
        if kind == 1:
            per_item = self.gid % int(self.rng.integers(1, 5))
            return per_item + int(self.rng.integers(0, 2)), False
        return self.loopvar.v % 4, True

    def loop_block(self, in_if: bool, uniform: bool) -> None:
        """A Loop that folds a value into an accumulator, with statements in its body."""
        kb = self.kb
        size, uni = self.trip_count()
        d = self.pick(ALL)
        acc = kb.define(d, 1)
        init = self.any_value(d)
        acc[0] = init.v
        taint = init.taint
        self.depth += 1
        self.scopes.append([])
        with kb.loop(size) as j:
            self.add(V(j, EXACT))
            x = self.convert(self.any_value(), d)
            # From the second iteration on, the accumulator holds x's contributions too.
            folded = max(init.taint, x.taint, IEEE if d.is_float else EXACT)
            cur = self.add(self.val(acc[0], folded))
            self.statements(int(self.rng.integers(0, 3)), in_if, uniform and uni and not in_if)
            if d is DType.BOOL:
                op = self.pick([BOp.OR, BOp.AND, BOp.BITXOR, BOp.ADD])
            elif d.is_float:
                op = self.pick([BOp.ADD, BOp.MUL, BOp.MAX, BOp.MIN, BOp.SUB])
            else:
                op = self.pick([BOp.ADD, BOp.MUL, BOp.MAX, BOp.MIN, BOp.BITXOR, BOp.SUB])
            acc[0] = self.val(kb.binary(op, cur.v, x.v), EXACT).v
            taint = max(taint, x.taint, IEEE if d.is_float else EXACT)
        self.scopes.pop()
        self.depth -= 1
        self.add(self.val(acc[0], taint))

    def exchange(self) -> None:
        """Stage a value in local memory, barrier, then read a neighbour's or reduce."""
        kb = self.kb
        d = self.pick(ALL)
        if self.chance(0.4):  # reuse an array of the kernel's top level
            loc, d = self.pick(self.locals)
            kb.barrier()  # its earlier readers are done
            x = self.convert(self.any_value(), d)
        else:  # defined here, maybe in a Loop or an If
            x = self.convert(self.any_value(), d)
            loc = kb.define(d, self.lsize, Storage.LOCAL)
        loc[self.lid] = x.v
        kb.barrier()
        if self.chance(0.3) and self.lsize & (self.lsize - 1) == 0 and d is not DType.BOOL:
            self.tree_reduce(loc, x)
        else:
            shift = int(self.rng.integers(0, self.lsize))
            self.add(self.val(loc[(self.lid + shift) % self.lsize], x.taint))
        if self.depth > 0 or self.chance(0.5):
            kb.barrier()

    def tree_reduce(self, loc: Value, x: V) -> None:
        """Reduce ``loc`` into ``loc[0]`` in log2(lsize) levels, a barrier after each."""
        kb, d = self.kb, loc.dtype
        op = self.pick([BOp.ADD, BOp.MAX, BOp.MIN] + ([BOp.BITXOR] if d.is_int else []))
        with kb.loop(int(math.log2(self.lsize))) as level:
            stride = kb.const(self.lsize // 2, INDEX) >> level
            with kb.if_(self.lid < stride):
                loc[self.lid] = kb.binary(op, loc[self.lid], loc[self.lid + stride])
            kb.barrier()
        self.add(self.val(loc[0], max(x.taint, IEEE if d.is_float else EXACT)))

    def register_array(self) -> None:
        d = self.pick(ALL)
        n = int(self.rng.integers(1, 6))
        arr = self.kb.define(d, n)
        taint = EXACT
        for k in range(n):
            x = self.convert(self.any_value(), d)
            arr[k] = x.v
            taint = max(taint, x.taint)
        self.add(self.val(arr[self.gid % n], taint))

    def gather(self) -> None:
        """Load an input at a data-dependent index, masked into bounds."""
        buf, d = self.pick(self.inputs)
        x = self.any_value()
        x = self.convert(x, DType.I64) if x.dtype.is_float else V(x.v.cast(DType.I64), x.taint)
        # An index from libm may differ by one between devices, and so may what it loads.
        self.add(self.val(buf[x.v & (self.nbuf - 1)], x.taint))

    # ---------------------------------------------------------------- the kernel
    def launch_shape(self) -> tuple[int, list[int], list[int]]:
        """Dimensions, local size and group counts; at most 64 work-items per group."""
        ndim = int(self.rng.integers(1, 4))
        lsz, gsz = [1, 1, 1], [1, 1, 1]
        for a in range(ndim):
            lsz[a] = int(self.pick([1, 2, 3, 4, 8, 16, 5]))
            gsz[a] = int(self.pick([1, 2, 3, 7]))
        while math.prod(lsz) > 64:
            lsz[int(np.argmax(lsz))] //= 2
        if lsz[0] == 2 and lsz[1] * lsz[2] > 4:
            # PoCL's own bug, not zyx's: PoCL (3.x on CPU) miscompiled private arrays at
            # local sizes (2, >=12), in a plain OpenCL C kernel too. The shape alone does not
            # trigger it: 1232 kernels forced to (2, 12..32) agreed on 2026-12-01.
            lsz[0] = 4
            while math.prod(lsz) > 64:
                lsz[1 + int(np.argmax(lsz[1:]))] //= 2
        return ndim, lsz, gsz

    def params(self, args: list[Any], nout: int) -> None:
        kb = self.kb
        for _ in range(int(self.rng.integers(1, 4))):
            d = self.pick(ALL)
            self.inputs.append((kb.param(d), d))
            args.append(self.data(d, self.nbuf))
        for _ in range(int(self.rng.integers(1, 4))):
            d = self.pick(ALL)
            self.outs.append((kb.param(d, ParamKind.GLOBAL_MUT), len(args)))
            args.append(poisoned(d, nout))

    def variables(self, args: list[Any]) -> list[V]:
        out = []
        for _ in range(int(self.rng.integers(0, 3))):
            d = self.pick(ALL)
            out.append(V(self.kb.variable(d), EXACT))
            v = self.const_value(d)
            if d.is_float and not math.isfinite(v) and self.chance(0.7):
                v = 1.5  # mostly finite: a non-finite Variable taints the whole kernel
            args.append(v)
        return out

    def indices(self, ndim: int, lsz: list[int], gsz: list[int], gvar: Value | None) -> None:
        """Ranges (some axes of size 1 left out) and the flat ids: group-major, axis 0
        fastest."""
        kb = self.kb
        gvals: list[Value | None] = []
        for a in range(ndim):
            size = ceil_div(gvar, 1) if (a == 0 and gvar is not None) else gsz[a]
            gvals.append(kb.group(a, size) if gsz[a] > 1 or self.chance(0.5) else None)
        lvals = [
            kb.local(a, lsz[a]) if lsz[a] > 1 or self.chance(0.5) else None for a in range(ndim)
        ]
        self.lid = self.flat(lvals, lsz)
        self.gid = self.flat(gvals, gsz) * self.lsize + self.lid
        self.l0 = lvals[0]

    def flat(self, vals: list[Value | None], sizes: list[int]) -> Value:
        flat, stride = self.kb.const(0, INDEX), 1
        for v, size in zip(vals, sizes):
            if v is not None:
                flat = flat + v * stride
            stride *= size
        return flat

    def build(self) -> Case:
        rng, kb = self.rng, self.kb
        ndim, lsz, gsz = self.launch_shape()
        self.lsize = math.prod(lsz)
        total = self.lsize * math.prod(gsz)
        self.nbuf = 1 << max(3, (total - 1).bit_length())  # a power of two: gather masks
        args: list[Any] = []
        self.params(args, total + PAST_END)
        variables = self.variables(args)
        nvar = kb.variable(INDEX)
        use_n = self.chance(0.5)
        args.append(total - int(rng.integers(0, 3)) if use_n else total)
        self.loopvar = V(nvar, EXACT)
        gvar = kb.variable(INDEX) if self.chance(0.3) else None  # a symbolic group count
        if gvar is not None:
            args.append(gsz[0])
        watch = self.watch_param(args, total + PAST_END)
        self.indices(ndim, lsz, gsz, gvar)
        self.uniform = {v.v.ref for v in variables} | {nvar.ref}
        self.watch_start()
        variables = [self.val(v.v, EXACT) for v in variables]  # watched from here on
        self.scopes = [[V(self.gid, EXACT), V(self.lid, EXACT), *variables]]
        for buf, _ in self.inputs:
            self.add(self.val(buf[self.gid % self.nbuf], EXACT))
        for _ in range(2):
            d = self.pick(ALL)
            self.locals.append((kb.define(d, self.lsize, Storage.LOCAL), d))
        self.statements(self.size, False, True)
        for slot in range(len(self.outs)):  # every output stored at least once, unconditionally
            self.store(slot, self.any_value())
        if use_n:  # and the first one again, under the usual bounds check
            with kb.if_(self.gid < nvar):
                self.store(0, self.any_value())
        if watch is not None and self.seen_nonfinite is not None:
            watch[self.gid] = self.seen_nonfinite[0]
        return Case(kb.build(), args, self.out_taint, self.watch_pos, self.lsize)

    def watch_param(self, args: list[Any], n: int) -> Value | None:
        """``watch`` only: the flag output, one bool per work-item."""
        if not self.watching:
            return None
        self.watch_pos = len(args)
        args.append(poisoned(DType.BOOL, n))
        return self.kb.param(DType.BOOL, ParamKind.GLOBAL_MUT)

    def watch_start(self) -> None:
        if self.watching:
            self.seen_nonfinite = self.kb.define(DType.BOOL, 1)
            self.seen_nonfinite[0] = False
