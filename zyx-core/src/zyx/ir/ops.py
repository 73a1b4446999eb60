"""The kernel IR: a flat list of ops in the spirit of zyx's ``Op``.

A value is named by the index of the op that produced it (a ``Ref``). Ops that open a
scope (``Loop``, ``If``) are closed by ``EndLoop`` / ``EndIf``. Index values (ranges and
loop counters) have dtype ``INDEX``.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, fields
from enum import Enum
from functools import cached_property
from typing import TypeAlias, get_args

from zyx.dtypes import DType

Ref: TypeAlias = int
"""The index of the op whose value is used."""

INDEX = DType.I64
"""The dtype of range and loop indices."""


class ParamKind(Enum):
    """How a kernel uses a parameter; lets a backend derive read and write sets."""

    __hash__ = object.__hash__  # members are singletons; Enum's hash runs Python code

    GLOBAL = "Global"
    """A buffer the kernel only reads."""
    GLOBAL_MUT = "GlobalMut"
    """A buffer the kernel writes (and may read)."""
    VARIABLE = "Variable"
    """A scalar passed by value."""


class Scope(Enum):
    """Which hardware index a ``Range`` is: work-group or work-item within the group."""

    __hash__ = object.__hash__  # members are singletons; Enum's hash runs Python code

    GROUP = "Group"
    LOCAL = "Local"


class Storage(Enum):
    """Where a ``Define`` lives: per work-item registers or per work-group local memory."""

    __hash__ = object.__hash__  # members are singletons; Enum's hash runs Python code

    REGISTER = "Register"
    LOCAL = "Local"


class UOp(Enum):
    """zyx's unary ops. All but ``neg``, ``bitnot`` and ``abs`` are float only; each float
    one is C's function of that name (``ln`` is ``log``, ``rint`` rounds half to even)."""

    __hash__ = object.__hash__  # members are singletons; Enum's hash runs Python code

    NEG = "neg"
    BITNOT = "bitnot"
    EXP = "exp"
    EXP2 = "exp2"
    LN = "ln"
    LOG2 = "log2"
    RECIPROCAL = "reciprocal"
    SQRT = "sqrt"
    SIN = "sin"
    COS = "cos"
    FLOOR = "floor"
    TRUNC = "trunc"
    ABS = "abs"
    TAN = "tan"
    TANH = "tanh"
    ASIN = "asin"
    ACOS = "acos"
    ATAN = "atan"
    SINH = "sinh"
    COSH = "cosh"
    ASINH = "asinh"
    ACOSH = "acosh"
    ATANH = "atanh"
    EXPM1 = "expm1"
    LOG1P = "log1p"
    LOG10 = "log10"
    CEIL = "ceil"
    RINT = "rint"

    @property
    def is_float_only(self) -> bool:
        return self not in _ANY_NUMBER_UNARY


_ANY_NUMBER_UNARY = frozenset({UOp.NEG, UOp.BITNOT, UOp.ABS})


class BOp(Enum):
    """zyx's binary ops. Comparisons yield ``bool``; ``or``/``and`` are logical. ``max`` and
    ``min`` of floats are C's ``fmax`` and ``fmin`` (a NaN operand loses); ``pow``,
    ``atan2``, ``hypot``, ``copysign`` and ``nextafter`` are float only, C's functions, and
    ``nextafter`` steps to the next value of the operands' own dtype (f16 and bf16 too)."""

    __hash__ = object.__hash__  # members are singletons; Enum's hash runs Python code

    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    POW = "pow"
    MOD = "mod"
    CMPLT = "cmplt"
    CMPGT = "cmpgt"
    CMPGE = "cmpge"
    MAX = "max"
    OR = "or"
    AND = "and"
    BITXOR = "bitxor"
    BITOR = "bitor"
    BITAND = "bitand"
    SHL = "shl"
    SHR = "shr"
    NOTEQ = "noteq"
    EQ = "eq"
    MIN = "min"
    ATAN2 = "atan2"
    HYPOT = "hypot"
    COPYSIGN = "copysign"
    NEXTAFTER = "nextafter"

    @property
    def is_comparison(self) -> bool:
        return self in _COMPARISONS

    @property
    def is_float_only(self) -> bool:
        return self in _FLOAT_ONLY_BINARY


