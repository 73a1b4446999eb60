"""A numpy interpreter of the kernel IR: the reference every backend is compared against.

All work-items run in lock-step: each op is evaluated once, as a numpy vector over the
flattened (group, work-item) index space. That schedule satisfies every ``Barrier`` by
construction, so barriers are no-ops here. ``If`` and per-item ``Loop`` trip counts become
masks; an item that is masked out neither loads (its index may be out of bounds) nor stores.

Values that are the same for every work-item (constants, variables, loop counters with a
uniform trip count, ...) stay numpy scalars and broadcast, which keeps loops cheap.

Semantics are C's, as the rendered kernels have them: integer division truncates toward
zero and ``%`` takes the dividend's sign (both give 0 for a zero divisor, where C would
trap), integers wrap, float-to-int casts truncate, ``max`` and ``min`` of floats are
``fmax`` and ``fmin``, ``nextafter`` steps in the operands' own dtype, ``Fma`` rounds once
(``zyx.ir.fma``). f16 and bf16 values are computed in float32 and rounded to their type
after every op, cast, constant and variable; memory holds them in their own type.

A ``CopyAsync`` reads its source when it is issued and poisons its destination; a
``WaitCopies`` writes the groups it completes: a read of a copy's destination before its wait
reads the poison (NaN in floats), as a race on a GPU would read something else. The
copies, commits and waits of a chunk's work-items are one queue, so a commit or wait that
some of them skip is refused.

Work-groups are independent, so they run in chunks of about ``_CHUNK_ITEMS`` work-items to
bound memory on large launches.

An ``Observer`` (``zyx.ir.access``'s memory-access analysis) is shown each ``Load``,
``Store``, ``LdMatrix`` and ``CopyAsync`` before it runs; without one nothing is recorded.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from math import prod
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from zyx.dtypes import DType
from zyx.errors import IRError
from zyx.ir.extent import out_of_bounds
from zyx.ir.fma import fma
from zyx.ir.ops import (
    MMA_FRAGMENT,
    Barrier,
    Binary,
    BOp,
    Cast,
    CommitCopies,
    Const,
    CopyAsync,
    Define,
    EndIf,
    EndLoop,
    Fma,
    If,
    Kernel,
    LdMatrix,
    Load,
    Loop,
    Mma,
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
)  # fmt: skip

Vec: TypeAlias = Any
"""A numpy scalar (uniform over work-items) or a 1-D array with one entry per work-item."""
Mask: TypeAlias = "npt.NDArray[np.bool_] | None"
"""Which work-items are active; ``None`` means all."""

Observer: TypeAlias = "Callable[[Ref, Sequence[Any], Mask, int], None]"
"""Shown each memory op before it runs: its ref, the values so far (of every op of the
kernel, by ref: its indices among them), which work-items run it and how many work-items
the chunk has (whole work-groups, in order)."""

_CHUNK_ITEMS = 1 << 20
_HALF = (DType.F16, DType.BF16)
_MEMORY = (Load, Store, LdMatrix, CopyAsync)


def interpret(
    kernel: Kernel,
    args: Sequence[Any],
    *,
    compute: npt.DTypeLike | None = None,
    observe: Observer | None = None,
) -> None:
    """Run ``kernel`` on numpy ``args`` given in param order.

    Buffer params are 1-D numpy arrays of the param's dtype; ``GlobalMut`` ones are
    written in place. ``Variable`` params are Python or numpy scalars.

    ``compute`` (a float dtype, e.g. ``np.float64``) runs every float op in that dtype
    instead: then every float buffer must be an array of ``compute`` (the caller up-casts
    inputs), and f16/bf16 values are not rounded. That gives the high-precision reference
    a backend's output is compared against.

    ``observe`` is shown each memory op before it runs (``Observer``).
    """
    types = _Types(np.dtype(compute) if compute is not None else None)
    bound = _bind_args(kernel, args, types)
    program = _Program(kernel, types)
    groups = [d.evaluate(args) if isinstance(d, SymDim) else d for d in kernel.global_size]
    n_groups = prod(groups)
    per_chunk = max(1, _CHUNK_ITEMS // prod(kernel.local_size))
    with np.errstate(all="ignore"):
        for first in range(0, n_groups, per_chunk):
            chunk = _Chunk(program, bound, groups, first, min(n_groups, first + per_chunk))
            chunk.observe = observe
            chunk.run(program.body, None)


@dataclass(frozen=True)
class _Types:
    """The numpy dtypes that hold each IR dtype: in memory, and as a computed value."""

    compute: np.dtype[Any] | None

    def __post_init__(self) -> None:
        if self.compute is not None and self.compute.kind != "f":
            raise TypeError(f"compute must be a float dtype, got {self.compute}")

    def storage(self, dtype: DType) -> np.dtype[Any]:
        return self.compute if self.compute is not None and dtype.is_float else dtype.numpy

    def value(self, dtype: DType) -> np.dtype[Any]:
        if self.compute is None and dtype in _HALF:
            return np.dtype(np.float32)
        return self.storage(dtype)

    def rounds(self, dtype: DType) -> bool:
        """Whether values of ``dtype`` round to it after each op (f16/bf16 at native precision)."""
        return self.compute is None and dtype in _HALF

    def round(self, x: Vec, dtype: DType) -> Vec:
        return _round_half(x, dtype) if self.rounds(dtype) else x

    def scalar(self, value: object, dtype: DType) -> Vec:
        """A constant or variable as a numpy scalar. f16 rounds straight from the Python
        float, bf16 through float32: as the C renderer's literals do."""
        exact = np.array(value)
        if self.rounds(dtype):
            return _round_half(exact, dtype)[()]
        return exact.astype(self.value(dtype))[()]


