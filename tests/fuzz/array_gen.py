"""Random array programs for differential fuzzing of the front end (``arrays.py``).

A program is Python text over a namespace ``xp``: inputs ``a0, a1, ...``, then statements
``v0 = ...`` of the array API standard's functions and operators: elementwise functions of
every dtype kind, broadcasting, type promotion, Python scalars, views (reshape, permute,
slices with any step, flip, roll, tile, repeat, expand/squeeze, broadcast), concat and
stack, reductions over axes, argmax, scans, matmul and friends, where, sorting, searching,
sets, integer-array and boolean-mask indexing, setitem and in-place operators, creation
functions. ``F`` names the program's float dtype (float64 in the reference).

The program is text, run with ``exec``, because its text is what a finding prints: a
reader reruns exactly what failed, with ``xp = zyx`` or ``xp = array_api_strict``.

Only what the standard (2024.12) defines is emitted, so that any difference is zyx's:

- The generator runs each statement on the reference (array_api_strict, floats in float64)
  as it writes it: a statement the reference refuses is a bug of this file
  (``GeneratorError``), and data-dependent shapes (``x[mask]``, ``nonzero``, ``unique_*``)
  are known to the statements after it.
- Indices: every dim indexed (or an ellipsis); integer arrays only with integers; every
  index in range; slice starts and stops where the standard bounds them.
- Promotion only between dtypes the standard promotes (one kind; an unsigned dtype only
  with a wider signed one); Python scalars of the array's kind and in its dtype's range.
- Integers never overflow (the standard leaves it unspecified): each integer value
  carries a range that contains what it can hold, and a statement is kept only if its
  range fits its dtype.
- Floats stay where float16 and float64 agree: every float value lies in [1/16, 64] (a
  statement whose reference values leave it is dropped), and each op is well conditioned
  there. Each value carries a bound on its relative rounding error (``Value.error``)
  that the comparison allows where it exceeds the dtype's bound (long bfloat16 chains).
- Functions that are not continuous (comparisons, floor, argmax, sort, unique, masks)
  read only exact values: values the device's dtype holds with the reference's numbers
  (inputs, views of them, max/min, ...; checked on the reference's values).
- Arrays are never aliased: setitem and in-place operators act on a copy
  (``xp.asarray(x, copy=True)``), since the standard leaves views' aliasing unspecified.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from math import prod
from typing import Any

import array_api_strict
import numpy as np

from zyx.array.dtypes import dtype_name
from zyx.dtypes import DType

FLOATS = (DType.F32, DType.F16, DType.BF16, DType.F64)
SIGNED = (DType.I8, DType.I16, DType.I32, DType.I64)
UNSIGNED = (DType.U8, DType.U16, DType.U32, DType.U64)

LOW, HIGH = 2.0**-4, 64.0
"""Every float value lies in [LOW, HIGH]: positive (sqrt, log, division are defined and
well conditioned) and far from float16's overflow."""

BITS = {DType.F16: 11, DType.BF16: 8, DType.F32: 24, DType.F64: 53}
"""Significant bits: an op rounds to within 2**-BITS relative."""

Range = tuple[int, int]


class GeneratorError(Exception):
    """The reference refused a statement, or it computed what the generator did not
    expect: a bug of this file, not of zyx."""


@dataclass
class Value:
    name: str
    shape: tuple[int, ...]
    dtype: DType
    lo: float
    """The smallest value it can hold: a sound bound for integers (overflow is ruled out
    with it), the reference's smallest for floats, 0 for bools."""
    hi: float
    exact: bool
    """Holds the same numbers in its dtype as in the reference (integers and bools always;
    floats where no rounding happened)."""
    error: float
    """A bound on its relative rounding error against the reference (0 where exact)."""
    deps: frozenset[str]
    """The inputs and statements it is computed from (its own name included)."""

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return prod(self.shape)

    @property
    def kind(self) -> str:
        d = self.dtype
        return "bool" if d is DType.BOOL else "float" if d.is_float else "int"


@dataclass
class Program:
    dtype: DType
    """The float dtype ``F`` names."""
    inputs: dict[str, np.ndarray[Any, Any]] = field(default_factory=dict)
    lines: list[tuple[str, str]] = field(default_factory=list)
    """(name, the statements that compute it) in order."""
    values: dict[str, Value] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)

    def needed(self, names: list[str]) -> set[str]:
        """The inputs and statements ``names`` are computed from."""
        return set().union(*(self.values[n].deps for n in names))

    def text(self, upto: list[str] | None = None) -> str:
        """The statements (those ``upto`` depends on, where given) as Python source."""
        keep = self.needed(upto) if upto is not None else None
        return "\n".join(code for n, code in self.lines if keep is None or n in keep)

    def describe(self, upto: list[str] | None = None) -> str:
        """What ``upto`` (default: the outputs) needs, as a reader reproduces it: inputs
        (their first values), statements, outputs."""
        names = upto or self.outputs
        keep = self.needed(names)
        shown = [
            f"{n} = xp.asarray(<{dtype_name(DType.from_numpy(a.dtype))} {a.shape}: "
            f"{np.array2string(a.ravel()[:6], precision=4)}...>)"
            for n, a in self.inputs.items()
            if n in keep
        ]
        return "\n".join([*shown, self.text(names), f"# outputs: {', '.join(names)}"])


def strict_namespace() -> Any:
    """array_api_strict at the standard's 2024.12."""
    array_api_strict.set_array_api_strict_flags(api_version="2024.12")
    return array_api_strict


def reference_input(data: np.ndarray[Any, Any], xp: Any) -> Any:
    """An input as the reference holds it: floats in float64."""
    return xp.asarray(data.astype(np.float64) if data.dtype.kind in "fV" else data)


# ---- integer ranges: sound bounds, so that no statement overflows ---------------------------


def _corners(f: Callable[[int, int], int], a: Range, b: Range) -> Range:
    """The range of ``f`` over two ranges, for ``f`` monotone in each argument on each
    side of zero (the extremes lie at the corners)."""
    values = [f(x, y) for x in a for y in b]
    return min(values), max(values)


def _bitwise(a: Range, b: Range) -> Range:
    """Any bitwise op of two's complement values in ``a`` and ``b`` stays within the
    power of two that bounds both."""
    top = max(abs(a[0]), abs(a[1]), abs(b[0]), abs(b[1])).bit_length()
    return (0, (1 << top) - 1) if min(a[0], b[0]) >= 0 else (-(1 << top), (1 << top) - 1)


def _abs(lo: int, hi: int) -> Range:
    return (0 if lo <= 0 <= hi else min(abs(lo), abs(hi))), max(abs(lo), abs(hi))


def _top(d: DType) -> int:
    return d.int_range[1]


def _nonzero(r: Range) -> bool:
    return r[0] > 0 or r[1] < 0


def _shifted(lo: int, hi: int) -> Range:
    """``x >> s`` for s in [0, 3]: towards zero's side, never past it."""
    return (lo if lo < 0 else lo >> 3), (hi if hi >= 0 else hi >> 3)


IntUnary = Callable[[int, int, DType], Range | None]