_COMPARISONS = frozenset({BOp.CMPLT, BOp.CMPGT, BOp.CMPGE, BOp.NOTEQ, BOp.EQ})
_FLOAT_ONLY_BINARY = frozenset({BOp.POW, BOp.ATAN2, BOp.HYPOT, BOp.COPYSIGN, BOp.NEXTAFTER})


@dataclass(frozen=True, slots=True)
class SymDim:
    """A work size that depends on a ``Variable`` param: ``ceil(args[param] / div)``.

    ``param`` is the position of the Variable among the kernel's params (launch order).
    """

    param: int
    div: int = 1

    def evaluate(self, args: Sequence[object]) -> int:
        value = operator.index(args[self.param])  # type: ignore[arg-type]  # a numpy int too
        return -(-value // self.div)


Dim: TypeAlias = int | SymDim


@dataclass(frozen=True, slots=True)
class Param:
    dtype: DType
    kind: ParamKind
    name: str = ""


@dataclass(frozen=True, slots=True)
class Range:
    """The index along ``axis`` (0..2): a work-group id or a work-item id in the group."""

    axis: int
    scope: Scope
    size: Dim


@dataclass(frozen=True, slots=True)
class Const:
    """A literal. An integer past its dtype's range wraps to it (``DType.wrap``)."""

    dtype: DType
    value: bool | int | float

    @property
    def wrapped(self) -> bool | int | float:
        """``value`` as the dtype holds it: an integer wrapped, a float or bool as given."""
        return self.dtype.wrap(int(self.value)) if self.dtype.is_int else self.value


def always(op: Op) -> bool:
    """Whether ``op`` is the constant true: a condition that needs no test."""
    return isinstance(op, Const) and op.value is True


@dataclass(frozen=True, slots=True)
class Define:
    """Storage for ``length`` elements: per-work-item registers or work-group local memory."""

    dtype: DType
    storage: Storage
    length: int


@dataclass(frozen=True, slots=True)
class Load:
    """Reads element ``index`` of a buffer param or a ``Define``."""

    src: Ref
    index: Ref


@dataclass(frozen=True, slots=True)
class Store:
    """Writes ``value`` to element ``index`` of a ``GlobalMut`` param or a ``Define``."""

    dst: Ref
    index: Ref
    value: Ref


@dataclass(frozen=True, slots=True)
class Cast:
    x: Ref
    dtype: DType


@dataclass(frozen=True, slots=True)
class Unary:
    op: UOp
    x: Ref


@dataclass(frozen=True, slots=True)
class Binary:
    op: BOp
    a: Ref
    b: Ref


@dataclass(frozen=True, slots=True)
class Fma:
    """``a * b + c`` rounded once (C's ``fma``), all three of one dtype, f32 or f64: a
    product's accumulation (``zyx.graph.matmul``) that compiles to one multiply-add
    instruction, where a multiply and an add (each rounded, as the IR rounds every op)
    would be two."""

    a: Ref
    b: Ref
    c: Ref


@dataclass(frozen=True, slots=True)
class Where:
    """``a`` where the bool ``cond`` is true, else ``b``, both of one dtype: a select, not a
    branch (both operands are computed, by every work-item)."""

    cond: Ref
    a: Ref
    b: Ref


@dataclass(frozen=True, slots=True)
class Loop:
    """Counts its index from 0 to ``size - 1`` (``size`` is an ``INDEX`` value)."""

    size: Ref


@dataclass(frozen=True, slots=True)
class EndLoop:
    pass


@dataclass(frozen=True, slots=True)
class If:
    cond: Ref


@dataclass(frozen=True, slots=True)
class EndIf:
    pass


@dataclass(frozen=True, slots=True)
class Barrier:
    """All work-items of a group reach it before any passes; orders local memory."""


MMA_SHAPE = (16, 8, 16)
"""(m, n, k) of one ``Mma``: PTX's ``mma.sync.aligned.m16n8k16``."""

MMA_FRAGMENT = {"a": 8, "b": 4, "c": 4}
"""Elements each lane holds of A (16 x 16), B (16 x 8) and C (16 x 8)."""


@dataclass(frozen=True, slots=True)
class Mma:
    """``C += A @ B`` by a warp: the 32 work-items of consecutive flat local ids
    (``x + y * X + z * X * Y``; lane ``l = id % 32``) multiply a 16 x 16 matrix A by a
    16 x 8 matrix B (f16 or bf16, both one dtype) into a 16 x 8 f32 matrix C, each matrix
    held in pieces by the lanes' register ``Define``s from the constant element offsets
    ``*_at``, as PTX's ``mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}`` lays them out
    (``g = l / 4``, ``t = l % 4``):

    - A: element ``i < 8`` of lane ``l`` is ``A[g + 8 * (i / 2 % 2), 2 * t + i % 2 + 8 * (i / 4)]``;
    - B: element ``i < 4`` is ``B[2 * t + i % 2 + 8 * (i / 2), g]``;
    - C: element ``i < 4`` is ``C[g + 8 * (i / 2), 2 * t + i % 2]``.

    Products are exact and sums are in f32, in an order the hardware chooses. Every lane of
    the warp must reach it together: it is refused inside an ``If``, and the loops around it
    must run as many times for every work-item of a warp (else undefined). Only devices
    with 32-lane warps and tensor cores for the dtype compile it (``check_limits``).
    """

    c: Ref
    a: Ref
    b: Ref
    c_at: int = 0
    a_at: int = 0
    b_at: int = 0


@dataclass(frozen=True, slots=True)
class LdMatrix:
    """A warp's load of ``count`` (1, 2 or 4) matrices of 8 x 8 f16 or bf16 elements from a
    local-memory ``Define`` into its lanes' register ``Define`` ``dst`` from the constant
    offset ``dst_at``, as PTX's ``ldmatrix.sync.aligned.m8n8.x{count}[.trans].shared.b16``:
    lane ``l < 8 * count``'s ``index`` is where row ``l % 8`` of matrix ``l / 8`` starts in
    ``src``, its 8 elements consecutive (a multiple of 8: rows of 16 aligned bytes; else
    undefined); then every lane holds, at ``dst_at + 2 * j`` and the next, the elements of
    matrix ``j``'s row ``l / 4`` at columns ``2 * (l % 4)`` and the next, or with ``trans``
    those of its column ``l / 4`` at rows ``2 * (l % 4)`` and the next: pieces of ``Mma``'s
    A and B fragments. Every lane of the warp must reach it together, as an ``Mma``.
    """

    dst: Ref
    src: Ref
    index: Ref
    count: int = 4
    trans: bool = False
    dst_at: int = 0


@dataclass(frozen=True, slots=True)
class Shuffle:
    """The value ``x`` of the work-item of lane ``l ^ mask`` in this work-item's warp (the
    32 work-items of consecutive flat local ids, lane ``l = id % 32``, as ``Mma``'s): a
    butterfly exchange of registers, ``mask`` from 1 to 31, of a value of any dtype. A
    warp's reductions combine ``x`` with its shuffles at masks 16, 8, 4, 2, 1 (CUDA's
    ``__shfl_xor_sync``) instead of a tree in local memory with a barrier per step. Every
    lane of the warp must reach it together: it is refused inside an ``If``, and the loops
    around it must run as many times for every work-item of a warp (else undefined). Only
    devices whose warps exchange registers compile it (``DeviceInfo.shuffle``,
    ``check_limits``)."""

    x: Ref
    mask: int


@dataclass(frozen=True, slots=True)
class CopyAsync:
    """A work-item's copy of ``count`` consecutive elements of buffer param ``src`` from
    ``src_index`` into the local-memory ``Define`` ``dst`` from ``index``, both of one
    dtype, or of ``count`` zeros where the bool ``cond`` is false (``src`` not read then);
    ``count`` elements are 4, 8 or 16 bytes, and both indices multiples of ``count``
    (else undefined). It completes later, as PTX's ``cp.async`` does: the copies a
    work-item issued since its last ``CommitCopies`` form a group at that commit, and its
    ``WaitCopies(pending)`` returns once all but its ``pending`` newest groups are complete.
    Until then the destination's elements are undefined (reading or writing them is a
    race); the other work-items of the group see them after that wait and a ``Barrier``.
    ``src`` must not change during the kernel. A backend without asynchronous copies
    copies at once (``CommitCopies`` and ``WaitCopies`` do nothing then)."""

    dst: Ref
    index: Ref
    src: Ref
    src_index: Ref
    cond: Ref
    count: int


@dataclass(frozen=True, slots=True)
class CommitCopies:
    """Closes the group of this work-item's ``CopyAsync``s issued since its last commit
    (possibly none: an empty group, complete at once)."""


@dataclass(frozen=True, slots=True)
class WaitCopies:
    """Waits until at most ``pending`` of this work-item's committed groups of
    ``CopyAsync``s are incomplete: the oldest complete first (``CopyAsync``)."""

    pending: int = 0


Op: TypeAlias = (
    Param | Range | Const | Define | Load | Store | Cast | Unary | Binary | Fma | Where
    | Loop | EndLoop | If | EndIf | Barrier | Mma | LdMatrix | CopyAsync | CommitCopies
    | WaitCopies | Shuffle
)  # fmt: skip


@dataclass(frozen=True)
class Kernel:
    """A named, immutable op list. Build one with ``KernelBuilder`` (it verifies)."""

    name: str
    ops: tuple[Op, ...]

    @cached_property
    def params(self) -> tuple[Param, ...]:
        """The params in launch order."""
        return tuple(op for op in self.ops if isinstance(op, Param))

    @cached_property
    def param_refs(self) -> tuple[Ref, ...]:
        return tuple(i for i, op in enumerate(self.ops) if isinstance(op, Param))

    @cached_property
    def global_size(self) -> tuple[Dim, Dim, Dim]:
        """Work-groups per axis (1 where the kernel has no group range on that axis)."""
        return self._sizes(Scope.GROUP)

    @cached_property
    def local_size(self) -> tuple[int, int, int]:
        """Work-items per group per axis (1 where the kernel has no local range there)."""
        sizes = [d for d in self._sizes(Scope.LOCAL) if isinstance(d, int)]
        if len(sizes) != 3:
            raise ValueError(f"kernel {self.name!r} has a symbolic local size")
        return (sizes[0], sizes[1], sizes[2])

    def _sizes(self, scope: Scope) -> tuple[Dim, Dim, Dim]:
        sizes: list[Dim] = [1, 1, 1]
        for op in self.ops:
            if isinstance(op, Range) and op.scope is scope:
                sizes[op.axis] = op.size
        return (sizes[0], sizes[1], sizes[2])

    def dtype_of(self, ref: Ref) -> DType:
        """The dtype of the value ``ref`` produces."""
        dtype = self.dtypes[ref]
        if dtype is None:
            raise TypeError(f"%{ref} ({type(self.ops[ref]).__name__}) produces no value")
        return dtype

    @cached_property
    def dtypes(self) -> list[DType | None]:
        """The dtype of each op's value (``value_dtypes``), found once per kernel."""
        return value_dtypes(self.ops)

    @cached_property
    def users(self) -> dict[Ref, tuple[Ref, ...]]:
        """The ops that use each value (name it in an operand), in order; a value that
        nothing uses is absent."""
        found: dict[Ref, list[Ref]] = {}
        for at, op in enumerate(self.ops):
            for name in _OPERAND_FIELDS[type(op)]:
                found.setdefault(getattr(op, name), []).append(at)
        return {ref: tuple(dict.fromkeys(uses)) for ref, uses in found.items()}

    @cached_property
    def copies(self) -> frozenset[Ref]:
        """The ``Load``s whose value nothing but ``Store``s use, as the stored value: elements
        moved unchanged, to memory of their own dtype (the verifier checks it), which a
        renderer may move as memory holds them (f16 and bf16 compute in float, and would be
        converted there and back)."""
        loads = {ref for ref, op in enumerate(self.ops) if isinstance(op, Load)}
        used = set()
        for op in self.ops:
            for name in _OPERAND_FIELDS[type(op)]:
                ref = getattr(op, name)
                if ref in loads and not (isinstance(op, Store) and name == "value"):
                    used.add(ref)
        return frozenset(loads - used)

    @cached_property
    def used_dtypes(self) -> frozenset[DType]:
        """Every dtype a value of the kernel has: what a dialect's preamble must define."""
        return frozenset(d for d in self.dtypes if d is not None)

    def __str__(self) -> str:
        lines = [f"kernel {self.name}"]
        depth = 1
        for i, op in enumerate(self.ops):
            if isinstance(op, (EndLoop, EndIf)):
                depth -= 1
            lines.append(f"{'  ' * depth}%{i} = {format_op(op)}")
            if isinstance(op, (Loop, If)):
                depth += 1
        return "\n".join(lines)


_REF_FIELDS = frozenset(
    {"src", "index", "dst", "value", "x", "a", "b", "c", "size", "cond", "src_index"}
)


_OPERAND_FIELDS: dict[type, tuple[str, ...]] = {
    kind: ()
    if kind in (Const, Range)
    else tuple(f.name for f in fields(kind) if f.name in _REF_FIELDS)
    for kind in get_args(Op)
}
"""The fields of each kind of op that name other ops' values (``Ref``s)."""


def format_op(op: Op) -> str:
    """``Binary(add, %4, %5)``: an op as it reads in listings and error messages."""
    parts = []
    for f in fields(op):
        value = getattr(op, f.name)
        if isinstance(value, Enum):
            parts.append(str(value.value))
        elif f.name in _REF_FIELDS and not isinstance(op, (Const, Range)):
            parts.append(f"%{value}")
        elif f.name != "name" or value:
            parts.append(repr(value) if isinstance(value, str) else str(value))
    return f"{type(op).__name__}({', '.join(parts)})"


def value_dtypes(ops: Sequence[Op]) -> list[DType | None]:
    """The dtype of the value each op produces, in one pass; ``None`` for an op that
    produces none, or whose operand is not an earlier value."""
    dtypes: list[DType | None] = []
    for op in ops:
        dtypes.append(own_dtype(op, dtypes))
    return dtypes


def own_dtype(op: Op, before: Sequence[DType | None]) -> DType | None:
    """The dtype of ``op``'s value, given those of the ops ``before`` it (``None``: it has
    none). A value takes its dtype from its first operand, so a chain of ops is followed
    one link at a time, never by recursion."""
    if isinstance(op, (Param, Const, Define, Cast)):
        return op.dtype
    if isinstance(op, (Range, Loop)):
        return INDEX
    if isinstance(op, Binary) and op.op.is_comparison:
        return DType.BOOL
    if isinstance(op, Load):
        source = op.src
    elif isinstance(op, (Unary, Shuffle)):
        source = op.x
    elif isinstance(op, (Binary, Fma, Where)):
        source = op.a
    else:
        return None
    return before[source] if 0 <= source < len(before) else None
