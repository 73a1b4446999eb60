"""Lowering: one scheduled kernel (a ``KernelSpec``) to a ``zyx.ir.Kernel``.

Every node is evaluated as an expression at an ``Index`` of its shape: elementwise nodes
pass the index on, views and reshapes turn it into an index of their source, and inputs
(realized nodes, or other kernels' outputs) become loads. Sizes, strides and offsets are
``Variable`` params (``Exprs.sym``), so the IR depends on the graph's structure only.

Three templates:

- map: ``unroll`` output elements per work-item, ``L`` apart, along the flat output, or
  along its rows where the elements need their per-dim indices (``Lowerer._map``);
- group reduce: one work-group per row (the kept dims), its work-items striding over the
  reduced elements, then a tree in local memory (where the device's warps exchange
  registers: shuffles within each warp, one barrier between them); for rows whose
  reduced dims are contiguous in memory;
- thread reduce: one work-item per row, a loop over the reduced elements; for rows whose
  kept dims are the contiguous ones (neighbouring work-items read neighbouring elements).

A reduce kernel runs its ``passes`` (reductions over the same rows) one after another;
later passes and the output read earlier passes' results, and an output of the full
shape is written in a last pass over the row (softmax in one kernel). Where the kernel
reads its row more than once with a work-group, and each work-item's share of it fits in
``RESIDENT`` registers, the row is *resident*: the passes are unrolled over the same
positions, so every load is one expression, emitted once and kept in a register for the
later passes (the row is read from memory once). Longer rows loop, and each pass reads
them again; so do a work-item's rows (their neighbours read the same lines, from cache).

Reads past the end of a row are clamped to a valid position and replaced by the
reduction's identity: a select per element, and a clamped index that the compiler cannot
turn into an offset from one address. So a loop runs only its full trips (every element
inside the line) unmasked, then one masked trip to the line's end; and a resident row of
a multiple of the group's work-items, which fills every slot, is read unmasked.

A reduction the scheduler splits (``KernelSpec.chunks``, ``KernelSpec.partials``) is two
reduce kernels: the first reduces each chunk of each row (a work-group or a work-item
each) into a partial, the second reduces each row's partials and writes the output.

These are the layouts of GPUs (and of OpenCL CPUs, which vectorize across work-items).
The host runs ``zyx.graph.cpu``'s, built from the same expressions.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from math import prod
from typing import Any

from zyx.dtypes import DType
from zyx.errors import ZyxError
from zyx.graph.exprs import Emitter, Expr, Exprs
from zyx.graph.nodes import Node, Op, ReduceOp, Reduction
from zyx.graph.views import Term, View
from zyx.ir.builder import KernelBuilder, Value, ceil_div
from zyx.ir.ops import INDEX, BOp, Kernel, ParamKind, Storage

MAP_LOCAL = 256
"""Work-items per group of a map or thread-reduce kernel."""

UNROLL = 4
"""Elements a reduce kernel's work-item reads per trip of its loop (a map kernel's
work-item: in all), by default: independent reads in flight, which a GPU needs to reach
its memory bandwidth from few work-items per row. Kernel search tries ``UNROLLS``."""

UNROLLS = (4, 8, 16)
"""The elements per trip (``Lowerer``'s ``unroll``) that kernel search tries: more reads in
flight per work-item where few work-items fit on a compute unit (a work-group of 1024
with 40 registers each is the only one on an H200 SM), at the cost of registers."""


RESIDENT = 16
"""Elements of its row a work-item holds in registers across a reduce kernel's passes: a
work-group of 1024 keeps a row of 16384, one of 256 a row of 4096. One size for every
row, so that one kernel serves every row length up to it (a shorter row leaves some
registers unused, their loads masked)."""


WARP = 32
"""Lanes of a warp whose values a ``Shuffle`` exchanges."""


class ScheduleError(ZyxError):
    """The scheduler handed lowering a kernel it cannot build: a bug in zyx."""


@dataclass
class KernelSpec:
    """What one kernel computes, as the scheduler decided."""

    output: Node
    """The node the kernel writes (its shape is the full shape or the rows' shape)."""
    passes: list[Node] = field(default_factory=list)
    """The reductions it computes, in order; none for a map kernel."""
    group: bool = False
    """Reduce rows with a work-group each (else a work-item each)."""
    chunks: int = 1
    """Each row is reduced in this many chunks, a work-group (or work-item) each: the
    output is a partial reduction of one pass, of the full shape with the reduced axes
    of size 1 but the first, which holds the chunks (a first stage, ``zyx.graph.schedule``
    splits reductions that have too few rows to fill a device)."""
    partials: Node | None = None
    """The one pass reduces these partial results (a first stage's output) instead of
    its source: the second stage."""

    @property
    def reduction(self) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
        """The full shape and the reduced axes of every pass, or None for a map kernel."""
        if not self.passes:
            return None
        first = self.passes[0]
        return self.source(first).shape, first.arg.axes

    def source(self, reduction: Node) -> Node:
        """What pass ``reduction`` reads: its source, or the partials of a first stage."""
        return self.partials if self.partials is not None else reduction.srcs[0]


@dataclass
class Lowered:
    """A kernel and what each of its params is bound to at a launch."""

    kernel: Kernel
    args: list[Any]
    """Per param, in order: the ``Node`` whose buffer it is, an ``int`` (a shape number),
    or a ``SCALAR`` node (its value)."""
    groups: int
    """Work-groups the launch runs (for a plan to skip empty launches)."""


class Index:
    """An index into a shape, as expressions: per-dim indices, and the row-major flat index.
    Either may be known first; the other is derived where something asks for it."""

    __slots__ = ("x", "sizes", "_dims", "_flat")

    def __init__(
        self, x: Exprs, sizes: Sequence[Expr], dims: Sequence[Expr] | None = None,
        flat: Expr | None = None,
    ) -> None:  # fmt: skip
        self.x = x
        self.sizes = tuple(sizes)
        self._dims = tuple(dims) if dims is not None else None
        self._flat = flat

    @property
    def dims(self) -> tuple[Expr, ...]:
        if self._dims is None:
            assert self._flat is not None
            x, dims, rest = self.x, [], self._flat
            # The outermost dim of more than one element takes what is left undivided (the
            # flat index is in range), so a 1-D shape's index is the flat index itself.
            ones = [s.constant == (1, int) for s in self.sizes]
            outer = ones.index(False) if False in ones else len(ones)
            for d in range(len(self.sizes) - 1, -1, -1):
                if ones[d]:
                    dims.append(x.const(0))
                    continue
                dims.append(rest if d == outer else x.mod(rest, self.sizes[d]))
                rest = x.div(rest, self.sizes[d])
            self._dims = tuple(reversed(dims))
        return self._dims

    @property
    def has_dims(self) -> bool:
        """Whether the per-dim indices are known (not yet to be derived from the flat)."""
        return self._dims is not None

    @property
    def flat(self) -> Expr:
        if self._flat is None:
            x, flat = self.x, self.x.const(0)
            for size, dim in zip(self.sizes, self.dims):
                flat = x.add(x.mul(flat, size), dim)
            self._flat = flat
        return self._flat


class Lowerer:
    """Builds the expressions of one kernel, then writes its IR."""

    def __init__(
        self, spec: KernelSpec, is_input: Any, local: int, unroll: int = UNROLL, rows: bool = False
    ) -> None:  # fmt: skip
        self.spec = spec
        self.is_input = is_input
        self.local = local
        self.unroll = unroll
        self.rows = rows
        """A map kernel's layout along the rows of its output (``_map``)."""
        info = spec.output.device.info
        self.shuffle = info.shuffle and info.warp_size == WARP
        """Whether a group's reductions combine its warps' values by ``Shuffle``s."""
        self.x = Exprs()
        self.args: list[Any] = []
        self.sym_args: list[Any] = []
        self.slots: dict[int, int] = {}
        self.memo: dict[tuple[int, int], Expr] = {}
        self.indices: dict[tuple[int, int, int], Index] = {}
        self.alive: dict[int, Index] = {}
        self.results: dict[int, Expr] = {}
        self.scalars: dict[int, Expr] = {}
        self.row_dims: tuple[Expr, ...] | None = None
        self.names: list[str] = []

    # ---- shape numbers --------------------------------------------------------------------

    def sym(self, value: int) -> Expr:
        """A shape number: a ``Variable`` holding ``value`` (a constant where it is 0 or 1,
        which decide structure: a broadcast, an unsliced dim)."""
        if value in (0, 1):
            return self.x.const(value)
        self.sym_args.append(value)
        return self.x.sym()

    def offset(self, value: int) -> Expr:
        """An offset: a ``Variable`` unless it is 0 (no offset at all, as in every
        permute and broadcast). A 1 is an offset like any other: the first element of a
        reversed dim of 2, or of a slice from 1, does not change the kernel's structure."""
        if value == 0:
            return self.x.const(0)
        self.sym_args.append(value)
        return self.x.sym()

    def sizes(self, shape: tuple[int, ...]) -> list[Expr]:
        return [self.sym(n) if n != 1 else self.x.const(1) for n in shape]

    # ---- evaluation -----------------------------------------------------------------------

    def value(self, node: Node, index: Index) -> Expr:
        key = (id(node), id(index))
        found = self.memo.get(key)
        if found is None:
            found = self._value(node, index)
            self.memo[key] = found
            # Alive as long as the memo: another index at its address would meet its entries.
            self.alive[id(index)] = index
        return found

    def _value(self, node: Node, index: Index) -> Expr:  # noqa: C901 - one case per op
        x = self.x
        if self.is_input(node):
            return x.load(self.slot(node, ParamKind.GLOBAL), index.flat, node.dtype)
        op = node.op
        if op is Op.CONST:
            return x.const(node.arg, node.dtype)
        if op is Op.SCALAR:  # one Variable per scalar, however many indices read it
            found = self.scalars.get(id(node))
            if found is None:
                self.sym_args.append(node)
                found = self.scalars[id(node)] = x.sym(node.dtype)
            return found
        if op is Op.IOTA:
            return index.dims[int(node.arg)]
        if op is Op.VIEW:
            return self._view(node, index)
        if op is Op.RESHAPE:
            src = node.srcs[0]
            if _ones_apart(src.shape, node.shape):
                inner = self._index(
                    node, index, lambda: self._same_order(index, node.shape, src.shape)
                )
            else:
                inner = self._index(
                    node, index, lambda: Index(x, self.sizes(src.shape), flat=index.flat)
                )
            return self.value(src, inner)
        if op is Op.REDUCE:
            return self._result(node, index)
        if op is Op.GATHER:
            return self._gather(node, index)
        if op is Op.SCATTER:
            return self._scatter(node, index)
        srcs = [self.value(s, index) for s in node.srcs]
        self.names.append(node.arg.value if op in (Op.UNARY, Op.BINARY) else op.value)
        if op is Op.UNARY:
            return x.unary(node.arg, srcs[0])
        if op is Op.BINARY:
            return x.binary(node.arg, srcs[0], srcs[1])
        if op is Op.WHERE:
            return x.where(srcs[0], srcs[1], srcs[2])
        if op is Op.CAST:
            return x.cast(srcs[0], node.dtype)
        raise ScheduleError(f"{node!r} reached lowering unrealized")

    def _index(self, node: Node, index: Index, make: Any, source: int = 0) -> Index:
        """The index of ``node``'s source ``source`` at ``index``, made once (so that the
        same path through the graph meets the memo)."""
        key = (id(node), id(index), source)
        found = self.indices.get(key)
        if found is None:
            found = make()
            self.indices[key] = found
        return found

    def _view(self, node: Node, index: Index) -> Expr:
        x, v, src = self.x, node.arg, node.srcs[0]
        if preserves_flat(v):  # the same sizes, with size-1 dims added or dropped
            inner = self._index(node, index, lambda: self._same_order(index, v.shape, src.shape))
            return self.value(src, inner)
        if 0 in v.source:  # padding around nothing: no element 0 to load in bounds
            return x.const(0, node.dtype)
        valid = x.all([self._check(t, b, index) for t, b in v.checks])
        clamp = valid.constant is None
        # An invalid index reads zero; its loads go to element 0 so they stay in bounds.
        dims = [self._term(t, index) for t in v.terms]
        if clamp:
            dims = [x.where(valid, d, x.const(0)) for d in dims]
        sizes = [
            index.sizes[t.dim] if _unsliced(t, v, j) else self.sym(n) if n != 1 else x.const(1)
            for j, (t, n) in enumerate(zip(v.terms, v.source))
        ]
        inner = self._index(node, index, lambda: Index(x, sizes, dims=dims))
        out = self.value(src, inner)
        if not clamp:
            return out if valid.constant[0] else x.const(0, node.dtype)
        return x.where(valid, out, x.const(0, node.dtype))

    def _same_order(self, index: Index, outer: tuple[int, ...], shape: tuple[int, ...]) -> Index:
        """The index into ``shape``, which holds the elements of ``index``'s (``outer``) in the
        same order with size-1 dims added or dropped: the same sizes and flat index, and
        the same per-dim indices where they are known (0 at the size-1 dims). A reduction
        read through such a reshape (``sum(x, axis=0)`` over a dim of 1, expanded back)
        then meets its row's own expressions, not ones rederived from the flat index."""
        x = self.x
        sizes = iter(e for e, n in zip(index.sizes, outer) if n != 1)
        inner_sizes = [next(sizes) if n != 1 else x.const(1) for n in shape]
        if not index.has_dims:
            return Index(x, inner_sizes, flat=index.flat)
        dims = iter(d for d, n in zip(index.dims, outer) if n != 1)
        inner_dims = [next(dims) if n != 1 else x.const(0) for n in shape]
        return Index(x, inner_sizes, dims=inner_dims, flat=index._flat)

    def _gather(self, node: Node, index: Index) -> Expr:
        """``x`` at the indices ``indices`` holds, each wrapped once if negative and clamped
        into range (an index out of range reads a valid element, never outside memory)."""
        x, (src, indices), g = self.x, node.srcs, node.arg
        if src.shape[g.axis] == 0:  # every index is out of range, and no element is in
            return x.const(0, node.dtype)
        dims, sizes = list(index.dims), list(index.sizes)
        count = 1 if g.along else len(indices.shape)
        part = slice(g.axis, g.axis + count)
        at = (
            index
            if g.along
            else self._index(node, index, lambda: Index(x, sizes[part], dims=dims[part]), source=1)
        )
        position = x.cast(self.value(indices, at), INDEX)
        n = self.sym(src.shape[g.axis])
        position = x.where(x.lt(position, x.const(0)), x.add(position, n), position)
        position = x.where(x.lt(position, x.const(0)), x.const(0), position)
        last = x.binary(BOp.SUB, n, x.const(1))
        position = x.where(x.lt(position, n), position, last)
        dims[part], sizes[part] = [position], [n]
        inner = self._index(node, index, lambda: Index(x, sizes, dims=dims))
        return self.value(src, inner)

    def _scatter(self, node: Node, index: Index) -> Expr:
        """``value`` inside the region the view selects, ``x`` elsewhere: each dim of
        ``x`` is inside where its index is one the region's term reaches."""
        x, (src, value), region = self.x, node.srcs, node.arg
        if region.checks:
            raise ScheduleError("x[key] = value with a padded region")
        if 0 in region.shape:  # nothing replaced, and no element of value to load in bounds
            return self.value(src, index)
        inside, coords = [], [x.const(0)] * len(region.shape)
        for j, t in zip(index.dims, region.terms):
            if t.dim is None:
                inside.append(x.binary(BOp.EQ, j, self.offset(t.offset)))
                continue
            diff = x.binary(BOp.SUB, j, self.offset(t.offset))
            scale = self.sym(t.scale) if t.scale not in (0, 1) else x.const(t.scale)
            i = x.div(diff, scale)
            size = self.sym(region.shape[t.dim])
            inside.append(x.binary(BOp.EQ, x.mod(diff, scale), x.const(0)))
            inside.append(x.binary(BOp.CMPGE, i, x.const(0)))
            inside.append(x.lt(i, size))
            coords[t.dim] = x.where(x.all(inside[-3:]), i, x.const(0))
        valid = x.all(inside)
        sizes = self.sizes(region.shape)
        at = self._index(node, index, lambda: Index(x, sizes, dims=coords), source=1)
        return x.where(valid, self.value(value, at), self.value(src, index))

    def _term(self, t: Term, index: Index) -> Expr:
        x = self.x
        if t.dim is None:
            return self.offset(t.offset)
        scaled = index.dims[t.dim] if t.scale == 1 else x.mul(index.dims[t.dim], self.sym(t.scale))
        return x.add(scaled, self.offset(t.offset)) if t.offset else scaled

    def _check(self, t: Term, bound: int, index: Index) -> Expr:
        x = self.x
        value = self._term(t, index)
        return x.binary(
            BOp.AND, x.binary(BOp.CMPGE, value, x.const(0)), x.lt(value, self.sym(bound))
        )

    def _result(self, node: Node, index: Index) -> Expr:
        found = self.results.get(id(node))
        kept, _ = self.row_split()
        dims = index.dims
        same_row = (
            self.row_dims is not None
            and all(dims[d] is self.row_dims[i] for i, d in enumerate(kept))
            and all(dims[d].constant == (0, int) for d in node.arg.axes)
        )
        if found is None or not same_row:
            raise ScheduleError(f"{node!r} is read in a kernel that does not compute its row")
        return found

    def slot(self, node: Node, kind: ParamKind) -> int:
        found = self.slots.get(id(node))
        if found is None:
            found = self.x.buffer(node.dtype, kind)
            self.slots[id(node)] = found
            self.args.append(node)
        return found

    # ---- kernels --------------------------------------------------------------------------

    def row_split(self) -> tuple[list[int], list[int]]:
        """The full shape's kept and reduced dims."""
        reduction = self.spec.reduction
        assert reduction is not None
        full, axes = reduction
        return [d for d in range(len(full)) if d not in axes], list(axes)

    def lower(self) -> Lowered:
        return self._map() if self.spec.reduction is None else self._reduce()

    def _map(self) -> Lowered:
        """``unroll`` elements per work-item, ``local`` apart (each group's reads and writes
        stay contiguous), read at clamped positions so the reads have no branch and are in
        flight together; only the stores are guarded. Along the flat output, or with
        ``rows`` along its last dim: a group per row (group axis 0) and chunk of the row
        (axis 1), so the row's other indices are the group's, where the flat layout
        derives each element's per-dim indices with a division per dim (a broadcast, a
        permute: an i64 division by a size is dozens of a GPU's instructions)."""
        x, out, local, unroll = self.x, self.spec.output, self.local, self.unroll
        chunk = local * unroll
        gid, lid = x.special("gid", 0), x.special("lid", 0)
        sizes = self.sizes(out.shape)
        if self.rows:
            part, n, row = x.special("gid", 1), sizes[-1], gid
            outer = Index(x, sizes[:-1], flat=row).dims
            rows_n = prod(out.shape[:-1])
            groups = [(gid, self.count(rows_n), 1), (part, n, chunk)]
            groups_n = rows_n * -(-out.shape[-1] // chunk)

            def place(k: Expr) -> Index:
                return Index(x, sizes, dims=[*outer, k], flat=x.add(x.mul(row, n), k))
        else:
            part = gid
            n = self.count(out.size)
            groups, groups_n = [(gid, n, chunk)], -(-out.size // chunk)

            def place(k: Expr) -> Index:
                return Index(x, sizes, flat=k)

        base = x.add(x.mul(part, x.const(chunk)), lid)
        steps = []
        for u in range(unroll):
            i = x.add(base, x.const(u * local))
            valid = x.lt(i, n)
            at = place(x.where(valid, i, x.const(0)))
            steps.append((valid, at.flat, self.value(out, at)))
        slot = self.slot(out, ParamKind.GLOBAL_MUT)
        emit, kb = self._begin("e")
        for special, count, per in groups:
            emit.bind(special, kb.group(special.arg, ceil_div(self._syms[count.arg], per)))
        emit.bind(lid, kb.local(0, local))
        values = [emit.value(value) for _, _, value in steps]
        for (valid, i, _), value in zip(steps, values):
            with kb.if_(emit.value(valid)), emit.scope():
                kb.store(self._buffers[slot], emit.value(i), value)
        return Lowered(kb.build(), self.args + self.sym_args, groups_n)

    def count(self, value: int) -> Expr:
        """A ``Variable`` for a work count, even where it is 1 (a group count is one)."""
        self.sym_args.append(value)
        return self.x.sym()

    def _reduce(self) -> Lowered:
        x, spec, local = self.x, self.spec, self.local
        full, _ = spec.reduction  # type: ignore[misc]
        kept, red = self.row_split()
        sizes = self.sizes(full)
        rows_n, size_n = prod(full[d] for d in kept), prod(full[d] for d in red)
        chunked = spec.chunks > 1
        lines_n = spec.output.size if chunked else rows_n  # what a group or an item reduces
        lines, size = self.count(lines_n), self.count(size_n)
        gid, lid = x.special("gid", 0), x.special("lid", 0)
        row = gid if spec.group else x.add(x.mul(gid, x.const(local)), lid)
        start, reach, line = x.const(0), size, row  # a line: its first and count, its row
        if chunked:  # ``row`` is an element of the output: a row's chunk
            count = self.sym(spec.chunks)
            part_sizes = [
                sizes[d] if d in kept else count if d == red[0] else x.const(1)
                for d in range(len(full))
            ]
            dims = Index(x, part_sizes, flat=row).dims
            self.row_dims = tuple(dims[d] for d in kept)
            reach = self.count(-(-size_n // spec.chunks))
            start = x.mul(dims[red[0]], reach)
            line = Index(x, [sizes[d] for d in kept], dims=self.row_dims).flat
        else:
            self.row_dims = Index(x, [sizes[d] for d in kept], flat=row).dims
        trailing = red == list(range(len(full) - len(red), len(full)))

        def full_index(r: Expr) -> Index:
            rdims = Index(x, [sizes[d] for d in red], flat=r).dims
            dims: list[Expr] = [x.const(0)] * len(full)
            for d, e in zip(kept, self.row_dims or ()):
                dims[d] = e
            for d, e in zip(red, rdims):
                dims[d] = e
            flat = x.add(x.mul(line, size), r) if trailing else None
            return Index(x, sizes, dims=dims, flat=flat)

        out = spec.output
        row_output = _row_output(spec)
        spacing = local if spec.group else 1  # between a work-item's elements of the row
        lane = lid if spec.group else x.const(0)  # its first element
        slots = RESIDENT if resident(spec, local) else None
        # A resident row of a multiple of ``local`` elements (16384 in a group of 1024)
        # fills its slots: it reads them unmasked, with no clamped index per element, so
        # its loads are offsets from one address and the registers that the clamped ones
        # held are free (a softmax on an H200: 53 -> 32, two groups of 1024 on an SM, not
        # one). Such a kernel serves that row length only (a masked one serves every other).
        filled = slots is not None and size_n > 0 and size_n % local == 0
        if filled:
            slots = size_n // local

        trip = spacing * self.unroll  # a work-item's elements of one trip, from its first
        # Trips in which all of them are inside the line (a chunk's line ends at the row's
        # end, maybe early; a chunk past the end has none).
        inside = x.binary(BOp.MIN, reach, x.binary(BOp.SUB, size, start)) if chunked else reach
        full_trips = x.div(x.binary(BOp.MAX, inside, x.const(0)), x.const(trip))

        def trip_steps(
            loop: int, source: Node, acc: DType | None, j: Expr, masked: bool, count: int
        ) -> list[_Step]:
            """``count`` elements ``spacing`` apart from element ``j`` of the work-item's
            trips; ``masked``: read at a clamped position (so that the reads have no branch
            and run in parallel), ``identity`` where the position is past the line."""
            out = []
            for u in range(count):
                offset = x.add(x.add(j, x.const(u * spacing)), lane)  # in the line
                r = x.add(start, offset)
                valid = x.const(True, DType.BOOL)
                if masked:
                    valid = x.lt(offset, reach)
                    if chunked:  # the last chunk may end early
                        valid = x.binary(BOp.AND, valid, x.lt(r, size))
                at = full_index(x.where(valid, r, x.const(0)))
                # A row of no elements has no element 0 to clamp to: nothing is loaded (its
                # zero size is a constant of the kernel, which serves no other row length).
                value = self.value(source, at) if size_n else x.const(0, source.dtype)
                if acc is not None:
                    reduction = spec.passes[loop].arg
                    empty = x.const(identity(reduction, acc), acc)
                    value = x.where(valid, x.cast(value, acc), empty)
                out.append(_Step(r, valid, value, at.flat))
            return out

        def steps(loop: int, source: Node, acc: DType | None) -> _Pass:
            """A pass over the line: for a resident row the work-item's ``slots`` elements,
            the same in every pass (unmasked where the row fills them); else ``unroll``
            elements per trip of loop ``loop`` over the full trips, unmasked (their index
            arithmetic is an offset from one address), then one masked trip for the rest
            of the line."""
            if slots is not None:
                held = trip_steps(loop, source, acc, x.const(0), not filled, slots)
                return _Pass(None, None, held, [])
            j = x.special("loop", loop, depth=1)
            bulk = trip_steps(loop, source, acc, x.mul(j, x.const(trip)), False, self.unroll)
            rest = x.mul(full_trips, x.const(trip))
            tail = trip_steps(loop, source, acc, rest, True, self.unroll)
            return _Pass(j, full_trips, bulk, tail)

        passes = []
        for p, node in enumerate(spec.passes):
            source = spec.source(node)
            acc = accumulator(node.arg.op, source.dtype)
            passes.append(steps(p, source, acc))
            kind = DType.I64 if node.arg.op in (ReduceOp.ARGMAX, ReduceOp.ARGMIN) else acc
            self.results[id(node)] = x.cast(x.result(p, kind), node.dtype)
        slot = self.slot(out, ParamKind.GLOBAL_MUT)
        final: _Pass | None = None
        epilogue: Expr | None = None
        if chunked:  # a partial result, as it accumulated
            epilogue = x.result(0, passes[0].steps[0].value.dtype)
        elif row_output:
            out_sizes = iter(sizes[d] for d in kept if full[d] != 1)
            at = Index(x, [next(out_sizes) if n != 1 else x.const(1) for n in out.shape], flat=row)
            epilogue = self.value(out, at)
        else:
            final = steps(len(spec.passes), out, None)
        emit, kb = self._begin("r")
        groups = kb.group(0, ceil_div(self._syms[lines.arg], 1 if spec.group else local))
        emit.bind(gid, groups)
        emit.bind(lid, kb.local(0, local))
        write = _Writer(self, emit, kb, lid, spec.group)
        if spec.group:
            write.passes(passes)
            write.output(self._buffers[slot], final, epilogue, row)
        else:
            with kb.if_(emit.value(x.lt(row, lines))), emit.scope():
                write.passes(passes)
                write.output(self._buffers[slot], final, epilogue, row)
        groups_n = lines_n if spec.group else -(-lines_n // local)
        return Lowered(kb.build(), self.args + self.sym_args, groups_n)

    # ---- writing IR -----------------------------------------------------------------------

    def _begin(self, prefix: str) -> tuple[Emitter, KernelBuilder]:
        """A builder with every param declared: buffers, then Variables."""
        name = "_".join([prefix, *dict.fromkeys(self.names)][:6])
        kb = KernelBuilder(name)
        self._buffers = [kb.param(dtype, kind) for dtype, kind in self.x.buffers]
        self._syms = [kb.variable(dtype) for dtype in self.x.syms]
        return Emitter(kb, self._buffers, self._syms), kb


@dataclass
class _Step:
    """One element a work-item handles in a trip of a pass's loop."""

    r: Expr
    """Its position among the row's reduced elements."""
    valid: Expr
    """Whether the position is inside the row."""
    value: Expr
    """Its value (the reduction's identity where it is not valid)."""
    at: Expr
    """The flat position of the full-shape element (for the last pass's store)."""


@dataclass
class _Pass:
    loop: Expr | None
    """The counter of the pass's loop over the row; ``None`` for a resident row."""
    trips: Expr | None
    """The loop's trips (each inside the line: its steps unmasked)."""
    steps: list[_Step]
    """The elements of one trip of the loop, or a resident row's."""
    tail: list[_Step]
    """After the loop, the elements of the trip that reaches the end of the line, masked."""


class _Writer:
    """Writes a reduce kernel's passes and output into its builder."""

    def __init__(
        self, low: Lowerer, emit: Emitter, kb: KernelBuilder, lid: Expr, group: bool
    ) -> None:
        self.low, self.emit, self.kb = low, emit, kb
        self.lid, self.group = lid, group

    @contextmanager
    def over_row(self, pass_: _Pass, values: list[Expr]) -> Iterator[None]:
        """The scope in which a pass reads its elements: a loop over the row's full trips,
        ``values``' loop-invariant parts hoisted before it; for a resident row the
        kernel's own scope, where what one pass emits the next finds."""
        if pass_.loop is None or pass_.trips is None:
            yield
            return
        self.emit.hoist(values)
        with self.kb.loop(self.emit.value(pass_.trips)) as counter, self.emit.scope():
            self.emit.bind(pass_.loop, counter)
            yield

    def passes(self, passes: list[_Pass]) -> None:
        x, kb, emit = self.low.x, self.kb, self.emit
        for p, pass_ in enumerate(passes):
            node = self.low.spec.passes[p]
            acc = _Acc(kb, node.arg.op, pass_.steps[0].value.dtype)
            with self.over_row(pass_, [s.value for s in pass_.steps]):
                self._update(acc, pass_.steps)
            self._update(acc, pass_.tail)
            if self.group:
                acc.tree(emit.value(self.lid), self.low.local, self.low.shuffle)
            emit.bind(x.result(p, acc.result_dtype), acc.result())

    def output(self, buf: Value, final: _Pass | None, epilogue: Expr | None, row: Expr) -> None:
        x, kb, emit = self.low.x, self.kb, self.emit
        if final is None:  # one element per row, written once
            assert epilogue is not None
            if not self.group:
                kb.store(buf, emit.value(row), emit.value(epilogue))
                return
            with kb.if_(emit.value(x.binary(BOp.EQ, self.lid, x.const(0)))), emit.scope():
                kb.store(buf, emit.value(row), emit.value(epilogue))
            return
        with self.over_row(final, [s.value for s in final.steps]):
            self._store(buf, final.steps)
        self._store(buf, final.tail)

    def _update(self, acc: _Acc, steps: list[_Step]) -> None:
        """Reduce ``steps``' elements into ``acc``: every value first, so that their reads
        are in flight together."""
        values = [(self.emit.value(s.value), s.r) for s in steps]
        for value, r in values:
            acc.update(value, self.emit.value(r))

    def _store(self, buf: Value, steps: list[_Step]) -> None:
        """Write ``steps``' elements, each where it is inside the line."""
        kb, emit = self.kb, self.emit
        values = [emit.value(s.value) for s in steps]
        for s, value in zip(steps, values):
            if s.valid.constant is not None:  # a full trip's
                kb.store(buf, emit.value(s.at), value)
                continue
            with kb.if_(emit.value(s.valid)), emit.scope():
                kb.store(buf, emit.value(s.at), value)


class _Acc:
    """A reduction's accumulator in registers (and, for a group, its tree in local memory)."""

    def __init__(self, kb: KernelBuilder, op: ReduceOp, dtype: DType) -> None:
        self.kb, self.op, self.dtype = kb, op, dtype
        self.arg = op in (ReduceOp.ARGMAX, ReduceOp.ARGMIN)
        self.value = kb.define(dtype)
        self.value[0] = _identity_value(op, dtype)
        if self.arg:
            self.index = kb.define(INDEX)
            self.index[0] = 1 << 62
        self.result_dtype = INDEX if self.arg else dtype

    def update(self, v: Value, r: Value) -> None:
        kb, old = self.kb, self.value[0]
        if not self.arg:
            self.value[0] = _combine(kb, self.op, old, v)
            return
        # A tie goes to the first index, as in the tree: the first element equal to the
        # identity (0 for an argmax of unsigned values, the lowest int, -inf) replaces the
        # start, whose index is past every row.
        tie = kb.binary(BOp.AND, _equal(kb, v, old), r < self.index[0])
        take = kb.binary(BOp.OR, _better(kb, self.op, v, old), tie)
        self.value[0] = kb.where(take, v, old)
        self.index[0] = kb.where(take, r, self.index[0])

    def tree(self, lid: Value, local: int, shuffle: bool) -> None:
        """The group's values combined, the result in every work-item: where ``shuffle``
        (the device's warps exchange registers) and the group is whole warps, by
        ``Shuffle``s within each warp and one barrier between the warps; else by a tree in
        local memory, a barrier per step (10 for a group of 1024)."""
        if shuffle and local % WARP == 0:
            self._warps(lid, local)
            return
        kb = self.kb
        shared = kb.define(self.dtype, local, Storage.LOCAL)
        shared[lid] = self.value[0]
        if self.arg:
            indices = kb.define(INDEX, local, Storage.LOCAL)
            indices[lid] = self.index[0]
        kb.barrier()
        step = local // 2
        while step:
            with kb.if_(lid < step):
                a, b = shared[lid], shared[lid + step]
                if not self.arg:
                    shared[lid] = _combine(kb, self.op, a, b)
                else:
                    ia, ib = indices[lid], indices[lid + step]
                    tie = kb.binary(BOp.AND, _equal(kb, a, b), ib < ia)
                    take = kb.binary(BOp.OR, _better(kb, self.op, b, a), tie)
                    shared[lid] = kb.where(take, b, a)
                    indices[lid] = kb.where(take, ib, ia)
            kb.barrier()
            step //= 2
        self.value[0] = shared[0]
        if self.arg:
            self.index[0] = indices[0]

    def _warps(self, lid: Value, local: int) -> None:
        """Each warp's values combined by shuffles; its first lane's result into local
        memory; after the barrier each run of ``count`` lanes of every warp reads all the
        warps' results and combines them again, so that each work-item has the total (no
        second barrier: nothing writes them after)."""
        kb = self.kb
        self._butterfly(WARP)
        count = local // WARP
        if count == 1:
            return
        lane, warp = kb.binary(BOp.MOD, lid, WARP), kb.binary(BOp.DIV, lid, WARP)
        shared = kb.define(self.dtype, count, Storage.LOCAL)
        indices = kb.define(INDEX, count, Storage.LOCAL) if self.arg else None
        with kb.if_(lane.eq(0)):
            shared[warp] = self.value[0]
            if indices is not None:
                indices[warp] = self.index[0]
        kb.barrier()
        at = kb.binary(BOp.MOD, lane, count)
        self.value[0] = shared[at]
        if indices is not None:
            self.index[0] = indices[at]
        self._butterfly(count)

    def _butterfly(self, width: int) -> None:
        """Each work-item's value combined with those of the other lanes of its aligned run
        of ``width`` in the warp (shuffles at masks ``width / 2`` to 1): every lane of the
        run ends with the same result, the tree's tie rule kept (the first index)."""
        kb, mask = self.kb, width // 2
        while mask:
            a = self.value[0]
            b = kb.shuffle(a, mask)
            if not self.arg:
                self.value[0] = _combine(kb, self.op, a, b)
            else:
                ia = self.index[0]
                ib = kb.shuffle(ia, mask)
                tie = kb.binary(BOp.AND, _equal(kb, a, b), ib < ia)
                take = kb.binary(BOp.OR, _better(kb, self.op, b, a), tie)
                self.value[0] = kb.where(take, b, a)
                self.index[0] = kb.where(take, ib, ia)
            mask //= 2

    def result(self) -> Value:
        return self.index[0] if self.arg else self.value[0]


def _identity_value(op: ReduceOp, dtype: DType) -> bool | int | float:
    return identity(Reduction(op, ()), dtype)


def _combine(kb: KernelBuilder, op: ReduceOp, a: Value, b: Value) -> Value:
    if op is ReduceOp.SUM:
        return kb.binary(BOp.OR, a, b) if a.dtype is DType.BOOL else a + b
    if op is ReduceOp.PROD:
        return kb.binary(BOp.AND, a, b) if a.dtype is DType.BOOL else a * b
    if not a.dtype.is_float:
        if a.dtype is DType.BOOL:
            return kb.binary(BOp.OR if op is ReduceOp.MAX else BOp.AND, a, b)
        return kb.binary(BOp.MAX if op is ReduceOp.MAX else BOp.MIN, a, b)
    return kb.where(_better(kb, op, b, a), b, a)


def _better(kb: KernelBuilder, op: ReduceOp, new: Value, old: Value) -> Value:
    """Whether ``new`` replaces ``old`` in a max or min: larger (smaller), or a NaN where
    ``old`` is none (NaN propagates, and the first NaN is the one an arg-reduction keeps)."""
    beats = new > old if op in (ReduceOp.MAX, ReduceOp.ARGMAX) else new < old
    if not new.dtype.is_float:
        return beats
    nan = kb.binary(BOp.AND, new.ne(new), old.eq(old))
    return kb.binary(BOp.OR, beats, nan)


def _equal(kb: KernelBuilder, a: Value, b: Value) -> Value:
    """``a == b``, NaN equal to NaN (ties between two NaNs go to the first index)."""
    if not a.dtype.is_float:
        return a.eq(b)
    return kb.binary(BOp.OR, a.eq(b), kb.binary(BOp.AND, a.ne(a), b.ne(b)))


def by_dims(spec: KernelSpec, is_input: Any) -> bool:
    """Whether a map kernel's output value needs its per-dim indices (a broadcast, a
    permute, a slice), not only its flat one: derived from a flat index, they cost a
    division per dim and element. A probe: its expressions are built and dropped."""
    probe = Lowerer(spec, is_input, MAP_LOCAL)
    x = probe.x
    index = Index(x, probe.sizes(spec.output.shape), flat=x.special("gid", 0))
    probe.value(spec.output, index)
    return index.has_dims


def _row_output(spec: KernelSpec) -> bool:
    """Whether a reduce kernel writes one element per row (or per chunk of a row), not
    the full shape."""
    full, axes = spec.reduction  # type: ignore[misc]
    rows = prod(n for d, n in enumerate(full) if d not in axes)
    out = spec.output
    return spec.chunks > 1 or (out.size == rows and out.shape != full)


def resident(spec: KernelSpec, local: int) -> bool:
    """Whether a reduce kernel of ``local`` work-items per group keeps its row in
    registers (the module docstring): a group reads the row more than once, and each
    work-item's share fits in ``RESIDENT``. Its passes then have no loop (nor an unroll)."""
    full, axes = spec.reduction  # type: ignore[misc]
    reads = len(spec.passes) + (not _row_output(spec))
    return spec.group and reads > 1 and prod(full[d] for d in axes) <= RESIDENT * local


def _unsliced(t: Term, v: View, j: int) -> bool:
    """Whether source dim ``j`` is output dim ``t.dim`` itself: same size, no step, no
    offset. Its size is then the output's (one Variable, not two)."""
    return t.dim is not None and t.scale == 1 and t.offset == 0 and v.source[j] == v.shape[t.dim]


def _ones_apart(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Whether shapes ``a`` and ``b`` differ only in size-1 dims."""
    return [n for n in a if n != 1] == [n for n in b if n != 1]


def preserves_flat(v: View) -> bool:
    """Whether the view keeps every element's row-major position: a reshape that only adds
    or drops size-1 dims."""
    if v.checks:
        return False
    mapped = [t.dim for t, n in zip(v.terms, v.source) if n != 1]
    wanted = [d for d, n in enumerate(v.shape) if n != 1]
    return (
        mapped == wanted
        and all(t == Term(t.dim) for t, n in zip(v.terms, v.source) if n != 1)
        and [v.source[j] for j, n in enumerate(v.source) if n != 1] == [v.shape[d] for d in wanted]
    )


def accumulator(op: ReduceOp, dtype: DType) -> DType:
    """The dtype a reduction accumulates in: float for f16/bf16, else its own."""
    return DType.F32 if dtype in (DType.F16, DType.BF16) else dtype


def identity(r: Reduction, dtype: DType) -> bool | int | float:
    op = r.op
    if op is ReduceOp.SUM:
        return False if dtype is DType.BOOL else 0
    if op is ReduceOp.PROD:
        return True if dtype is DType.BOOL else 1
    if dtype.is_float:
        return float("-inf") if op in (ReduceOp.MAX, ReduceOp.ARGMAX) else float("inf")
    low, high = dtype.int_range
    value = low if op in (ReduceOp.MAX, ReduceOp.ARGMAX) else high
    return bool(value) if dtype is DType.BOOL else value