INT_UNARY: list[tuple[str, IntUnary]] = [
    ("-{x}", lambda lo, hi, d: (-hi, -lo) if d.is_signed else None),
    ("xp.negative({x})", lambda lo, hi, d: (-hi, -lo) if d.is_signed else None),
    ("xp.abs({x})", lambda lo, hi, d: _abs(lo, hi)),
    ("{x} * 3", lambda lo, hi, d: (3 * lo, 3 * hi)),
    ("{x} + 7", lambda lo, hi, d: (lo + 7, hi + 7)),
    ("{x} - 5", lambda lo, hi, d: (lo - 5, hi - 5)),
    ("7 - {x}", lambda lo, hi, d: (7 - hi, 7 - lo)),
    ("2 * {x}", lambda lo, hi, d: (2 * lo, 2 * hi)),
    ("{x} // 3", lambda lo, hi, d: (lo // 3, hi // 3)),
    ("xp.floor_divide({x}, -2)", lambda lo, hi, d: (hi // -2, lo // -2) if d.is_signed else None),
    ("{x} % 5", lambda lo, hi, d: (0, 4)),
    ("xp.remainder({x}, -3)", lambda lo, hi, d: (-2, 0) if d.is_signed else None),
    ("~{x}", lambda lo, hi, d: (-hi - 1, -lo - 1) if d.is_signed else (_top(d) - hi, _top(d) - lo)),
    ("xp.bitwise_and({x}, 12)", lambda lo, hi, d: (0, 12)),
    ("{x} | 3", lambda lo, hi, d: (lo, hi + 3)),
    ("{x} ^ 5", lambda lo, hi, d: (max(lo - 7, d.int_range[0]), hi + 7)),
    ("{x} >> 1", lambda lo, hi, d: (lo >> 1, hi >> 1)),
    ("xp.bitwise_left_shift({x}, 2)", lambda lo, hi, d: (4 * lo, 4 * hi) if lo >= 0 else None),
    ("xp.square({x})", lambda lo, hi, d: (_abs(lo, hi)[0] ** 2, _abs(lo, hi)[1] ** 2)),
    ("xp.sign({x})", lambda lo, hi, d: (-1 if lo < 0 else 0, 1)),
    ("xp.clip({x}, 3, 50)", lambda lo, hi, d: (min(max(lo, 3), 50), min(max(hi, 3), 50))),
    ("xp.minimum({x}, 9)", lambda lo, hi, d: (min(lo, 9), min(hi, 9))),
    ("xp.maximum({x}, 2)", lambda lo, hi, d: (max(lo, 2), max(hi, 2))),
    ("xp.positive({x})", lambda lo, hi, d: (lo, hi)),
    ("xp.floor({x})", lambda lo, hi, d: (lo, hi)),  # integers: the standard's identity
    ("xp.round({x})", lambda lo, hi, d: (lo, hi)),
]  # fmt: skip

IntBinary = Callable[[Range, Range], Range | None]

INT_BINARY: list[tuple[str, IntBinary]] = [
    ("{x} + {y}", lambda a, b: (a[0] + b[0], a[1] + b[1])),
    ("{x} - {y}", lambda a, b: (a[0] - b[1], a[1] - b[0])),
    ("{x} * {y}", lambda a, b: _corners(lambda x, y: x * y, a, b)),
    ("xp.multiply({x}, {y})", lambda a, b: _corners(lambda x, y: x * y, a, b)),
    ("xp.maximum({x}, {y})", lambda a, b: (max(a[0], b[0]), max(a[1], b[1]))),
    ("xp.minimum({x}, {y})", lambda a, b: (min(a[0], b[0]), min(a[1], b[1]))),
    ("{x} & {y}", _bitwise),
    ("xp.bitwise_or({x}, {y})", _bitwise),
    ("{x} ^ {y}", _bitwise),
    # Division by an array: only by one that holds no zero (the standard leaves it open).
    ("{x} // {y}", lambda a, b: _corners(lambda x, y: x // y, a, b) if _nonzero(b) else None),
    ("{x} % {y}", lambda a, b: (0, b[1] - 1) if b[0] > 0 else (b[0] + 1, 0) if b[1] < 0 else None),
    ("xp.bitwise_right_shift({x}, xp.bitwise_and({y}, 3))", lambda a, b: _shifted(*a)),
]  # fmt: skip

Cond = float | Callable[[float], float]
"""How much an op amplifies its sources' relative error: a number, or a function of the
largest source value (``sin(x)`` moves by ``x * error``: much at 64, little at 1)."""

# Float ops: (template, condition, keeps an exact value exact). Each is defined on
# [LOW, HIGH] and leaves no cancellation (a difference is followed by a larger constant or
# divided by a sum), so that float16's relative error stays a few of its ulps.
FLOAT_UNARY: list[tuple[str, Cond, bool]] = [
    ("xp.sqrt({x})", 0.5, False), ("xp.exp(-{x}) + 0.5", 1.0, False),
    ("xp.tanh({x}) + 1.0", 1.0, False), ("xp.log1p({x}) + 0.5", 1.0, False),
    ("1.0 / (1.0 + {x})", 1.0, False), ("xp.sin({x}) + 1.5", lambda hi: 2 * hi, False),
    ("xp.cos({x}) + 1.5", lambda hi: 2 * hi, False), ("xp.abs({x} - 1.0) + 0.5", 2.0, False),
    ("xp.minimum(xp.square({x}), 4.0)", 2.0, False), ("xp.maximum({x}, 1.0)", 1.0, True),
    ("({x} * 2.0 + 1.0) / 3.0", 1.0, False), ("xp.clip({x}, 0.75, 1.5)", 1.0, True),
    ("xp.atan({x}) + 1.0", 1.0, False), ("xp.hypot({x}, 1.0) - 0.5", 1.0, False),
    ("xp.log({x}) + 3.0", 4.0, False), ("xp.reciprocal({x})", 1.0, False),
    ("{x} * 2.0", 1.0, True), ("0.5 * {x}", 1.0, True), ("xp.abs({x})", 1.0, True),
    ("xp.exp({x} * 0.25)", lambda hi: 1 + hi / 4, False), ("{x} ** 1.5", 1.5, False),
    ("xp.pow({x}, 0.5) + 0.25", 1.0, False), ("xp.asin(1.0 / (1.0 + {x}))", 2.0, False),
    ("xp.acos(1.0 / (1.0 + {x}))", 8.0, False), ("xp.asinh({x})", 1.0, False),
    ("xp.acosh({x} + 1.0)", 2.0, False), ("xp.atanh(1.0 / (2.0 + {x}))", 1.0, False),
    ("xp.cosh({x} * 0.25)", lambda hi: 1 + hi / 4, False),
    ("xp.sinh({x} * 0.25) + 0.5", lambda hi: 1 + hi / 2, False),
    ("xp.expm1({x} * 0.25) + 0.5", lambda hi: 1 + hi / 2, False),
    ("xp.log2({x}) + 5.0", 2.0, False), ("xp.log10({x}) + 2.0", 2.0, False),
    ("xp.abs(xp.copysign({x}, -1.0))", 1.0, True),
    ("xp.logaddexp({x}, 1.0) - 0.5", 3.0, False), ("{x} / 4", 1.0, True),
    ("xp.nextafter({x}, 0.0)", 1.0, False), ("xp.positive({x})", 1.0, True),
]  # fmt: skip

FLOAT_BINARY: list[tuple[str, Cond, bool]] = [
    ("({x} + {y}) * 0.5", 1.0, False), ("xp.sqrt({x} * {y})", 1.0, False),
    ("xp.maximum({x}, {y})", 1.0, True), ("xp.minimum({x}, {y})", 1.0, True),
    ("xp.sqrt({x} / {y})", 1.0, False), ("xp.hypot({x}, {y}) * 0.5", 1.0, False),
    ("xp.logaddexp({x}, {y}) - 0.5", 3.0, False), ("{x} * {y}", 2.0, False),
    ("xp.divide({x}, {y})", 2.0, False), ("xp.atan2({x}, {y}) + 0.5", 2.0, False),
    ("xp.copysign({x}, {y})", 1.0, True), ("{x} + {y}", 1.0, False),
    ("xp.add({x}, xp.multiply({y}, 0.5))", 1.0, False),
    ("xp.abs({x} - {y}) / ({x} + {y}) + 0.5", 2.0, False),
    ("xp.pow({x}, xp.minimum({y}, 1.5) * 0.5)", 4.0, False),
]  # fmt: skip

BOOL_BINARY = [
    "xp.logical_and({x}, {y})", "xp.logical_or({x}, {y})", "xp.logical_xor({x}, {y})",
    "{x} & {y}", "{x} | {y}", "{x} ^ {y}", "{x} == {y}", "xp.not_equal({x}, {y})",
]  # fmt: skip

COMPARISONS = [
    "{x} > {y}", "{x} < {y}", "{x} >= {y}", "{x} <= {y}", "{x} == {y}", "{x} != {y}",
    "xp.greater({x}, {y})", "xp.less_equal({x}, {y})", "xp.equal({x}, {y})",
]  # fmt: skip


class ArrayGen:
    """One program from ``rng`` (the same seed, the same program), of dtypes among
    ``dtypes`` (those every device claims)."""

    def __init__(self, rng: np.random.Generator, dtypes: Sequence[DType]) -> None:
        self.rng = rng
        self.ints = [d for d in SIGNED + UNSIGNED if d in dtypes]
        """The integer dtypes casts and creation may target."""
        floats = [d for d in FLOATS if d in dtypes]
        self.F = floats[int(rng.integers(len(floats)))] if floats else DType.F32
        self.input_dtypes = self._input_dtypes(dtypes, floats)
        self.p = Program(self.F)
        self.steps = int(rng.integers(3, 10))
        self.xp = strict_namespace()
        self.env: dict[str, Any] = {"xp": self.xp, "F": self.xp.float64}

    def _input_dtypes(self, dtypes: Sequence[DType], floats: list[DType]) -> list[DType]:
        """The inputs' dtypes: the float dtype, or one or two integer dtypes of a kind
        (two promote: mixed widths, an unsigned one with a wider signed one), or bool."""
        signed = [d for d in SIGNED if d in dtypes]
        unsigned = [d for d in UNSIGNED if d in dtypes]
        kinds = [("float", 5.0)] if floats else []
        kinds += [("signed", 1.5)] if signed else []
        kinds += [("unsigned", 1.0)] if unsigned else []
        kinds += [("mixed", 0.7)] if signed and unsigned else []
        kinds.append(("bool", 0.5))
        weights = np.array([w for _, w in kinds])
        kind = kinds[int(self.rng.choice(len(kinds), p=weights / weights.sum()))][0]
        if kind == "float":
            return [self.F]
        if kind == "bool":
            return [DType.BOOL]
        if kind == "mixed":
            u = self.pick([d for d in unsigned if d is not DType.U64] or unsigned)
            wider = [d for d in signed if d.itemsize > u.itemsize]
            return [u, self.pick(wider)] if wider else [self.pick(signed)]
        family = signed if kind == "signed" else unsigned
        return [self.pick(family) for _ in range(int(self.rng.integers(1, 3)))]

    # ---- the program -----------------------------------------------------------------------

    def build(self) -> Program:
        for _ in range(int(self.rng.integers(1, 3))):
            self.input(self.shape())
        ops = [
            (self.unary, 3.0), (self.binary, 3.0), (self.compare, 1.2), (self.cast, 1.0),
            (self.select, 1.0), (self.view, 4.0), (self.index, 2.0), (self.reduction, 2.0),
            (self.scan, 1.0), (self.linalg, 1.5), (self.sort, 1.0), (self.search, 0.8),
            (self.concat, 1.0), (self.setitem, 1.2), (self.create, 0.6),
        ]  # fmt: skip
        weights = np.array([w for _, w in ops])
        for _ in range(self.steps):
            # An op that does not apply to its source (or whose result leaves the ranges
            # the module keeps) returns None: another try, at most a few.
            for _attempt in range(12):
                op = ops[int(self.rng.choice(len(ops), p=weights / weights.sum()))][0]
                if op(self.source()) is not None:
                    break
        self.p.outputs = self._outputs()
        return self.p

    def _outputs(self) -> list[str]:
        """The statements no other reads (all realized together), and at times one that
        others read too: a value realized and consumed in one plan."""
        read = set().union(*(v.deps - {v.name} for v in self.p.values.values()))
        statements = [n for n, _ in self.p.lines]
        outputs = [n for n in statements if n not in read] or statements[-1:]
        inner = [n for n in statements if n not in outputs]
        if inner and self.rng.random() < 0.3:
            outputs.append(self.pick(inner))
        if not outputs:  # no statement: the input itself, through a copy
            outputs = [self.emit_input_copy().name]
        return outputs

    def emit_input_copy(self) -> Value:
        v = self.p.values["a0"]
        out = self.emit(f"xp.asarray({v.name}, copy=True)", [v], (v.lo, v.hi), exact=v.exact)
        assert out is not None
        return out

    # ---- helpers ---------------------------------------------------------------------------

    def pick(self, options: Sequence[Any]) -> Any:
        return options[int(self.rng.integers(len(options)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def source(self, want: Callable[[Value], bool] = lambda v: True) -> Value:
        """A value of the program, recent ones likelier (deeper chains); the first input
        if none is as wanted."""
        values = [v for v in self.p.values.values() if want(v)]
        if not values:
            return self.p.values["a0"]
        weights = np.arange(1, len(values) + 1, dtype=np.float64)
        return values[int(self.rng.choice(len(values), p=weights / weights.sum()))]

    def shape(self, ndim: int | None = None) -> tuple[int, ...]:
        """Small dims, at times 0, 1 or one large enough to need several work-groups."""
        if ndim is None:
            ndim = int(self.rng.choice(4, p=[0.07, 0.3, 0.4, 0.23]))
        dims = [int(self.rng.integers(1, 6)) for _ in range(ndim)]
        if ndim and self.chance(0.06):
            dims[int(self.rng.integers(ndim))] = 0
        elif ndim and self.chance(0.08):
            dims[int(self.rng.integers(ndim))] = int(self.rng.integers(16, 70))
        return tuple(dims)

    def dt(self, d: DType) -> str:
        """The program text of dtype ``d``."""
        return "F" if d is self.F else f"xp.{dtype_name(d)}"

    def input(self, shape: tuple[int, ...], dtype: DType | None = None) -> Value:
        """A new input: floats in [0.5, 2], at times from a few values (ties for sort,
        argmax and unique); integers of a range their dtype holds; bools."""
        d = self.pick(self.input_dtypes) if dtype is None else dtype
        few = self.chance(0.3)
        if d.is_float:
            values = self.rng.uniform(0.5, 2.0, shape)
            if few:
                values = self.rng.choice([0.5, 0.75, 1.0, 1.25, 2.0], shape)
            data = d.round_array(values)
        elif d is DType.BOOL:
            data = self.rng.random(shape) < 0.5
        else:
            low, high = (-3, 4) if few else (-100, 100) if d.is_signed else (0, 200)
            data = self.rng.integers(max(low, 0) if not d.is_signed else low, high, shape)
            data = data.astype(d.numpy)
        name = f"a{len(self.p.inputs)}"
        self.p.inputs[name] = data
        self.env[name] = reference_input(data, self.xp)
        numbers = data.astype(np.float64)
        lo, hi = (float(numbers.min()), float(numbers.max())) if data.size else (1.0, 1.0)
        if not d.is_float:
            lo, hi = int(lo), int(hi)
        value = Value(name, shape, d, lo, hi, True, 0.0, frozenset({name}))
        self.p.values[name] = value
        return value

    def emit(
        self,
        expr: str,
        srcs: Sequence[Value],
        ints: Range | None = None,
        exact: bool = False,
        cond: Cond = 1.0,
    ) -> Value | None:
        """Run ``expr`` (an expression, or statements that assign ``{out}``) on the
        reference and keep it as a statement, or None where its result leaves what this
        module keeps: an integer ``ints`` range its dtype does not hold, floats outside
        [LOW, HIGH]. ``exact``: it keeps exact sources exact; ``cond``: how much it
        amplifies its sources' relative error."""
        name = f"v{len(self.p.lines)}"
        code = expr.replace("{out}", name) if "{out}" in expr else f"{name} = {expr}"
        result = self._run(code, name)
        data = np.from_dlpack(result)
        dtype = self.F if data.dtype.kind == "f" else DType.from_numpy(data.dtype)
        exact = exact and all(s.exact for s in srcs)
        error = 0.0
        if dtype is DType.BOOL:
            lo, hi = 0, 1
        elif dtype.is_float:
            if data.size and not (
                np.all(np.isfinite(data)) and LOW <= data.min() <= data.max() <= HIGH
            ):
                return None
            lo, hi = (float(data.min()), float(data.max())) if data.size else (1.0, 1.0)
            exact = exact and bool(
                np.array_equal(self.F.round_array(data).astype(np.float64), data)
            )
            if not exact:
                floats = [s for s in srcs if s.kind == "float"]
                top = max((s.hi for s in floats), default=1.0)
                inherited = max((s.error for s in floats), default=0.0)
                error = (cond(top) if callable(cond) else cond) * inherited + 2.0 ** -BITS[self.F]
        else:
            if ints is None:
                raise GeneratorError(f"{code}\nan integer result without a range")
            lo, hi = ints
            low, high = dtype.int_range
            if not low <= lo <= hi <= high:
                return None
            if data.size and not lo <= int(data.min()) <= int(data.max()) <= hi:
                raise GeneratorError(f"{code}\nvalues {data.min()}..{data.max()} out of {ints}")
            exact = True
        self.env[name] = result
        deps = frozenset({name}).union(*(s.deps for s in srcs))
        value = Value(name, tuple(data.shape), dtype, lo, hi, exact, error, deps)
        self.p.lines.append((name, code))
        self.p.values[name] = value
        return value

    def _run(self, code: str, name: str) -> Any:
        env = dict(self.env)
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                exec(code, env)
        except Exception as error:
            raise GeneratorError(f"{code}\n{type(error).__name__}: {error}") from error
        return env[name]

    def ranged(self, v: Value) -> Range:
        """An integer or bool value's range, as ints."""
        return int(v.lo), int(v.hi)

    def partner(self, v: Value, kind: str | None = None, exact: bool = False) -> Value:
        """A value that broadcasts with ``v`` and promotes with it (the standard's
        promotion), of ``kind`` (default: v's): one of the program's or a new input."""
        kind = kind or v.kind
        fits = [
            w
            for w in self.p.values.values()
            if w is not v
            and w.kind == kind
            and (w.exact or not exact)
            and promotes(v.dtype, w.dtype)
            and broadcast(v.shape, w.shape) is not None
        ]
        if fits and self.chance(0.6):
            return self.pick(fits)
        shape = [1 if self.chance(0.3) else n for n in v.shape]
        shape = shape[int(self.rng.integers(0, len(shape) + 1)) :] if self.chance(0.3) else shape
        dtypes = [d for d in self.input_dtypes if _kind(d) == kind and promotes(v.dtype, d)]
        dtype = self.pick(dtypes) if dtypes else v.dtype
        return self.input(tuple(shape), dtype)

    def axis(self, ndim: int, *, extra: int = 0) -> int:
        """An axis of ``ndim`` (+ ``extra`` new ones), negative half the time."""
        n = ndim + extra
        a = int(self.rng.integers(n))
        return a - n if self.chance(0.5) else a

    def axes(self, ndim: int) -> tuple[int, ...] | None:
        """None, or distinct axes of ``ndim`` dims, some negative."""
        if self.chance(0.25) or ndim == 0:
            return None
        count = int(self.rng.integers(1, ndim + 1))
        chosen = sorted(int(a) for a in self.rng.choice(ndim, count, replace=False))
        return tuple(a - ndim if self.chance(0.5) else a for a in chosen)

    def threshold(self, v: Value) -> str:
        """A scalar for comparing with exact ``v``: one of its own values (ties), or a
        quarter that every float dtype holds exactly."""
        data = np.from_dlpack(self.env[v.name]).ravel()
        if data.size and self.chance(0.7):
            x = data[int(self.rng.integers(data.size))]
            return repr(float(x)) if v.kind == "float" else str(int(x))
        if v.kind == "float":
            return repr(float(self.rng.integers(2, 9)) / 4)
        low, high = v.dtype.int_range
        return str(
            int(self.rng.integers(max(int(v.lo), -5, low), min(max(int(v.hi), 0) + 1, high) + 1))
        )

    def indices(self, n: int, shape: tuple[int, ...], negative: bool = True) -> str:
        """A literal integer index array of ``shape`` into a dim of size ``n``, of a random
        integer dtype that holds every index (uint8 only for non-negative ones)."""
        low = -n if negative and self.chance(0.5) else 0
        names = ["int64", "int32", "int16", "int8"] + (["uint8"] if low == 0 else [])
        dtype = self.pick([d for d in names if np.iinfo(d).min <= low and n - 1 <= np.iinfo(d).max])
        if 0 in shape:  # a nested list of none has no shape: reshape an empty one
            return f"xp.reshape(xp.asarray([], dtype=xp.{dtype}, device=a0.device), {shape})"
        values = self.rng.integers(low, n, shape).tolist()
        return f"xp.asarray({values}, dtype=xp.{dtype}, device=a0.device)"

    # ---- elementwise -----------------------------------------------------------------------

    def unary(self, v: Value) -> Value | None:
        if v.kind == "float":
            text, cond, exact = self.pick(FLOAT_UNARY)
            return self.emit(text.format(x=v.name), [v], exact=exact, cond=cond)
        if v.kind == "bool":
            text = self.pick(["~{x}", "xp.logical_not({x})"])
            return self.emit(text.format(x=v.name), [v])
        text, transfer = self.pick(INT_UNARY)
        ints = transfer(*self.ranged(v), v.dtype)
        return None if ints is None else self.emit(text.format(x=v.name), [v], ints)

    def binary(self, v: Value) -> Value | None:
        w = self.partner(v)
        x, y = (v, w) if self.chance(0.7) else (w, v)
        if v.kind == "float":
            text, cond, exact = self.pick(FLOAT_BINARY)
            return self.emit(text.format(x=x.name, y=y.name), [x, y], exact=exact, cond=cond)
        if v.kind == "bool":
            return self.emit(self.pick(BOOL_BINARY).format(x=x.name, y=y.name), [x, y])
        text, transfer = self.pick(INT_BINARY)
        ints = transfer(self.ranged(x), self.ranged(y))
        return None if ints is None else self.emit(text.format(x=x.name, y=y.name), [x, y], ints)

    def compare(self, v: Value) -> Value | None:
        """A comparison of exact values (the result jumps where they are equal), with
        another value or a scalar; or a float class test."""
        if not v.exact or v.kind == "bool":
            return None
        if v.kind == "float" and self.chance(0.15):
            test = self.pick(
                ["xp.isfinite({x})", "xp.isnan({x})", "xp.isinf({x})", "xp.signbit({x})"]
            )
            return self.emit(test.format(x=v.name), [v])
        text = self.pick(COMPARISONS)
        if self.chance(0.5):
            return self.emit(text.format(x=v.name, y=self.threshold(v)), [v])
        w = self.partner(v, exact=True)
        return self.emit(text.format(x=v.name, y=w.name), [v, w])

    def cast(self, v: Value) -> Value | None:
        if v.kind == "bool":
            if self.chance(0.5):
                return self.emit(f"xp.astype({v.name}, F) + 0.5", [v], exact=True)
            d = self.pick(self.ints)
            return self.emit(f"xp.astype({v.name}, {self.dt(d)})", [v], (0, 1))
        if v.kind == "int":
            return self._cast_int(v)
        if not v.exact:  # floor, a bool, an integer: steps that exact values alone take
            return None
        how = self.rng.random()
        if how < 0.35:
            d = self.pick(self.ints)
            lo, hi = int(np.floor(4 * v.lo)), int(np.floor(4 * v.hi))
            return self.emit(f"xp.astype(xp.floor({v.name} * 4.0), {self.dt(d)})", [v], (lo, hi))
        if how < 0.5:
            return self.emit(f"xp.astype({v.name}, xp.bool)", [v])
        fn = self.pick(["floor", "ceil", "trunc", "round"])
        return self.emit(f"xp.{fn}({v.name} * 4.0) * 0.25 + 0.5", [v], exact=True)

    def _cast_int(self, v: Value) -> Value | None:
        lo, hi = self.ranged(v)
        how = self.rng.random()
        if how < 0.4:  # to F: exact, and in [LOW, HIGH] through a remainder
            if 0 <= lo and hi < 64:
                return self.emit(f"xp.astype({v.name}, F) + 0.5", [v], exact=True)
            return self.emit(f"xp.astype({v.name} % 64, F) + 0.5", [v], exact=True)
        if how < 0.55:
            return self.emit(f"xp.astype({v.name}, xp.bool)", [v])
        d = self.pick(self.ints)
        return self.emit(f"xp.astype({v.name}, {self.dt(d)})", [v], (lo, hi))

    def select(self, v: Value) -> Value | None:
        """``where``: a condition (a bool value, or a comparison of an exact one), and two
        branches of one kind: values or scalars."""
        cond = self.condition(v.shape)
        if cond is None:
            return None
        if self.chance(0.35):
            other = self.scalar(v)
            x, y = (v.name, other) if self.chance(0.5) else (other, v.name)
            ints = (min(v.lo, int(other)), max(v.hi, int(other))) if v.kind == "int" else None
            text = f"xp.where({cond.name}, {x}, {y})"
            return self.emit(text, [cond, v], ints if v.kind == "int" else None, exact=True)
        w = self.partner(v)
        both = broadcast(v.shape, cond.shape)
        if both is None or broadcast(both, w.shape) is None:
            return None
        ints = (min(v.lo, w.lo), max(v.hi, w.hi)) if v.kind == "int" else None
        return self.emit(
            f"xp.where({cond.name}, {v.name}, {w.name})", [cond, v, w], ints, exact=True
        )  # type: ignore[arg-type]

    def condition(self, shape: tuple[int, ...]) -> Value | None:
        """A bool value that broadcasts with ``shape``: the program's, or a new
        comparison of an exact value."""
        fits = [
            w
            for w in self.p.values.values()
            if w.kind == "bool" and broadcast(shape, w.shape) is not None
        ]
        if fits and self.chance(0.6):
            return self.pick(fits)
        exact = [
            w
            for w in self.p.values.values()
            if w.exact and w.kind != "bool" and broadcast(shape, w.shape) is not None
        ]
        if not exact:
            return None
        w = self.pick(exact)
        return self.emit(f"{w.name} > {self.threshold(w)}", [w])

    def scalar(self, v: Value) -> str:
        """A Python scalar of ``v``'s kind that its dtype holds exactly."""
        if v.kind == "float":
            return repr(float(self.rng.integers(2, 9)) / 4)
        if v.kind == "bool":
            return self.pick(["True", "False"])
        low, high = v.dtype.int_range
        return str(int(self.rng.integers(max(low, -9), min(high, 9) + 1)))

    # ---- views -----------------------------------------------------------------------------

    def view(self, v: Value) -> Value | None:
        kinds: list[Callable[[Value], Value | None]] = [
            self.reshape,
            self.broadcast,
            self.basic_index,
            self.flip,
            self.expand,
        ]
        if v.ndim:
            kinds += [self.permute, self.roll, self.tile, self.repeat, self.moveaxis, self.unstack]
        if 1 in v.shape:
            kinds.append(self.squeeze)
        return self.pick(kinds)(v)

    def _view(self, text: str, v: Value, *others: Value) -> Value | None:
        """A statement that moves ``v``'s elements (and others'): range and exactness
        kept."""
        lo = min([v.lo, *(o.lo for o in others)])
        hi = max([v.hi, *(o.hi for o in others)])
        ints = (int(lo), int(hi)) if v.kind != "float" else None
        return self.emit(text, [v, *others], ints, exact=True)

    def reshape(self, v: Value) -> Value | None:
        if v.size:
            spec = _factor(self.rng, v.size)
            if spec and self.chance(0.3):
                spec[int(self.rng.integers(len(spec)))] = -1
        else:
            spec = self.pick([[0], [0, 3], [2, 0, 1], [1, 0]])
        fn = self.pick(["xp.reshape({x}, {s})", "xp.reshape({x}, {s}, copy=True)"])
        return self._view(fn.format(x=v.name, s=tuple(spec)), v)

    def permute(self, v: Value) -> Value | None:
        if v.ndim >= 2 and self.chance(0.3):
            return self._view(self.pick(["{x}.mT", "xp.matrix_transpose({x})"]).format(x=v.name), v)
        order = tuple(int(i) for i in self.rng.permutation(v.ndim))
        return self._view(f"xp.permute_dims({v.name}, {order})", v)

    def broadcast(self, v: Value) -> Value | None:
        shape = tuple(
            int(self.rng.integers(2, 4)) if n == 1 and self.chance(0.7) else n for n in v.shape
        )
        lead = tuple(int(self.rng.integers(1, 4)) for _ in range(int(self.rng.integers(0, 2))))
        if self.chance(0.3) and (w := self.partner(v)) is not None:
            return self._view(f"xp.broadcast_arrays({v.name}, {w.name})[0]", v)
        return self._view(f"xp.broadcast_to({v.name}, {lead + shape})", v)

    def basic_index(self, v: Value) -> Value | None:
        """Integers, slices with any step, None and an ellipsis; every dim indexed or the
        ellipsis standing for the rest (the standard has no implicit trailing dims)."""
        key = [self._single(n) for n in v.shape]
        if key and self.chance(0.3):  # an ellipsis for a run of dims
            start = int(self.rng.integers(len(key) + 1))
            stop = int(self.rng.integers(start, len(key) + 1))
            key[start:stop] = ["..."]
        elif self.chance(0.15):
            key.insert(int(self.rng.integers(len(key) + 1)), "...")
        for _ in range(int(self.chance(0.25))):
            key.insert(int(self.rng.integers(len(key) + 1)), "None")
        text = f"{v.name}[{', '.join(key)}]" if key else f"{v.name}[()]"
        return self._view(text, v)

    def _single(self, n: int, integers: bool = True) -> str:
        """One dim's index: an integer in range, or a slice whose start and stop lie where
        the standard defines them (step > 0: -n <= stop <= n; step < 0: -n <= stop <
        max(n, 1))."""
        if integers and n and self.chance(0.25):
            return str(int(self.rng.integers(-n, n)))
        step = self.pick([None, 1, 2, 3, -1, -2])
        top = max(n - 1, 0)
        start = int(self.rng.integers(-n, top + 1)) if self.chance(0.4) else None
        stop_high = n if step is None or step > 0 else top
        stop = int(self.rng.integers(-n, stop_high + 1)) if self.chance(0.3) else None
        parts = ["" if start is None else str(start), "" if stop is None else str(stop)]
        return ":".join(parts) + ("" if step is None else f":{step}")

    def flip(self, v: Value) -> Value | None:
        if not v.ndim or self.chance(0.3):
            return self._view(f"xp.flip({v.name})", v)
        axes = self.axes(v.ndim)
        axis = axes[0] if axes and len(axes) == 1 and self.chance(0.5) else axes
        return self._view(f"xp.flip({v.name}, axis={axis})", v)

    def roll(self, v: Value) -> Value | None:
        if self.chance(0.2):  # flattened, rolled, reshaped back
            return self._view(f"xp.roll({v.name}, {int(self.rng.integers(-9, 10))})", v)
        axes = self.axes(v.ndim) or (self.axis(v.ndim),)
        shifts = tuple(int(s) for s in self.rng.integers(-7, 8, len(axes)))
        if len(axes) == 1:
            return self._view(f"xp.roll({v.name}, {shifts[0]}, axis={axes[0]})", v)
        return self._view(f"xp.roll({v.name}, {shifts}, axis={axes})", v)

    def tile(self, v: Value) -> Value | None:
        reps = tuple(int(r) for r in self.rng.integers(1, 4, int(self.rng.integers(1, v.ndim + 2))))
        return self._view(f"xp.tile({v.name}, {reps})", v)

    def repeat(self, v: Value) -> Value | None:
        if self.chance(0.2):  # flattened
            return self._view(f"xp.repeat({v.name}, {int(self.rng.integers(0, 3))})", v)
        axis = self.axis(v.ndim)
        if self.chance(0.4):  # a count per element
            counts = self.rng.integers(0, 3, v.shape[axis]).tolist()
            array = f"xp.asarray({counts}, dtype=xp.int64, device=a0.device)"
            return self._view(f"xp.repeat({v.name}, {array}, axis={axis})", v)
        return self._view(f"xp.repeat({v.name}, {int(self.rng.integers(0, 4))}, axis={axis})", v)

    def moveaxis(self, v: Value) -> Value | None:
        count = int(self.rng.integers(1, v.ndim + 1))
        src = tuple(int(a) for a in self.rng.choice(v.ndim, count, replace=False))
        dst = tuple(
            int(a) - v.ndim * int(self.chance(0.5))
            for a in self.rng.choice(v.ndim, count, replace=False)
        )
        if count == 1:
            return self._view(f"xp.moveaxis({v.name}, {src[0]}, {dst[0]})", v)
        return self._view(f"xp.moveaxis({v.name}, {src}, {dst})", v)

    def expand(self, v: Value) -> Value | None:
        axis = int(self.rng.integers(-v.ndim - 1, v.ndim + 1))
        return self._view(f"xp.expand_dims({v.name}, axis={axis})", v)

    def squeeze(self, v: Value) -> Value | None:
        ones = [d for d, n in enumerate(v.shape) if n == 1]
        chosen = [d - v.ndim if self.chance(0.5) else d for d in ones if self.chance(0.7)] or ones[
            :1
        ]
        axis = chosen[0] if len(chosen) == 1 and self.chance(0.5) else tuple(chosen)
        return self._view(f"xp.squeeze({v.name}, axis={axis})", v)

    def unstack(self, v: Value) -> Value | None:
        axis = self.axis(v.ndim)
        n = v.shape[axis]
        if not n:
            return None
        return self._view(f"xp.unstack({v.name}, axis={axis})[{int(self.rng.integers(-n, n))}]", v)

    def concat(self, v: Value) -> Value | None:
        if self.chance(0.3) or not v.ndim:  # stack: same shapes; the axis counts the new dim
            axis = self.axis(v.ndim, extra=1)
            parts = [v, self._same_shape(v)]
            names = ", ".join(p.name for p in parts)
            return self._view(f"xp.stack([{names}, xp.flip({v.name})], axis={axis})", *parts)
        if self.chance(0.15):  # flattened
            w = self.partner(v)
            return self._view(f"xp.concat(({v.name}, {w.name}), axis=None)", v, w)
        axis = self.axis(v.ndim)
        shape = list(v.shape)
        shape[axis] = int(self.rng.integers(0, 4))
        other = self.input(tuple(shape), v.dtype if self.chance(0.6) else None)
        if not promotes(v.dtype, other.dtype):
            return None
        flipped = f"xp.flip({v.name}, axis={axis})"
        return self._view(f"xp.concat([{v.name}, {other.name}, {flipped}], axis={axis})", v, other)

    def _same_shape(self, v: Value) -> Value:
        same = [
            w
            for w in self.p.values.values()
            if w.shape == v.shape and w.dtype is v.dtype and w is not v
        ]
        return self.pick(same) if same and self.chance(0.6) else self.input(v.shape, v.dtype)

    # ---- indexing --------------------------------------------------------------------------

    def index(self, v: Value) -> Value | None:
        if not v.ndim:
            return self.basic_index(v)
        how = self.rng.random()
        if how < 0.35:
            return self.array_index(v)
        if how < 0.6:
            return self.take(v)
        if how < 0.8:
            return self.take_along(v)
        return self.mask(v)

    def array_index(self, v: Value) -> Value | None:
        """``x[i0, i1, ...]``: one integer or integer array per dim (the standard mixes
        them with nothing else), the arrays broadcasting together to ``target``."""
        if not v.ndim or 0 in v.shape:
            return None
        low = 0 if self.chance(0.1) else 1
        target = tuple(int(n) for n in self.rng.integers(low, 4, int(self.rng.integers(1, 3))))
        key, srcs = [], []
        for n in v.shape:
            if self.chance(0.3):
                key.append(str(int(self.rng.integers(-n, n))))
                continue
            computed = self._index_value(n, lambda w: broadcast(w.shape, target) == target)
            if computed is not None and self.chance(0.4):
                key.append(computed.name)
                srcs.append(computed)
            else:
                key.append(self.indices(n, self._broadcasting(target)))
        if not srcs and all(k.lstrip("-").isdigit() for k in key):  # an array at least
            key[-1] = self.indices(v.shape[-1], target)
        return self._gathered(f"{v.name}[{', '.join(key)}]", v, srcs)

    def _broadcasting(self, target: tuple[int, ...]) -> tuple[int, ...]:
        """A shape that broadcasts to ``target``: some dims 1, leading ones dropped."""
        dims = tuple(1 if self.chance(0.3) else t for t in target)
        return dims[int(self.rng.integers(0, len(dims) + 1)) :] if self.chance(0.2) else dims

    def _gathered(self, text: str, v: Value, indices: Sequence[Value]) -> Value | None:
        """A gather of ``v``'s elements at other values: v's range and exactness."""
        ints = self.ranged(v) if v.kind != "float" else None
        return self.emit(text, [v, *indices], ints, exact=v.exact)

    def _index_value(self, n: int, fits: Callable[[Value], bool]) -> Value | None:
        """An integer value of the program that indexes a dim of size ``n`` (all in
        [-n, n)): data-dependent indices, argsort's or argmax's."""
        found = [
            w
            for w in self.p.values.values()
            if w.kind == "int" and -n <= w.lo and w.hi < n and fits(w)
        ]
        return self.pick(found) if found else None

    def take(self, v: Value) -> Value | None:
        axis = self.axis(v.ndim)
        n = v.shape[axis]
        count = int(self.rng.integers(0 if self.chance(0.1) else 1, 6))
        if not n and count:
            return None
        computed = self._index_value(n, lambda w: w.ndim == 1) if n else None
        if computed is not None and self.chance(0.4):
            index, srcs = computed.name, [computed]
        else:
            index, srcs = self.indices(n, (count,)), []
        args = f"axis={axis}" if v.ndim > 1 or self.chance(0.5) else ""
        text = f"xp.take({v.name}, {index}{', ' if args else ''}{args})"
        return self._gathered(text, v, srcs)

    def take_along(self, v: Value) -> Value | None:
        """``take_along_axis``: indices of v's rank, broadcasting with it off the axis."""
        axis = self.axis(v.ndim)
        n = v.shape[axis]
        shape = [1 if self.chance(0.25) else m for m in v.shape]
        shape[axis] = int(self.rng.integers(0 if self.chance(0.1) else 1, 5))
        if not n and shape[axis]:
            return None
        return self._gathered(
            f"xp.take_along_axis({v.name}, {self.indices(n, tuple(shape))}, axis={axis})", v, []
        )

    def mask(self, v: Value) -> Value | None:
        """``x[mask]``: a bool value of x's leading shape, or a comparison of an exact
        one; the result's length is data-dependent (the reference says it)."""
        fits = [
            w
            for w in self.p.values.values()
            if w.kind == "bool" and w.ndim and v.shape[: w.ndim] == w.shape
        ]
        if fits and self.chance(0.6):
            m = self.pick(fits)
            return self._gathered(f"{v.name}[{m.name}]", v, [m])
        exact = [
            w
            for w in self.p.values.values()
            if w.exact and w.kind != "bool" and w.ndim and v.shape[: w.ndim] == w.shape
        ]
        if not exact:
            return None
        w = self.pick(exact)
        return self._gathered(f"{v.name}[{w.name} > {self.threshold(w)}]", v, [w])

    def setitem(self, v: Value) -> Value | None:
        """On a copy: ``x[key] = value`` (basic key or mask), or an in-place operator."""
        copy = f"{{out}} = xp.asarray({v.name}, copy=True)"
        if self.chance(0.4):
            return self._inplace(v, copy)
        if v.ndim and self.chance(0.3):
            m = self.condition(v.shape)
            if m is None or m.shape != v.shape[: m.ndim] or not m.ndim:
                return None
            scalar = self.scalar(v)
            return self._stored(f"{copy}\n{{out}}[{m.name}] = {scalar}", v, [m], scalar)
        key = ", ".join(self._single(n) for n in v.shape) if v.shape else "..."
        if self.chance(0.2):
            key = "..." if not v.shape else f"..., {self._single(v.shape[-1])}"
        region = np.from_dlpack(self._run(f"r = {v.name}[{key}]", "r")).shape
        if self.chance(0.5):
            scalar = self.scalar(v)
            return self._stored(f"{copy}\n{{out}}[{key}] = {scalar}", v, [], scalar)
        fits = [
            w
            for w in self.p.values.values()
            if w.dtype is v.dtype and broadcast(region, w.shape) == region
        ]
        w = self.pick(fits) if fits and self.chance(0.5) else self.input(region, v.dtype)
        return self._stored(f"{copy}\n{{out}}[{key}] = {w.name}", v, [w], None)

    def _stored(self, code: str, v: Value, srcs: list[Value], scalar: str | None) -> Value | None:
        lo, hi = v.lo, v.hi
        for w in srcs:
            if w.kind == v.kind:
                lo, hi = min(lo, w.lo), max(hi, w.hi)
        if scalar is not None and v.kind == "int":
            lo, hi = min(lo, int(scalar)), max(hi, int(scalar))
        ints = (int(lo), int(hi)) if v.kind != "float" else None
        return self.emit(code, [v, *srcs], ints, exact=True)

    def _inplace(self, v: Value, copy: str) -> Value | None:
        """``x op= y``: the standard defines it where ``x op y`` has x's dtype and shape."""
        w = self.partner(v)
        if broadcast(v.shape, w.shape) != v.shape or promoted(v.dtype, w.dtype) is not v.dtype:
            return None
        if v.kind == "float":
            op = self.pick(["+=", "*=", "/="])
            scale = "\n{out} *= 0.5" if op == "+=" else ""
            return self.emit(f"{copy}\n{{out}} {op} {w.name}{scale}", [v, w], cond=2.0)
        if v.kind == "bool":
            return self.emit(f"{copy}\n{{out}} {self.pick(['&=', '|=', '^='])} {w.name}", [v, w])
        ops = {"+=": 0, "-=": 1, "*=": 2, "&=": 6, "|=": 7, "^=": 8, "//=": 9, "%=": 10}
        op = self.pick(list(ops))
        ints = INT_BINARY[ops[op]][1](self.ranged(v), self.ranged(w))
        return None if ints is None else self.emit(f"{copy}\n{{out}} {op} {w.name}", [v, w], ints)

    # ---- reductions and scans --------------------------------------------------------------

    def reduction(self, v: Value) -> Value | None:
        axes = self.axes(v.ndim)
        reduced = range(v.ndim) if axes is None else [a % v.ndim for a in axes]
        n = prod(v.shape[d] for d in reduced)
        keep = self.chance(0.4)
        args = f"axis={axes}, keepdims={keep}"
        if v.kind == "bool":
            fn = self.pick(["xp.all", "xp.any", "xp.count_nonzero"])
            ints = (0, n) if "count" in fn else None
            return self.emit(f"{fn}({v.name}, {args})", [v], ints)
        if v.exact and v.ndim and n and self.chance(0.25):
            return self.arg(v, keep)
        if v.kind == "float":
            return self._float_reduction(v, args, n)
        return self._int_reduction(v, args, n)

    def arg(self, v: Value, keep: bool) -> Value | None:
        """argmax/argmin of exact values: the first of ties, by the standard."""
        axis = None if self.chance(0.3) else self.axis(v.ndim)
        n = v.size if axis is None else v.shape[axis]
        if not n:
            return None
        fn = self.pick(["argmax", "argmin"])
        return self.emit(f"xp.{fn}({v.name}, axis={axis}, keepdims={keep})", [v], (0, n - 1))

    def _float_reduction(self, v: Value, args: str, n: int) -> Value | None:
        # var moves by about 2 * x * spread * error, std by 2 * x * error: against the 0.5
        # added, that is 4 * hi * spread and 4 * hi.
        var = 1 + 4 * v.hi * (v.hi - v.lo)
        fns: list[tuple[str, float, bool]] = [
            ("xp.sum({x}, {a}) + 0.5", 1.0, False), ("xp.prod({x}, {a})", max(n, 1), False),
        ]  # fmt: skip
        if n:
            fns += [
                ("xp.max({x}, {a})", 1.0, True), ("xp.min({x}, {a})", 1.0, True),
                (f"xp.sum({{x}}, {{a}}) / {n}", 1.0, False), ("xp.mean({x}, {a})", 1.0, False),
                ("xp.var({x}, {a}) + 0.5", var, False),
                ("xp.std({x}, {a}) + 0.5", 1 + 4 * v.hi, False),
            ]  # fmt: skip
        if n > 1:
            fns.append(("xp.var({x}, {a}, correction=1) + 0.5", var, False))
        text, cond, exact = self.pick(fns)
        return self.emit(text.format(x=v.name, a=args), [v], exact=exact, cond=cond)

    def _int_reduction(self, v: Value, args: str, n: int) -> Value | None:
        lo, hi = self.ranged(v)
        fns: list[tuple[str, Range]] = [
            ("xp.sum({x}, {a})", (min(0, n * lo), max(0, n * hi))),
            ("xp.count_nonzero({x}, {a})", (0, n)),
        ]
        if n <= 4:
            top = max(abs(lo), abs(hi)) ** n
            fns.append(("xp.prod({x}, {a})", (-top if lo < 0 else 0, max(top, 1))))
        if n:
            fns += [("xp.max({x}, {a})", (lo, hi)), ("xp.min({x}, {a})", (lo, hi))]
        text, ints = self.pick(fns)
        if "sum" in text and self.chance(0.3):  # dtype=: the sum in another dtype
            text = text.replace("{a})", "{a}, dtype=" + self.dt(self.pick(self.ints)) + ")")
        return self.emit(text.format(x=v.name, a=args), [v], ints)

    def scan(self, v: Value) -> Value | None:
        """cumulative_sum, cumulative_prod and diff (the standard leaves 0-D ones open)."""
        if not v.ndim or v.kind == "bool":
            return None
        axis = self.axis(v.ndim)
        n = v.shape[axis]
        initial = self.chance(0.3)
        arg = f"axis={axis}" if v.ndim > 1 or self.chance(0.5) else ""
        init = ", include_initial=True" if initial else ""
        sep = ", " if arg else ""
        if self.chance(0.3):
            order = int(self.rng.integers(1, 3))
            if n < order:
                return None
            text = f"xp.diff({v.name}{sep}{arg}, n={order})"
            if v.kind == "float":
                return self.emit(f"xp.abs({text}) + 0.5", [v], cond=lambda hi: 4 * order * hi)
            lo, hi = self.ranged(v)
            spread = (hi - lo) * order
            return self.emit(text, [v], (-spread, spread))
        if self.chance(0.3):
            text = f"xp.cumulative_prod({v.name}{sep}{arg}{init})"
            if v.kind == "float":  # relative errors add up along a product
                return self.emit(text, [v], cond=max(n, 1))
            lo, hi = self.ranged(v)
            top = max(abs(lo), abs(hi), 1) ** max(n, 1)
            return self.emit(text, [v], (-top if lo < 0 else 0, top))
        text = f"xp.cumulative_sum({v.name}{sep}{arg}{init})"
        if v.kind == "float":
            return self.emit(f"{text} / {n + 1} + 0.5", [v])
        lo, hi = self.ranged(v)
        return self.emit(text, [v], (min(0, lo, n * lo), max(0, hi, n * hi)))

    # ---- linear algebra --------------------------------------------------------------------

    def linalg(self, v: Value) -> Value | None:
        if not v.ndim or v.kind == "bool":
            return None
        how = self.rng.random()
        if how < 0.55:
            return self.matmul(v)
        if how < 0.8:
            return self.vecdot(v)
        return self.tensordot(v)

    def _products(self, text: str, v: Value, w: Value, k: int) -> Value | None:
        """A sum of ``k`` products: floats scaled back into range, integers bounded."""
        if v.kind == "float":
            scaled = f"{text} / {k}" if k else f"{text} + 0.5"
            return self.emit(scaled, [v, w], cond=2.0)
        top = _corners(lambda a, b: a * b, self.ranged(v), self.ranged(w))
        return self.emit(text, [v, w], (min(0, k * top[0]), max(0, k * top[1])))

    def _operand(self, v: Value, shape: tuple[int, ...]) -> Value:
        """A value of ``shape`` that promotes with ``v``: the program's or a new input."""
        fits = [
            w
            for w in self.p.values.values()
            if w.shape == shape and w.kind == v.kind and promotes(v.dtype, w.dtype)
        ]
        if fits and self.chance(0.6):
            return self.pick(fits)
        dtypes = [d for d in self.input_dtypes if _kind(d) == v.kind and promotes(v.dtype, d)]
        return self.input(shape, self.pick(dtypes) if dtypes else v.dtype)

    def matmul(self, v: Value) -> Value | None:
        k = v.shape[-1]
        m = int(self.rng.integers(1, 5))
        how = self.rng.random()
        if how < 0.2:
            shape: tuple[int, ...] = (k,)
        elif how < 0.8 or v.ndim < 2:
            shape = (k, m)
        else:  # batched: a batch dim of 1 broadcasts
            batch = tuple(1 if self.chance(0.3) else n for n in v.shape[:-2])
            shape = batch + (k, m)
        w = self._operand(v, shape)
        op = self.pick(["xp.matmul({x}, {y})", "{x} @ {y}"])
        return self._products(op.format(x=v.name, y=w.name), v, w, k)

    def vecdot(self, v: Value) -> Value | None:
        axis = -1 if v.ndim == 1 or self.chance(0.6) else -2
        shape = tuple(
            1 if self.chance(0.2) and d != v.ndim + axis else n for d, n in enumerate(v.shape)
        )
        w = self._operand(v, shape[int(self.rng.integers(0, v.ndim + axis + 1)) :])
        return self._products(f"xp.vecdot({v.name}, {w.name}, axis={axis})", v, w, v.shape[axis])

    def tensordot(self, v: Value) -> Value | None:
        count = int(self.rng.integers(0, min(v.ndim, 2) + 1))
        contracted = v.shape[v.ndim - count :]
        w = self._operand(
            v,
            contracted
            + tuple(int(self.rng.integers(1, 4)) for _ in range(int(self.rng.integers(0, 2)))),
        )
        if self.chance(0.5) or not count:
            text = f"xp.tensordot({v.name}, {w.name}, axes={count})"
        else:
            pairs = (tuple(range(v.ndim - count, v.ndim)), tuple(range(count)))
            text = f"xp.tensordot({v.name}, {w.name}, axes={pairs})"
        return self._products(text, v, w, prod(contracted))

    # ---- sorting, searching, sets ----------------------------------------------------------

    def sort(self, v: Value) -> Value | None:
        """sort, argsort (stable: ties keep their order, which the standard then defines),
        and gathers in another value's order; exact values only."""
        if not v.exact or not v.ndim or v.kind == "bool":
            return None
        axis = self.axis(v.ndim)
        desc = self.chance(0.4)
        n = v.shape[axis]
        how = self.rng.random()
        if how < 0.4:
            return self._view(f"xp.sort({v.name}, axis={axis}, descending={desc})", v)
        order = f"xp.argsort({v.name}, axis={axis}, descending={desc}, stable=True)"
        if how < 0.7:
            return self.emit(order, [v], (0, max(n - 1, 0)))
        w = self._same_shape(v)
        return self._gathered(f"xp.take_along_axis({w.name}, {order}, axis={axis})", w, [v])

    def search(self, v: Value) -> Value | None:
        """searchsorted, nonzero and the unique functions, of exact values; the unique
        ones through what the standard fixes (it leaves their order open)."""
        if not v.exact:
            return None
        how = self.rng.random()
        if how < 0.3 and v.kind != "bool":
            return self.searchsorted(v)
        if (how < 0.55 or v.kind == "bool") and v.ndim:  # sort takes no bools: nor unique
            i = int(self.rng.integers(v.ndim))
            return self.emit(f"xp.nonzero({v.name})[{i}]", [v], (0, max(v.shape[i] - 1, 0)))
        if v.kind == "bool":
            return None
        if how < 0.75:
            return self._view(f"xp.sort(xp.unique_values({v.name}))", v)
        if how < 0.9:  # counts in the order of their values
            code = (
                f"{{out}} = xp.unique_counts({v.name})\n"
                "{out} = xp.take({out}.counts, xp.argsort({out}.values))"
            )
            return self.emit(code, [v], (0, v.size))
        code = (  # the values at the inverse indices: x again
            f"{{out}} = xp.unique_inverse({v.name})\n"
            "{out} = {out}.values[{out}.inverse_indices]"
        )
        return self._view(code, v)

    def searchsorted(self, v: Value) -> Value | None:
        """Positions of exact values in a sorted copy of ``v``: ties by ``side``."""
        flat = self._view(f"xp.sort(xp.reshape({v.name}, (-1,)))", v)
        if flat is None:
            return None
        w = self.partner(v, exact=True) if self.chance(0.6) else v
        if w.dtype is not v.dtype:
            w = v
        side = self.pick(["left", "right"])
        return self.emit(
            f"xp.searchsorted({flat.name}, {w.name}, side='{side}')", [flat, w], (0, flat.size)
        )

    # ---- creation --------------------------------------------------------------------------

    def create(self, v: Value) -> Value | None:
        how = self.rng.random()
        dev = "device=a0.device"
        if how < 0.3:
            fill = self.scalar(v)
            text = self.pick([
                f"xp.full_like({v.name}, {fill})", f"xp.zeros_like({v.name}) + {fill}",
                f"xp.ones_like({v.name}) * {fill}",
            ])  # fmt: skip
            ints = (min(0, int(fill)), max(1, int(fill))) if v.kind == "int" else None
            if v.kind == "bool":
                text = f"xp.full_like({v.name}, {fill})"
            return self.emit(text, [v], ints, exact=True)
        n = int(self.rng.integers(0, 7))
        if how < 0.5:
            return self.emit(f"xp.arange(1, {n + 1}, dtype=F, {dev})", [], exact=True)
        if how < 0.6:
            start, step = int(self.rng.integers(-5, 5)), self.pick([1, 2, -1, 3])
            d = self.pick([d for d in self.ints if d.is_signed])
            text = f"xp.arange({start}, {start + step * n}, {step}, dtype={self.dt(d)}, {dev})"
            return self.emit(text, [], (min(start, start + step * n), max(start, start + step * n)))
        if how < 0.7:
            return self.emit(
                f"xp.linspace(0.5, 2.0, {n}, dtype=F, {dev}, endpoint={self.chance(0.7)})", []
            )
        if how < 0.8:
            k = int(self.rng.integers(-2, 3))
            return self.emit(
                f"xp.eye({n}, {int(self.rng.integers(1, 5))}, k={k}, dtype=F, {dev}) + 0.5",
                [],
                exact=True,
            )
        if v.ndim >= 2 and v.kind != "bool":
            fn, k = self.pick(["tril", "triu"]), int(self.rng.integers(-2, 3))
            if v.kind == "float":
                return self.emit(f"xp.{fn}({v.name}, k={k}) + 0.5", [v], exact=v.exact)
            return self.emit(
                f"xp.{fn}({v.name}, k={k})", [v], (min(0, int(v.lo)), max(0, int(v.hi)))
            )
        if v.ndim == 1:
            w = self.source(lambda w: w.ndim == 1 and w.dtype is v.dtype)
            if w.ndim == 1 and w.dtype is v.dtype:
                i, how_ = int(self.rng.integers(2)), self.pick(["xy", "ij"])
                return self._view(f"xp.meshgrid({v.name}, {w.name}, indexing='{how_}')[{i}]", v, w)
        return None


def _kind(d: DType) -> str:
    return "bool" if d is DType.BOOL else "float" if d.is_float else "int"


def promoted(a: DType, b: DType) -> DType | None:
    """The standard's result dtype of ``a`` and ``b``, or None where it defines none
    (across kinds; uint64 with a signed dtype; float16 with bfloat16, zyx's own pair)."""
    if a is b:
        return a
    if _kind(a) != _kind(b) or a is DType.BOOL:
        return None
    if a.is_float:
        return None if {a, b} == {DType.F16, DType.BF16} else max(a, b, key=lambda d: d.itemsize)
    if a.is_signed == b.is_signed:
        return max(a, b, key=lambda d: d.itemsize)
    signed, unsigned = (a, b) if a.is_signed else (b, a)
    if unsigned is DType.U64:
        return None
    if signed.itemsize > unsigned.itemsize:
        return signed
    return {1: DType.I16, 2: DType.I32, 4: DType.I64}[unsigned.itemsize]


def promotes(a: DType, b: DType) -> bool:
    return promoted(a, b) is not None


def broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """The standard's broadcast of two shapes, or None."""
    out = []
    for x, y in zip(((1,) * (len(b) - len(a)) + a), ((1,) * (len(a) - len(b)) + b)):
        if x != y and 1 not in (x, y):
            return None
        out.append(y if x == 1 else x)
    return tuple(out)


def _factor(rng: np.random.Generator, size: int) -> list[int]:
    """A random shape of ``size`` elements, 0 to 3 dims (0 only for one element)."""
    if size == 1 and rng.random() < 0.3:
        return []
    dims = []
    rest = size
    for _ in range(int(rng.integers(0, 3))):
        divisors = [d for d in range(1, rest + 1) if rest % d == 0]
        d = divisors[int(rng.integers(len(divisors)))]
        dims.append(d)
        rest //= d
    return [*dims, rest]