def _round_half(x: Vec, dtype: DType) -> Vec:
    """``x`` rounded to f16 or bf16 as the IR rounds (``DType.round_array``), held as
    float32."""
    return dtype.round_array(x).astype(np.float32)


def _bind_args(kernel: Kernel, args: Sequence[Any], types: _Types) -> list[Any]:
    """Check ``args`` against the params; scalars become numpy scalars of the value dtype."""
    if len(args) != len(kernel.params):
        raise TypeError(f"{kernel.name} takes {len(kernel.params)} arguments, got {len(args)}")
    bound: list[Any] = []
    for i, (param, arg) in enumerate(zip(kernel.params, args)):
        if param.kind is ParamKind.VARIABLE:
            bound.append(types.scalar(arg, param.dtype))
            continue
        want = types.storage(param.dtype)
        if not isinstance(arg, np.ndarray) or arg.ndim != 1 or arg.dtype != want:
            got = f"{arg.dtype} array of shape {arg.shape}" if isinstance(arg, np.ndarray) else arg
            raise TypeError(f"{kernel.name}: argument {i} must be a 1-D {want} array, got {got}")
        if param.kind is ParamKind.GLOBAL_MUT and not arg.flags.writeable:
            raise TypeError(f"{kernel.name}: argument {i} is GlobalMut but read-only")
        bound.append(arg)
    return bound


@dataclass(frozen=True)
class _Block:
    """A ``Loop`` or ``If`` at ``ref`` with the nodes of its body."""

    ref: Ref
    body: list[Node]


Node: TypeAlias = "Ref | _Block"


class _Program:
    """The kernel's ops nested into blocks, with each value's dtype resolved once."""

    def __init__(self, kernel: Kernel, types: _Types) -> None:
        self.kernel = kernel
        self.ops = kernel.ops
        self.types = types
        self.dtypes = kernel.dtypes
        self.body = self._nest()

    def _nest(self) -> list[Node]:
        stack: list[list[Node]] = [[]]
        for ref, op in enumerate(self.ops):
            if isinstance(op, (Loop, If)):
                block = _Block(ref, [])
                stack[-1].append(block)
                stack.append(block.body)
            elif isinstance(op, (EndLoop, EndIf)):
                stack.pop()
            elif not isinstance(op, (Param, Barrier)):
                stack[-1].append(ref)
        return stack[0]

    def dtype(self, ref: Ref) -> DType:
        dtype = self.dtypes[ref]
        assert dtype is not None
        return dtype

    def fail(self, ref: Ref, message: str) -> IRError:
        return IRError(f"kernel {self.kernel.name!r}, op %{ref} ({self.ops[ref]}): {message}")


