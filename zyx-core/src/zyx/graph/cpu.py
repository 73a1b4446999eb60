"""Lowering for CPUs: ``zyx.graph.lower``'s kernels laid out for cores, not for warps.

A CPU runs a work-group as a loop over its work-items on one thread (``zyx.host.codegen``)
and spreads groups over its cores. The GPU templates give it work-items that each read
elements a group's width apart (a column each, or a strided share of a row) and trees
between barriers: code the C compiler cannot vectorize. Here a group is one work-item,
and its work is loops over consecutive addresses without a branch inside, which the
compiler vectorizes:

- map: a group computes ``MAP_CHUNK`` consecutive elements (the last group fewer), of
  the flat output, or of a row of it where the elements need their per-dim indices (a
  broadcast, a permute: the row's are the group's, the last dim's its loop counter);
- row reduce (the rows' reduced elements are the contiguous ones, ``KernelSpec.group``):
  a group per row (or chunk of a row). Each pass keeps ``LANES`` accumulators; each trip
  of its loop adds the next ``LANES`` elements, one to each (a float sum is not
  reassociated without fast math: one accumulator would be a chain of dependent adds),
  a tail loop the last ``size % LANES``, then the lanes combine in a tree;
- column reduce (the kept elements are the contiguous ones): a group per strip of
  ``STRIP`` rows along the last kept dim (consecutive output elements; the other kept
  dims are the group's), an accumulator each. The group walks the reduced elements in
  order; each trip adds one element to every row of the strip, the inner loop over
  consecutive addresses (``sum(x, axis=0)``: a strip of columns, row by row; the generic
  matmul ``sum(a[:, :, None] * b[None], axis=1)``: a strip of b's row per step of k).

Passes, partials and outputs are as in ``zyx.graph.lower``: later passes and the output
read earlier passes' results, an output of the full shape is written in a last loop,
and a split reduction (``KernelSpec.chunks``) is two kernels, each row's chunks a group
each, then each row's partials.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from math import prod
from typing import TYPE_CHECKING

from zyx.dtypes import DType
from zyx.graph.exprs import Emitter, Expr
from zyx.graph.lower import (
    Index,
    Lowered,
    Lowerer,
    _better,
    _combine,
    _equal,
    _identity_value,
    accumulator,
    by_dims,
)
from zyx.graph.nodes import Op, ReduceOp
from zyx.ir.builder import KernelBuilder, Value, ceil_div
from zyx.ir.ops import INDEX, BOp, ParamKind

if TYPE_CHECKING:
    from zyx.backend import Device

MAP_CHUNK = 4096
"""Elements a map kernel's group computes: enough to amortize a group's start, few enough
that a core gets many groups (the last cores' share evens out)."""

LANES = 32
"""Accumulators of a row reduce's pass: two AVX-512 or four AVX2 vectors of f32, added in
parallel (an add's latency is 4 cycles: fewer would wait on it)."""

ROW_KEPT = 4096
"""Elements of a row up to which a row reduce keeps its last pass's source for an output
of the full shape (16 KiB of f32 on the thread's stack, in L1): a softmax's exp, computed
once, not again for the output."""

STRIP = 256
"""Rows of a column reduce's group: 1 KiB of f32 per reduced element, read at once (a
hardware prefetcher follows few such streams), accumulators that stay in L1."""


def cpu_layout(device: Device) -> bool:
    """Whether ``device`` runs kernels with this module's layouts: the host (compiled C;
    its interpreter runs them too). An OpenCL CPU (PoCL) vectorizes across work-items
    itself and keeps the GPU layouts."""
    return device.backend == "host"


class CpuLowerer(Lowerer):
    """A ``Lowerer`` whose map and reduce kernels have the CPU layouts above."""

    def _map(self) -> Lowered:
        shape = self.spec.output.shape
        if len(shape) > 1 and prod(shape[:-1]) > 1 and by_dims(self.spec, self.is_input):
            return self._map_rows()
        return self._map_flat()

    def _map_flat(self) -> Lowered:
        """``MAP_CHUNK`` consecutive elements per group."""
        x, out = self.x, self.spec.output
        n = self.count(out.size)
        j = x.special("loop", 0, depth=1)
        start = x.mul(x.special("gid", 0), x.const(MAP_CHUNK))
        i = x.add(start, j)
        value = self.value(out, Index(x, self.sizes(out.shape), flat=i))
        trips = x.binary(BOp.MIN, x.const(MAP_CHUNK), x.binary(BOp.SUB, n, start))
        return self._write((n, MAP_CHUNK), j, trips, i, value, -(-out.size // MAP_CHUNK))

    def _map_rows(self) -> Lowered:
        """``MAP_CHUNK`` consecutive elements of a row (along the last dim) per group, the
        row's other dims computed once per group."""
        x, out = self.x, self.spec.output
        sizes = self.sizes(out.shape)
        per_row_n = -(-out.shape[-1] // MAP_CHUNK)
        groups_n = prod(out.shape[:-1]) * per_row_n
        groups = self.count(groups_n)
        per_row, gid = self.count(per_row_n), x.special("gid", 0)  # a Variable even if 1
        row, chunk = x.div(gid, per_row), x.mod(gid, per_row)
        j = x.special("loop", 0, depth=1)
        start = x.mul(chunk, x.const(MAP_CHUNK))
        k = x.add(start, j)
        dims = [*Index(x, sizes[:-1], flat=row).dims, k]
        i = x.add(x.mul(row, sizes[-1]), k)
        value = self.value(out, Index(x, sizes, dims=dims, flat=i))
        trips = x.binary(BOp.MIN, x.const(MAP_CHUNK), x.binary(BOp.SUB, sizes[-1], start))
        return self._write((groups, 1), j, trips, i, value, groups_n)

    def _write(
        self, groups: tuple[Expr, int], j: Expr, trips: Expr, i: Expr, value: Expr, groups_n: int
    ) -> Lowered:
        """The map kernel: ``groups[0] / groups[1]`` groups (rounded up), each a loop of
        ``trips`` over ``j`` storing ``value`` at ``i``."""
        slot = self.slot(self.spec.output, ParamKind.GLOBAL_MUT)
        emit, kb = self._begin("e")
        count, div = groups
        emit.bind(self.x.special("gid", 0), kb.group(0, ceil_div(self._syms[count.arg], div)))
        kb.local(0, 1)
        with _loop(kb, emit, j, trips, [value, i]):
            kb.store(self._buffers[slot], emit.value(i), emit.value(value))
        return Lowered(kb.build(), self.args + self.sym_args, groups_n)

    def _reduce(self) -> Lowered:
        return _Rows(self).lower() if self.spec.group else _Columns(self).lower()


@contextmanager
def _loop(
    kb: KernelBuilder, emit: Emitter, counter: Expr, trips: Expr, body: list[Expr]
) -> Iterator[Value]:
    """A loop of ``trips`` over ``counter``, ``body``'s parts invariant in it emitted
    before it opens."""
    emit.hoist([*body, trips], counter.depth)
    with kb.loop(emit.value(trips)) as value, emit.scope():
        emit.bind(counter, value)
        yield value


class _Lanes:
    """``length`` accumulators of one pass (an array in registers), and for an
    arg-reduction the index of each one's value."""

    def __init__(self, kb: KernelBuilder, op: ReduceOp, dtype: DType, length: int) -> None:
        self.kb, self.op, self.dtype = kb, op, dtype
        self.arg = op in (ReduceOp.ARGMAX, ReduceOp.ARGMIN)
        self.values = kb.define(dtype, length)
        self.indices = kb.define(INDEX, length) if self.arg else None

    def start(self, lane: Value | int) -> None:
        self.values[lane] = _identity_value(self.op, self.dtype)
        if self.indices is not None:
            self.indices[lane] = 1 << 62  # past every row: the first equal value replaces it

    def update(self, lane: Value | int, v: Value, r: Value) -> None:
        value, index = self.values[lane], self.indices[lane] if self.indices is not None else r
        value, index = _merge(self.kb, self.op, (value, index), (v, r))
        self.values[lane] = value
        if self.indices is not None:
            self.indices[lane] = index

    def fold(self, length: int) -> None:
        """Lane 0 combines all ``length`` lanes (a power of two), in a tree: ties go to the
        first index."""
        step = length // 2
        while step:
            for lane in range(step):
                self.update(lane, self.values[lane + step], self._index(lane + step))
            step //= 2

    def _index(self, lane: int) -> Value:
        return self.indices[lane] if self.indices is not None else self.kb.const(0, INDEX)

    def result(self, lane: Value | int) -> Value:
        return self.indices[lane] if self.indices is not None else self.values[lane]


def _merge(
    kb: KernelBuilder, op: ReduceOp, old: tuple[Value, Value], new: tuple[Value, Value]
) -> tuple[Value, Value]:
    """``old`` combined with ``new`` (value, index); an arg-reduction's tie goes to the
    lower index, as in ``zyx.graph.lower``'s accumulators and trees."""
    (a, ia), (b, ib) = old, new
    if op not in (ReduceOp.ARGMAX, ReduceOp.ARGMIN):
        return _combine(kb, op, a, b), ia
    tie = kb.binary(BOp.AND, _equal(kb, b, a), ib < ia)
    take = kb.binary(BOp.OR, _better(kb, op, b, a), tie)
    return kb.where(take, b, a), kb.where(take, ib, ia)


class _Template:
    """What both reduce layouts share: the reduction's shape numbers, each pass's value at
    a position, and the results' and outputs' bookkeeping."""

    def __init__(self, low: Lowerer) -> None:
        self.low = low
        self.x = x = low.x
        self.spec = spec = low.spec
        self.full, _ = spec.reduction  # type: ignore[misc]
        self.kept, self.red = low.row_split()
        self.sizes = low.sizes(self.full)
        self.rows_n = prod(self.full[d] for d in self.kept)
        self.size_n = prod(self.full[d] for d in self.red)
        self.chunked = spec.chunks > 1
        out = spec.output
        self.row_output = self.chunked or (out.size == self.rows_n and out.shape != self.full)
        self.size = low.count(self.size_n)
        self.gid = x.special("gid", 0)
        self.trailing = self.red == list(range(len(self.full) - len(self.red), len(self.full)))
        self.raw: list[Expr] = []

    def part_dims(self, chunk: Expr) -> list[Expr]:
        """The dims of a first stage's output element: the row's, ``chunk`` at the first
        reduced dim (``KernelSpec.chunks``)."""
        dims = [self.x.const(0)] * len(self.full)
        for d, e in zip(self.kept, self.low.row_dims or ()):
            dims[d] = e
        dims[self.red[0]] = chunk
        return dims

    def part_sizes(self, count: Expr) -> list[Expr]:
        x, red = self.x, self.red
        return [
            self.sizes[d] if d in self.kept else count if d == red[0] else x.const(1)
            for d in range(len(self.full))
        ]

    def at(self, line: Expr, r: Expr) -> Index:
        """The full-shape index of reduced element ``r`` of row ``line`` (flat, among the
        rows), whose dims are ``low.row_dims``."""
        x = self.x
        rdims = Index(x, [self.sizes[d] for d in self.red], flat=r).dims
        dims: list[Expr] = [x.const(0)] * len(self.full)
        for d, e in zip(self.kept, self.low.row_dims or ()):
            dims[d] = e
        for d, e in zip(self.red, rdims):
            dims[d] = e
        flat = x.add(x.mul(line, self.size), r) if self.trailing else None
        return Index(x, self.sizes, dims=dims, flat=flat)

    def element(self, p: int, at: Index) -> Expr:
        """Pass ``p``'s value at ``at``, in its accumulator's dtype."""
        node = self.spec.passes[p]
        source = self.spec.source(node)
        return self.x.cast(self.low.value(source, at), accumulator(node.arg.op, source.dtype))

    def results(self, depth: int) -> None:
        """Each pass's result (``raw``, as its accumulator holds it) and the node's value of
        it, as the kernel's later passes and output read it; of ``depth``: one value per
        group (0), or per trip of the loop over a strip's rows (2)."""
        x = self.x
        for p, node in enumerate(self.spec.passes):
            acc = accumulator(node.arg.op, self.spec.source(node).dtype)
            kind = DType.I64 if node.arg.op in (ReduceOp.ARGMAX, ReduceOp.ARGMIN) else acc
            self.raw.append(x.result(p, kind, depth))
            self.low.results[id(node)] = x.cast(self.raw[-1], node.dtype)

    def lanes(self, kb: KernelBuilder, p: int, length: int) -> _Lanes:
        node = self.spec.passes[p]
        return _Lanes(kb, node.arg.op, accumulator(node.arg.op, self.spec.source(node).dtype),
                      length)  # fmt: skip

    def epilogue(self, row: Expr, dims: tuple[Expr, ...] | None = None) -> Expr:
        """The output element of row ``row`` (one element per row), whose kept dims are
        ``dims`` where known: a partial as it accumulated, or what the output computes
        from the results."""
        x, out = self.x, self.spec.output
        if self.chunked:
            return self.raw[0]
        out_sizes = iter(self.sizes[d] for d in self.kept if self.full[d] != 1)
        sizes = [next(out_sizes) if n != 1 else x.const(1) for n in out.shape]
        if dims is None:
            return self.low.value(out, Index(x, sizes, flat=row))
        known = iter(e for e, d in zip(dims, self.kept) if self.full[d] != 1)
        out_dims = [next(known) if n != 1 else x.const(0) for n in out.shape]
        return self.low.value(out, Index(x, sizes, dims=out_dims, flat=row))


@dataclass
class _Trips:
    """One loop of a row pass: its counter, trips, and the element it reads per trip (at
    reduced position ``r``, of ``value``), with the lane it adds to."""

    counter: Expr
    trips: Expr
    r: Expr
    value: Expr
    lane: Expr | None
    """A loop over the lanes inside (its counter), or ``None``: the counter is the lane."""
    offset: Expr | None = None
    """The element's offset in the row's chunk."""
    source: Expr | None = None
    """The pass's source there (``value`` before its cast to the accumulator's dtype)."""


class _Rows(_Template):
    """The row layout: a group per row (or chunk of one), ``LANES`` accumulators a pass."""

    def lower(self) -> Lowered:
        x, low, spec = self.x, self.low, self.spec
        lines_n = spec.output.size if self.chunked else self.rows_n
        lines = low.count(lines_n)
        row, start, length, line = self.gid, x.const(0), self.size, self.gid
        if self.chunked:  # ``row`` is an element of the output: a row's chunk
            count = low.sym(spec.chunks)
            dims = Index(x, self.part_sizes(count), flat=row).dims
            low.row_dims = tuple(dims[d] for d in self.kept)
            reach = low.count(-(-self.size_n // spec.chunks))
            start = x.mul(dims[self.red[0]], reach)
            line = Index(x, [self.sizes[d] for d in self.kept], dims=low.row_dims).flat
            # The last chunk of a row may be shorter.
            length = x.binary(BOp.MIN, reach, x.binary(BOp.SUB, self.size, start))
        else:
            low.row_dims = Index(x, [self.sizes[d] for d in self.kept], flat=row).dims
        self.results(0)
        passes = [self.trips(p, start, length, line) for p in range(len(spec.passes))]
        slot = low.slot(spec.output, ParamKind.GLOBAL_MUT)
        store: tuple[Expr, Expr] | None = None  # the output element of the row
        final: _Trips | None = None  # or of each of its elements
        kept: Expr | None = None  # the output's read of the last pass's source, if kept
        if self.row_output:
            store = (row, self.epilogue(row))
        else:
            o = x.special("loop", 3 * len(spec.passes), depth=1)
            index = self.at(line, x.add(start, o))
            final = _Trips(o, length, index.flat, low.value(spec.output, index), None, o)
            kept = self.kept_source(index)
        emit, kb = low._begin("r")
        emit.bind(self.gid, kb.group(0, ceil_div(low._syms[lines.arg], 1)))
        kb.local(0, 1)
        row_buf = kb.define(kept.dtype, ROW_KEPT) if kept is not None else None
        for p, loops in enumerate(passes):
            lanes = self.lanes(kb, p, LANES)
            for first in range(LANES):
                lanes.start(first)
            for loop in loops:
                with self.over(kb, emit, loop) as lane:
                    lanes.update(lane, emit.value(loop.value), emit.value(loop.r))
                    if row_buf is not None and p == len(passes) - 1:
                        assert loop.offset is not None and loop.source is not None
                        row_buf[emit.value(loop.offset)] = emit.value(loop.source)
            lanes.fold(LANES)
            emit.bind(self.raw[p], lanes.result(0))
        buf = low._buffers[slot]
        if store is not None:
            kb.store(buf, emit.value(store[0]), emit.value(store[1]))
        else:
            assert final is not None and final.offset is not None
            with self.over(kb, emit, final):
                if kept is not None and row_buf is not None:
                    emit.bind(kept, row_buf[emit.value(final.offset)])
                kb.store(buf, emit.value(final.r), emit.value(final.value))
        return Lowered(kb.build(), low.args + low.sym_args, lines_n)

    def kept_source(self, index: Index) -> Expr | None:
        """The last pass's source as the output reads it at ``index``, where the pass keeps
        it for the output (a row of up to ``ROW_KEPT`` in a register array): a value the
        kernel computes (a softmax's exp), not one it loads; ``None`` elsewhere."""
        low, spec = self.low, self.spec
        source = spec.source(spec.passes[-1])
        computed = not low.is_input(source) and source.op not in (Op.VIEW, Op.RESHAPE)
        if not computed or self.size_n > ROW_KEPT:
            return None
        return low.memo.get((id(source), id(index)))

    def trips(self, p: int, start: Expr, length: Expr, line: Expr) -> list[_Trips]:
        """Pass ``p``'s loops over the row's ``length`` elements from ``start``: whole trips
        of ``LANES``, then the rest, one per lane."""
        x = self.x
        j = x.special("loop", 3 * p, depth=1)
        u = x.special("loop", 3 * p + 1, depth=2)
        t = x.special("loop", 3 * p + 2, depth=1)
        whole = x.div(length, x.const(LANES))
        done = x.mul(whole, x.const(LANES))
        out = []
        for counter, trips, offset, lane in (
            (j, whole, x.add(x.mul(j, x.const(LANES)), u), u),
            (t, x.binary(BOp.SUB, length, done), x.add(done, t), None),
        ):
            r = x.add(start, offset)
            node = self.spec.passes[p]
            source = self.low.value(self.spec.source(node), self.at(line, r))
            value = x.cast(source, accumulator(node.arg.op, source.dtype))
            out.append(_Trips(counter, trips, r, value, lane, offset, source))
        return out

    @contextmanager
    def over(self, kb: KernelBuilder, emit: Emitter, loop: _Trips) -> Iterator[Value]:
        """The loops of ``loop``; yields the lane."""
        body = [loop.value, loop.r]
        with _loop(kb, emit, loop.counter, loop.trips, body) as counter:
            if loop.lane is None:
                yield counter
                return
            with _loop(kb, emit, loop.lane, self.x.const(LANES), body) as lane:
                yield lane


class _Columns(_Template):
    """The column layout: a group per strip of ``STRIP`` rows along the last kept dim (the
    other kept dims the group's), an accumulator each."""

    def lower(self) -> Lowered:
        x, low, spec, kept = self.x, self.low, self.spec, self.kept
        # Strips along the last kept dim of more than one element; the others (``outer``)
        # are the group's own.
        wide = [d for d in kept if self.full[d] != 1]
        inner_d = wide[-1] if wide else None
        inner_n = self.full[inner_d] if inner_d is not None else 1
        outer_n = self.rows_n // max(inner_n, 1)
        inner = self.sizes[inner_d] if inner_d is not None else x.const(1)
        strips_n = -(-inner_n // STRIP)
        chunks_n = spec.chunks if self.chunked else 1
        groups = low.count(outer_n * strips_n * chunks_n)
        strips, outers = low.count(strips_n), low.count(outer_n)  # Variables even if 1
        strip, rest = x.mod(self.gid, strips), x.div(self.gid, strips)
        outer, chunk = x.mod(rest, outers), x.div(rest, outers)
        first = x.mul(strip, x.const(STRIP))
        width = x.binary(BOp.MIN, x.const(STRIP), x.binary(BOp.SUB, inner, first))
        u = x.special("loop", 0, depth=2)
        r = x.special("loop", 1, depth=1)
        column = x.add(first, u)  # along the last kept dim
        line = x.add(x.mul(outer, inner), column)
        others = [d for d in kept if d != inner_d]
        outer_dims = dict(zip(others, Index(x, [self.sizes[d] for d in others], flat=outer).dims))
        low.row_dims = tuple(column if d == inner_d else outer_dims[d] for d in kept)
        start, length = x.const(0), self.size
        if self.chunked:
            reach = low.count(-(-self.size_n // spec.chunks))
            start = x.mul(chunk, reach)
            length = x.binary(BOp.MIN, reach, x.binary(BOp.SUB, self.size, start))
        self.results(2)
        position = x.add(start, r)
        at = self.at(line, position)
        values = [self.element(p, at) for p in range(len(spec.passes))]
        slot = low.slot(spec.output, ParamKind.GLOBAL_MUT)
        store: tuple[Expr, Expr] | None = None  # each row's output element
        final: Expr | None = None  # or each of its elements
        if self.chunked:
            count = low.sym(spec.chunks)
            store = (Index(x, self.part_sizes(count), dims=self.part_dims(chunk)).flat, self.raw[0])
        elif self.row_output:
            store = (line, self.epilogue(line, low.row_dims))
        else:
            final = low.value(spec.output, at)
        emit, kb = low._begin("r")
        emit.bind(self.gid, kb.group(0, ceil_div(low._syms[groups.arg], 1)))
        kb.local(0, 1)
        accs = [self.lanes(kb, p, STRIP) for p in range(len(spec.passes))]
        for p, (lanes, value) in enumerate(zip(accs, values)):
            with self.strip(kb, emit, u, width, accs[:p], []) as lane:
                lanes.start(lane)
            with _loop(kb, emit, r, length, [value, position, width]):
                with self.strip(kb, emit, u, width, accs[:p], [value]) as lane:
                    lanes.update(lane, emit.value(value), emit.value(position))
        buf = low._buffers[slot]
        if store is not None:
            with self.strip(kb, emit, u, width, accs, list(store)):
                kb.store(buf, emit.value(store[0]), emit.value(store[1]))
        else:
            assert final is not None
            with _loop(kb, emit, r, length, [final, at.flat, width]):
                with self.strip(kb, emit, u, width, accs, [final, at.flat]):
                    kb.store(buf, emit.value(at.flat), emit.value(final))
        return Lowered(kb.build(), low.args + low.sym_args, outer_n * strips_n * chunks_n)

    @contextmanager
    def strip(
        self, kb: KernelBuilder, emit: Emitter, u: Expr, width: Expr, done: list[_Lanes],
        body: list[Expr],
    ) -> Iterator[Value]:  # fmt: skip
        """The loop over the strip's rows, in which the results of the passes ``done``
        are each row's own."""
        with _loop(kb, emit, u, width, body) as lane:
            for p, lanes in enumerate(done):
                emit.bind(self.raw[p], lanes.result(lane))
            yield lane