class _Chunk:
    """Groups ``first``..``last - 1`` of one launch, executed in lock-step."""

    def __init__(
        self, program: _Program, args: list[Any], groups: list[int], first: int, last: int
    ) -> None:
        self.program = program
        self.types = program.types
        self.n_groups = last - first
        self.local = program.kernel.local_size
        self.group_size = prod(self.local)
        self.n = self.n_groups * self.group_size
        self.values: list[Any] = [None] * len(program.ops)
        for ref, arg in zip(program.kernel.param_refs, args):
            self.values[ref] = arg
        self.groups = groups
        self.first = first
        self.issued: list[_Pending] = []
        """The ``CopyAsync``s since the last ``CommitCopies``."""
        self.committed: deque[list[_Pending]] = deque()
        """The committed groups of copies not waited for, oldest first."""
        self.observe: Observer | None = None

    @cached_property
    def item(self) -> npt.NDArray[np.int64]:
        """Each work-item's position in this chunk (the row of its registers)."""
        return np.arange(self.n, dtype=np.int64)

    @cached_property
    def group_row(self) -> npt.NDArray[np.int64]:
        """Each work-item's group within this chunk (the row of its local memory)."""
        return np.repeat(np.arange(self.n_groups, dtype=np.int64), self.group_size)

    def range_value(self, op: Range) -> Vec:
        """Group or work-item index along ``op.axis``; axis 0 varies fastest."""
        sizes = self.groups if op.scope is Scope.GROUP else list(self.local)
        stride = prod(sizes[: op.axis])
        if op.scope is Scope.GROUP:
            if self.n_groups == 1:
                return np.int64(self.first // stride % sizes[op.axis])
            flat = self.first + self.group_row
        else:
            if sizes[op.axis] == 1:
                return np.int64(0)
            flat = np.tile(np.arange(self.group_size, dtype=np.int64), self.n_groups)
        # Skip the integer divisions where they cannot change the value: they dominate here.
        index = flat // stride if stride > 1 else flat
        return index % sizes[op.axis] if stride * sizes[op.axis] < prod(sizes) else index

    def run(self, body: list[Node], mask: Mask) -> None:
        for node in body:
            if isinstance(node, _Block):
                op = self.program.ops[node.ref]
                if isinstance(op, Loop):
                    self.run_loop(node, op, mask)
                else:
                    assert isinstance(op, If)
                    self.run_if(node, op, mask)
            else:
                self.values[node] = self.evaluate(node, mask)

    def run_loop(self, block: _Block, op: Loop, mask: Mask) -> None:
        size = self.values[op.size]
        if np.ndim(size) == 0:
            for i in range(int(size)):
                self.values[block.ref] = np.int64(i)
                self.run(block.body, mask)
            return
        # Trip counts differ between work-items: item j runs while i < size[j].
        active = size if mask is None else size[mask]
        for i in range(int(active.max(initial=0))):
            self.values[block.ref] = np.int64(i)
            running = size > i
            self.run(block.body, running if mask is None else mask & running)

    def run_if(self, block: _Block, op: If, mask: Mask) -> None:
        cond = self.values[op.cond]
        if np.ndim(cond) == 0:
            if cond:
                self.run(block.body, mask)
            return
        inner = cond if mask is None else mask & cond
        if inner.all():
            self.run(block.body, None)
        elif inner.any():
            self.run(block.body, inner)

    def evaluate(self, ref: Ref, mask: Mask) -> Any:  # noqa: C901 - one branch per op kind
        """The value of ``ops[ref]`` (storage for a ``Define``; ``None`` for a ``Store``)."""
        op = self.program.ops[ref]
        v = self.values
        if self.observe is not None and isinstance(op, _MEMORY):
            self.observe(ref, v, mask, self.n)
        if isinstance(op, Range):
            return self.range_value(op)
        if isinstance(op, Const):
            return self.types.scalar(op.wrapped, op.dtype)
        if isinstance(op, Define):
            return self.define(op)
        if isinstance(op, Load):
            return self.load(ref, op, mask)
        if isinstance(op, Store):
            self.store(ref, op, mask)
            return None
        if isinstance(op, Cast):
            return _cast(v[op.x], op.dtype, self.types)
        if isinstance(op, Unary):
            dtype = self.program.dtype(ref)
            return self.types.round(_UNARY[op.op, dtype is DType.BOOL](v[op.x]), dtype)
        if isinstance(op, Binary):
            dtype = self.program.dtype(op.a)
            result = _binary(op.op, v[op.a], v[op.b], dtype)
            return result if op.op.is_comparison else self.types.round(result, dtype)
        if isinstance(op, Fma):
            return fma(v[op.a], v[op.b], v[op.c])  # f32 or f64: nothing to round after
        if isinstance(op, Where):
            chosen = np.where(v[op.cond], v[op.a], v[op.b])
            return chosen[()] if chosen.ndim == 0 else chosen  # uniform: a numpy scalar
        if isinstance(op, Mma):
            self.mma(ref, op, mask)
            return None
        if isinstance(op, LdMatrix):
            self.ldmatrix(ref, op, mask)
            return None
        if isinstance(op, Shuffle):
            return self.shuffle(ref, op, mask)
        if isinstance(op, CopyAsync):
            self.copy_async(ref, op, mask)
        elif isinstance(op, (CommitCopies, WaitCopies)):
            if mask is not None and not mask.all():
                raise self.program.fail(ref, "some work-items of the chunk skip it")
            if isinstance(op, CommitCopies):
                self.committed.append(self.issued)
                self.issued = []
            while isinstance(op, WaitCopies) and len(self.committed) > op.pending:
                for memory, position, values in self.committed.popleft():
                    memory[position] = values
        else:
            raise TypeError(f"cannot interpret {op}")
        return None

    def copy_async(self, ref: Ref, op: CopyAsync, mask: Mask) -> None:
        """Issue each active work-item's ``CopyAsync``: its elements read, its destination
        poisoned until the ``WaitCopies`` that completes it."""
        active = np.ones(self.n, bool) if mask is None else mask
        index, src_index, cond = (
            np.broadcast_to(self.values[r], (self.n,))[active]
            for r in (op.index, op.src_index, op.cond)
        )
        if (index % op.count).any() or (src_index % op.count).any():
            raise self.program.fail(ref, f"an index of a copy is no multiple of {op.count}")
        memory, src = self.values[op.dst], self.values[op.src]
        steps = np.arange(op.count)
        at, src_at = index[:, None] + steps, np.where(cond, src_index, 0)[:, None] + steps
        for m, i, name in ((memory, at, op.dst), (src, src_at[cond], op.src)):
            if i.size and (i.min() < 0 or i.max() >= m.shape[-1]):
                bad = int(i[(i < 0) | (i >= m.shape[-1])][0])
                raise IRError(out_of_bounds(self.program.kernel, ref, bad, m.shape[-1], name))
        values = np.where(cond[:, None], src[src_at], 0).astype(memory.dtype)
        position = (self.group_row[active][:, None], at)
        define = self.program.ops[op.dst]
        assert isinstance(define, Define)
        memory[position] = _poison(memory.dtype, define.dtype)
        self.issued.append((memory, position, values))

    def ldmatrix(self, ref: Ref, op: LdMatrix, mask: Mask) -> None:
        """Each warp's ``count`` matrices (``LdMatrix``), their rows from where its first
        ``8 * count`` lanes' indices say, spread over its lanes' registers."""
        if mask is not None and not mask.all():
            raise self.program.fail(ref, "an LdMatrix where some work-items of a warp do not run")
        warps, rows = self.n // 32, 8 * op.count
        memory = self.values[op.src]
        starts = np.broadcast_to(self.values[op.index], (self.n,)).reshape(warps, 32)[:, :rows]
        if (starts % 8).any():
            raise self.program.fail(ref, "a row of an LdMatrix starts at no multiple of 8")
        length = memory.shape[-1]
        if starts.min() < 0 or starts.max() + 8 > length:
            bad = starts[(starts < 0) | (starts + 8 > length)][0]
            raise self.program.fail(ref, f"a row at {bad} is out of bounds for {length} elements")
        group = self.group_row.reshape(warps, 32)[:, :1, None]
        elements = memory[group, starts[:, :, None] + np.arange(8)]  # [warp, row, column]
        matrices = elements.reshape(warps, op.count, 8, 8)
        if op.trans:
            matrices = matrices.swapaxes(2, 3)
        lane = np.arange(32)
        pairs = matrices[:, :, lane[:, None] // 4, lane[:, None] % 4 * 2 + np.arange(2)]
        dst = self.values[op.dst]
        held = pairs.transpose(0, 2, 1, 3).reshape(self.n, 2 * op.count)
        dst[:, op.dst_at : op.dst_at + 2 * op.count] = held

    def shuffle(self, ref: Ref, op: Shuffle, mask: Mask) -> Vec:
        """Each work-item's ``x`` from lane ``lane ^ mask`` of its warp (``Shuffle``): the
        chunk's work-items in order, whole warps of 32 (the verifier's), so the partner of
        flat item ``i`` is item ``i ^ mask``."""
        if mask is not None and not mask.all():
            raise self.program.fail(ref, "a Shuffle where some work-items of a warp do not run")
        x = self.values[op.x]
        if np.ndim(x) == 0:  # uniform: every lane holds the same
            return x
        return x[np.arange(self.n) ^ op.mask]

    def mma(self, ref: Ref, op: Mma, mask: Mask) -> None:
        """Each warp's ``C += A @ B`` (``Mma``), its matrices gathered from and scattered to
        its lanes' registers; in the value dtype (f32, or ``compute``)."""
        if mask is not None and not mask.all():
            raise self.program.fail(ref, "an Mma where some work-items of a warp do not run")
        warps = self.n // 32
        c = self.values[op.c]
        matrices = []
        operands = (("a", op.a, op.a_at), ("b", op.b, op.b_at), ("c", op.c, op.c_at))
        for name, fragment, at in operands:
            shape, rows, cols = _MMA_LAYOUT[name]
            held = self.values[fragment][:, at : at + MMA_FRAGMENT[name]]
            matrix = np.empty((warps, *shape), c.dtype)
            matrix[:, rows, cols] = held.reshape(warps, rows.size)
            matrices.append(matrix)
        product = matrices[2] + np.matmul(matrices[0], matrices[1])
        _, rows, cols = _MMA_LAYOUT["c"]
        c[:, op.c_at : op.c_at + 4] = product[:, rows, cols].reshape(self.n, 4)

    def define(self, op: Define) -> npt.NDArray[Any]:
        """Registers are ``[items, length]`` of the value dtype, local memory ``[groups, length]``
        of the storage dtype; both start poisoned so a read before a write shows."""
        if op.storage is Storage.REGISTER:
            shape, dtype = (self.n, op.length), self.types.value(op.dtype)
        else:
            shape, dtype = (self.n_groups, op.length), self.types.storage(op.dtype)
        storage = np.empty(shape, dtype)
        if dtype.kind == "f" or op.dtype in _HALF:
            storage.fill(np.nan)
        else:
            storage.view(np.uint8).fill(0xAB)
        return storage

    def load(self, ref: Ref, op: Load, mask: Mask) -> Vec:
        memory, index = self.values[op.src], self.values[op.index]
        if mask is not None and np.ndim(index) != 0:
            index = np.where(mask, index, 0)  # masked-out items may hold any index
        self.check_bounds(ref, memory, index, mask)
        dtype = self.types.value(self.program.dtype(ref))
        if memory.ndim == 1:
            return memory[index].astype(dtype)
        rows = self.rows(op.src)
        if rows is self.item and np.ndim(index) == 0:
            return memory[:, index].astype(dtype)  # astype copies: later stores must not show
        return memory[rows, index].astype(dtype)

    def store(self, ref: Ref, op: Store, mask: Mask) -> None:
        memory, index, value = (self.values[r] for r in (op.dst, op.index, op.value))
        self.check_bounds(ref, memory, index, mask)
        if memory.ndim == 1:
            position: tuple[Any, ...] = (index,)
        else:
            rows = self.rows(op.dst)
            if rows is self.item and np.ndim(index) == 0:
                np.copyto(memory[:, index], value, casting="unsafe", where=_where(mask))
                return
            position = (rows, index)
        position = tuple(np.broadcast_to(p, (self.n,)) for p in position)
        value = np.broadcast_to(value, (self.n,))
        if mask is not None:
            position = tuple(p[mask] for p in position)
            value = value[mask]
        # With several items writing one element the last one wins: a race in any backend.
        memory[position] = value

    def rows(self, ref: Ref) -> npt.NDArray[np.int64]:
        """The row of each work-item in a ``Define``'s storage: its own, or its group's."""
        op = self.program.ops[ref]
        assert isinstance(op, Define)
        return self.item if op.storage is Storage.REGISTER else self.group_row

    def check_bounds(self, ref: Ref, memory: npt.NDArray[Any], index: Vec, mask: Mask) -> None:
        """Raise IRError if an active work-item indexes outside the buffer or Define."""
        length = memory.shape[-1]
        if np.ndim(index) == 0:
            bad = not 0 <= index < length
            if bad and mask is not None and not mask.any():
                return
            first = index
        else:
            active = index if mask is None else index[mask]
            bad = active.size > 0 and bool(active.min() < 0 or active.max() >= length)
            if bad:
                first = active[(active < 0) | (active >= length)][0]
        if bad:
            kernel = self.program.kernel
            raise IRError(out_of_bounds(kernel, ref, int(first), length))


def _lanes(
    count: int, place: Callable[[Any, Any, Any], tuple[Any, Any]]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The (row, column) of element ``i`` of lane ``l``'s fragment, at ``l * count + i``, by
    ``place(g, t, i)`` with ``g = l / 4`` and ``t = l % 4`` (``Mma``'s layouts)."""
    lane, i = np.divmod(np.arange(32 * count, dtype=np.int64), count)
    return place(lane // 4, lane % 4, i)


_MMA_LAYOUT = {
    "a": ((16, 16), *_lanes(8, lambda g, t, i: (g + i // 2 % 2 * 8, 2 * t + i % 2 + i // 4 * 8))),
    "b": ((16, 8), *_lanes(4, lambda g, t, i: (2 * t + i % 2 + 8 * (i // 2), g))),
    "c": ((16, 8), *_lanes(4, lambda g, t, i: (g + 8 * (i // 2), 2 * t + i % 2))),
}
"""Each ``Mma`` operand's shape, and where each lane's elements lie in it."""


_Pending: TypeAlias = "tuple[npt.NDArray[Any], tuple[Any, Any], npt.NDArray[Any]]"
"""An issued ``CopyAsync``: its destination's storage, the elements' positions in it, and
their values."""


def _poison(held: np.dtype[Any], dtype: DType) -> Any:
    """What ``define`` fills new storage of ``dtype`` (held as ``held``) with: NaN in
    floats, else bytes of 0xAB."""
    if held.kind == "f" or dtype in _HALF:
        return np.nan
    return np.frombuffer(b"\xab" * held.itemsize, held)[0]


def _where(mask: Mask) -> Any:
    return True if mask is None else mask


def _cast(x: Vec, dst: DType, types: _Types) -> Vec:
    """C's conversion: to bool is ``!= 0``, float to int truncates toward zero."""
    if dst is DType.BOOL:
        return np.not_equal(x, 0)
    if types.rounds(dst):
        return types.round(x, dst)
    return x.astype(types.value(dst))


def _binary(op: BOp, a: Vec, b: Vec, dtype: DType) -> Vec:
    if dtype is DType.BOOL and op in _PROMOTE_BOOL:
        # C promotes bools to int for arithmetic; storing back to bool tests for nonzero.
        return np.not_equal(_binary(op, np.uint8(a), np.uint8(b), DType.U8), 0)
    if op is BOp.DIV and not dtype.is_float:
        return _trunc_div(a, b, dtype)
    if op is BOp.NEXTAFTER:
        return _nextafter(a, b, dtype)
    return _BINARY[op](a, b)


def _nextafter(a: Vec, b: Vec, dtype: DType) -> Vec:
    """The value of ``dtype`` next to ``a`` toward ``b``, held as ``a`` is: stepped in
    ``dtype`` itself, whatever the values compute in (float32 for f16 and bf16, float64 for
    the reference, where ``a`` is first rounded to ``dtype`` as a device holds it)."""
    held = np.result_type(a, b)
    x, y = dtype.round_array(np.asarray(a)), dtype.round_array(np.asarray(b))
    # a == b gives b, as C has it (numpy's float16 nextafter gives a: the sign of zero differs).
    result = np.where(x == y, y, np.nextafter(x, y)).astype(held)
    return result[()] if result.ndim == 0 else result


def _trunc_div(a: Vec, b: Vec, dtype: DType) -> Vec:
    """C's integer division: truncates toward zero (numpy's ``//`` floors); x / 0 is 0."""
    if not dtype.is_signed:
        return np.floor_divide(a, b)
    # a - fmod(a, b) is an exact multiple of b, so flooring it divides exactly.
    return np.floor_divide(a - np.fmod(a, b), b)


_PROMOTE_BOOL = frozenset(
    {BOp.ADD, BOp.SUB, BOp.MUL, BOp.DIV, BOp.MOD, BOp.MAX, BOp.MIN, BOp.SHL, BOp.SHR}
)

_BINARY: dict[BOp, Callable[[Vec, Vec], Vec]] = {
    BOp.ADD: np.add, BOp.SUB: np.subtract, BOp.MUL: np.multiply, BOp.DIV: np.true_divide,
    BOp.POW: np.power, BOp.MOD: np.fmod, BOp.CMPLT: np.less, BOp.CMPGT: np.greater,
    BOp.CMPGE: np.greater_equal, BOp.MAX: np.fmax, BOp.OR: np.logical_or,
    BOp.AND: np.logical_and, BOp.BITXOR: np.bitwise_xor, BOp.BITOR: np.bitwise_or,
    BOp.BITAND: np.bitwise_and, BOp.SHL: np.left_shift, BOp.SHR: np.right_shift,
    BOp.NOTEQ: np.not_equal, BOp.EQ: np.equal, BOp.MIN: np.fmin, BOp.ATAN2: np.arctan2,
    BOp.HYPOT: np.hypot, BOp.COPYSIGN: np.copysign,
}  # fmt: skip

# Keyed by (op, operand is bool): bitnot of a bool is logical not.
_UNARY: dict[tuple[UOp, bool], Callable[[Vec], Vec]] = {
    (UOp.NEG, False): np.negative, (UOp.BITNOT, False): np.invert,
    (UOp.BITNOT, True): np.logical_not, (UOp.EXP, False): np.exp, (UOp.EXP2, False): np.exp2,
    (UOp.LN, False): np.log, (UOp.LOG2, False): np.log2, (UOp.RECIPROCAL, False): np.reciprocal,
    (UOp.SQRT, False): np.sqrt, (UOp.SIN, False): np.sin, (UOp.COS, False): np.cos,
    (UOp.FLOOR, False): np.floor, (UOp.TRUNC, False): np.trunc, (UOp.ABS, False): np.abs,
    (UOp.TAN, False): np.tan, (UOp.TANH, False): np.tanh, (UOp.ASIN, False): np.arcsin,
    (UOp.ACOS, False): np.arccos, (UOp.ATAN, False): np.arctan, (UOp.SINH, False): np.sinh,
    (UOp.COSH, False): np.cosh, (UOp.ASINH, False): np.arcsinh, (UOp.ACOSH, False): np.arccosh,
    (UOp.ATANH, False): np.arctanh, (UOp.EXPM1, False): np.expm1, (UOp.LOG1P, False): np.log1p,
    (UOp.LOG10, False): np.log10, (UOp.CEIL, False): np.ceil, (UOp.RINT, False): np.rint,
}  # fmt: skip
