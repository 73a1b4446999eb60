"""The scheduler: which nodes of a graph get a buffer, and which kernel computes each.

Local rules, each small enough to test on its own:

1. Every target, reduction, custom op, copy, and source of a custom op or copy gets a
   buffer (is a *boundary*). Everything else is computed inside the kernel that reads it:
   elementwise chains and views fuse, and an elementwise producer fuses into the
   reduction that consumes it (``sum(a * b + c, axis=1)`` is one kernel).
2. A node read by several consumers is computed once into a buffer, unless recomputing
   it in each consumer moves fewer bytes (``_recompute``).
3. A node whose value is broadcast many times over and costs transcendental math gets a
   buffer, so that the math runs once per element, not once per copy.
4. A reduction fuses into the kernel that reads it when that kernel works row by row on
   the same rows: an elementwise consumer of the reduction's shape (``sum(x) / n``), or a
   consumer of the full shape that reads it broadcast along the reduced axes (``x -
   max(x)``); several reductions of the same rows become passes of one kernel (softmax).
5. A reduction whose rows are too few to keep a device's work-items busy (``SPREAD``:
   ``sum(x)`` of a matrix is one row, ``sum(x, axis=0)`` one work-item per column; on the
   host, too few groups for its cores, ``CPU_SPREAD``) runs in two stages: each row in
   chunks, a work-group (or work-item) each, into partials; then the partials of each
   row, with whatever fused after the reduction (``_split``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from math import prod

from zyx.graph.cpu import STRIP, cpu_layout
from zyx.graph.lower import MAP_LOCAL, KernelSpec, accumulator, preserves_flat
from zyx.graph.nodes import ELEMENTWISE, LEAVES, Node, Op, ReduceOp, walk
from zyx.ir.ops import UOp

EXPANSION = 8
"""Broadcast factor from which a node costing transcendental math gets its own buffer."""

SPREAD = 1 << 18
"""Work-items that keep the largest devices' memory busy (an H200: 132 SMs of 2048): a
reduction with fewer is split into chunks until it has them (rule 5)."""

CHUNK = 256
"""Elements per work-item in a chunk at least: what a chunk's loop amortizes its start
and its partial over (a work-group's chunk is ``MAP_LOCAL`` times as long, at least)."""

CPU_SPREAD = 64
"""Work-groups that keep a CPU's cores busy (``zyx.graph.cpu``'s layouts: a group is one
work-item on one core), with some to spare, so that the cores' shares even out."""

CPU_CHUNK = 1 << 16
"""Elements a CPU's group reduces in a chunk at least (256 KiB of f32): a reduction of
fewer than two such runs in one kernel, shorter than the second launch would be."""

_CHEAP_UNARY = frozenset({UOp.NEG, UOp.ABS, UOp.BITNOT, UOp.FLOOR, UOp.TRUNC, UOp.CEIL, UOp.RINT})


@dataclass
class Schedule:
    """Kernels and other steps, in the order they run."""

    steps: list[KernelSpec | Node] = field(default_factory=list)
    """A ``KernelSpec``, or a ``CUSTOM`` or ``COPY`` node (run by the runtime itself)."""
    boundaries: set[int] = field(default_factory=set)
    """Ids of the nodes that get a buffer in this plan (targets among them)."""


class Graph:
    """The unrealized part of a computation, with each node's consumers."""

    def __init__(self, targets: Sequence[Node]) -> None:
        self.targets = list(targets)
        self.order = walk(self.targets)
        self.consumers: dict[int, list[Node]] = {id(n): [] for n in self.order}
        for node in self.order:
            if not node.realized:
                for src in node.srcs:
                    self.consumers[id(src)].append(node)

    def is_leaf(self, node: Node) -> bool:
        return node.realized or node.op in LEAVES


def schedule(graph: Graph) -> Schedule:
    boundaries = _boundaries(graph)
    kernels: dict[int, KernelSpec] = {}
    for node in reversed(graph.order):
        if id(node) in boundaries and not node.realized and node.op not in _STEPS:
            if id(node) not in _merged(kernels):
                kernels[id(node)] = _kernel(graph, node, boundaries, kernels)
    out = Schedule(boundaries=boundaries)
    for node in graph.order:
        if id(node) in kernels:
            out.steps.extend(_split(graph, kernels[id(node)], boundaries))
        elif node.op in _STEPS and not node.realized:
            out.steps.append(node)
    return out


_STEPS = frozenset({Op.CUSTOM, Op.COPY})


def _merged(kernels: dict[int, KernelSpec]) -> set[int]:
    return {id(p) for k in kernels.values() for p in k.passes if p is not k.output}


def _boundaries(graph: Graph) -> set[int]:
    out = {id(t) for t in graph.targets if not t.realized}
    for node in graph.order:
        if graph.is_leaf(node):
            continue
        if node.op is Op.REDUCE or node.op in _STEPS:
            out.add(id(node))
        if node.op in _STEPS:  # they read their sources from buffers (a number as itself)
            out.update(id(s) for s in node.srcs if not s.realized and s.op is not Op.SCALAR)
        if _broadcast_math(graph, node, graph.consumers[id(node)]):
            out.add(id(node))
    # Rule 2, consumers before producers: a node's kernels are those of its consumers
    # (a consumer with a buffer is a kernel itself); read by one kernel only, it costs
    # nothing twice, however many of that kernel's ops read it.
    kernels: dict[int, set[int]] = {}
    for node in reversed(graph.order):
        if id(node) in out:
            kernels[id(node)] = {id(node)}
            continue
        owners: set[int] = set()
        for c in graph.consumers[id(node)]:
            owners |= kernels[id(c)]
        if len(owners) > 1 and not graph.is_leaf(node) and not _recompute(graph, node, len(owners)):
            out.add(id(node))
            owners = {id(node)}
        kernels[id(node)] = owners
    return out


def _recompute(graph: Graph, node: Node, consumers: int) -> bool:
    """Whether ``consumers`` kernels should each compute ``node`` rather than read it
    from a buffer. Recomputing reads its ``k`` inputs in each consumer (``c * k``); a
    buffer costs one kernel reading them, a write, and a read per consumer (``k + 1 +
    c``). Views and leaves cost nothing to recompute."""
    if node.op in (Op.VIEW, Op.RESHAPE) and graph.is_leaf(node.srcs[0]):
        return True
    inputs = _inputs(graph, node, limit=8)
    return consumers * inputs <= inputs + 1 + consumers


def _inputs(graph: Graph, node: Node, limit: int) -> int:
    """The buffers ``node``'s computation reads (counting up to ``limit``)."""
    seen: set[int] = set()
    count, stack = 0, [node]
    while stack and count < limit:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if n.realized or n.op in (Op.REDUCE, Op.CUSTOM, Op.COPY):
            count += 1
        elif n.op not in LEAVES:
            stack.extend(n.srcs)
    return count


def _broadcast_math(graph: Graph, node: Node, consumers: list[Node]) -> bool:
    if node.op not in ELEMENTWISE:
        return False
    expanded = any(c.op is Op.VIEW and c.size >= EXPANSION * max(node.size, 1) for c in consumers)
    return expanded and _has_math(graph, node)


def _has_math(graph: Graph, node: Node) -> bool:
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if id(n) in seen or graph.is_leaf(n) or n.op in (Op.REDUCE, Op.CUSTOM, Op.COPY):
            continue
        seen.add(id(n))
        if n.op is Op.UNARY and n.arg not in _CHEAP_UNARY:
            return True
        stack.extend(n.srcs)
    return False


def _region(graph: Graph, root: Node, boundaries: set[int]) -> list[Node]:
    """The nodes ``root``'s kernel computes: ``root`` and what it reads, up to buffers."""
    out, seen, stack = [], set(), [root]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        out.append(n)
        if n is root or (id(n) not in boundaries and not graph.is_leaf(n)):
            stack.extend(n.srcs)
    return out


def _kernel(
    graph: Graph, root: Node, boundaries: set[int], kernels: dict[int, KernelSpec]
) -> KernelSpec:
    """The kernel computing ``root``, with every reduction that may fuse into it fused."""
    spec = KernelSpec(root, [root] if root.op is Op.REDUCE else [])
    changed = True
    while changed:
        changed = False
        for node in _region(graph, root, boundaries):
            if node is root or node.op is not Op.REDUCE or id(node) not in boundaries:
                continue
            if any(t is node for t in graph.targets) or id(node) in _merged(kernels):
                continue
            if _readers(graph, node, boundaries) == {id(root)} and _fits(graph, spec, node):
                boundaries.discard(id(node))
                kernels.pop(id(node), None)
                spec.passes.append(node)
                changed = True
    spec.passes.sort(key=graph.order.index)
    spec.group = _group(graph, spec, boundaries) if spec.passes else False
    return spec


def _readers(graph: Graph, node: Node, boundaries: set[int]) -> set[int]:
    """The kernels that read ``node``: the boundaries its consumers lead to through the
    nodes computed in place. A reduction fuses into a kernel only where that kernel is its
    one reader: a view of it read by two kernels (``x @ y`` consumed by ``sum(x @ y)`` and
    by ``(x @ y) & z``) left the other kernel reading a row it does not compute."""
    out: set[int] = set()
    stack, seen = list(graph.consumers[id(node)]), set()
    while stack:
        c = stack.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        if id(c) in boundaries:
            out.add(id(c))
        else:
            stack.extend(graph.consumers[id(c)])
    return out


def _fits(graph: Graph, spec: KernelSpec, reduction: Node) -> bool:
    """Whether ``reduction`` can be a pass of ``spec``'s kernel (rule 4)."""
    full, axes = reduction.srcs[0].shape, reduction.arg.axes
    if spec.reduction is not None and spec.reduction != (full, axes):
        return False
    rows = prod(n for d, n in enumerate(full) if d not in axes)
    root = spec.output
    if root.shape == full and root.op is not Op.REDUCE:
        return _paths_ok(graph, spec, reduction, expand=True)
    return root.size == rows and _paths_ok(graph, spec, reduction, expand=False)


def _paths_ok(graph: Graph, spec: KernelSpec, reduction: Node, expand: bool) -> bool:
    """Whether every path from the kernel's output down to ``reduction`` reads it at the
    row being computed: through elementwise ops and reshapes that only add or drop size-1
    dims, and (where ``expand``) one broadcast along exactly the reduced axes up to the
    full shape. A pass of the kernel reads its source at the full shape: below it, one
    broadcast is allowed again."""
    full, axes = reduction.srcs[0].shape, reduction.arg.axes
    above = _ancestors(graph, reduction)
    passes = {id(p) for p in spec.passes}
    stack, seen = [(spec.output, expand)], set()
    while stack:
        n, may_expand = stack.pop()
        if n is reduction or id(n) not in above or (id(n), may_expand) in seen:
            continue
        seen.add((id(n), may_expand))
        if n.op in ELEMENTWISE or (n.op is Op.VIEW and preserves_flat(n.arg)):
            stack.extend((s, may_expand) for s in n.srcs)
        elif n.op is Op.VIEW and may_expand and n.shape == full and n.arg.is_expand_of(axes):
            stack.append((n.srcs[0], False))
        elif id(n) in passes:
            stack.append((n.srcs[0], True))
        else:
            return False
    return True


def _ancestors(graph: Graph, node: Node) -> set[int]:
    """The nodes from which ``node`` is reachable (its consumers, theirs, ...)."""
    out, stack = set(), [node]
    while stack:
        n = stack.pop()
        for c in graph.consumers.get(id(n), ()):
            if id(c) not in out:
                out.add(id(c))
                stack.append(c)
    return out


def _split(graph: Graph, spec: KernelSpec, boundaries: set[int]) -> list[KernelSpec]:
    """``spec``, or its two stages where it is one reduction (not an arg-reduction: a
    partial would need its index too) with an output of its rows' shape whose rows keep
    fewer than ``SPREAD`` work-items busy (rule 5). The chunks are as many as fill
    ``SPREAD``, each ``CHUNK`` elements per work-item or more; the partials (a new node, a
    buffer of this plan) hold them along the first reduced axis."""
    if len(spec.passes) != 1 or spec.passes[0].arg.op in (ReduceOp.ARGMAX, ReduceOp.ARGMIN):
        return [spec]
    full, axes = spec.reduction  # type: ignore[misc]
    rows = prod(n for d, n in enumerate(full) if d not in axes)
    chunks = _chunks(spec, rows, prod(full[d] for d in axes))
    if chunks < 2 or spec.output.size != rows:
        return [spec]
    reduction = spec.passes[0]
    shape = tuple(
        chunks if d == axes[0] else 1 if d in axes else n for d, n in enumerate(full)
    )  # fmt: skip
    dtype = accumulator(reduction.arg.op, reduction.srcs[0].dtype)
    partials = Node(Op.REDUCE, reduction.arg, reduction.srcs, dtype, shape, reduction.device)
    boundaries.add(id(partials))
    first = KernelSpec(partials, [partials], group=spec.group, chunks=chunks)
    second = KernelSpec(spec.output, spec.passes, partials=partials)
    second.group = _group(graph, second, boundaries)
    return [first, second]


def _chunks(spec: KernelSpec, rows: int, size: int) -> int:
    """The chunks each of ``rows`` rows of ``size`` reduced elements is split into: as
    many as fill the device, each long enough to amortize its loop (rule 5)."""
    if cpu_layout(spec.output.device):  # a group per row, or per strip of rows
        groups, width = (rows, 1) if spec.group else _strips(spec, rows)
        return min(-(-CPU_SPREAD // max(groups, 1)), size * width // CPU_CHUNK)
    width = MAP_LOCAL if spec.group else 1  # work-items per row, at least
    return min(-(-SPREAD // max(rows * width, 1)), size // (CHUNK * width))


def _strips(spec: KernelSpec, rows: int) -> tuple[int, int]:
    """A CPU's column layout of ``rows`` rows: its groups (strips of ``STRIP`` along the
    last kept dim of more than one element, ``zyx.graph.cpu``) and the rows of a strip."""
    full, axes = spec.reduction  # type: ignore[misc]
    kept = [n for d, n in enumerate(full) if d not in axes and n != 1]
    inner = kept[-1] if kept else 1
    return rows // max(inner, 1) * -(-inner // STRIP), min(inner, STRIP)


def _group(graph: Graph, spec: KernelSpec, boundaries: set[int]) -> bool:
    """Group layout (a work-group per row) where the rows' reduced elements are the
    contiguous ones in memory, or (but on the host) where there are too few rows to fill
    a device."""
    full, axes = spec.reduction  # type: ignore[misc]
    rows = prod(n for d, n in enumerate(full) if d not in axes)
    size = prod(full[d] for d in axes)
    if rows < 256 and size >= 256 and not cpu_layout(spec.output.device):
        return True  # a CPU splits such rows in chunks, and reads them in the order they lie
    if spec.partials is not None:  # a buffer: its last dim of more than one is contiguous
        last = max((d for d, n in enumerate(full) if n != 1), default=None)
        return last is not None and last in axes
    votes = [_contiguous_dim(graph, p.srcs[0], boundaries) for p in spec.passes]
    dims = [d for v in votes for d in v]
    kept = [d for d in dims if d is not None and d not in axes]
    reduced = [d for d in dims if d is not None and d in axes]
    return bool(reduced) and not kept


def _contiguous_dim(graph: Graph, node: Node, boundaries: set[int]) -> list[int | None]:
    """For each buffer ``node`` reads, the dim of ``node``'s shape along which it reads
    consecutive elements (``None``: none does; a broadcast or a strided read)."""
    out: list[int | None] = []
    start = tuple(range(len(node.shape)))
    stack: list[tuple[Node, tuple[int | None, ...]]] = [(node, start)]
    seen: set[int] = set()
    while stack:
        n, dims = stack.pop()  # dims: for each dim of n, the dim of node's shape it follows
        if n.realized or id(n) in boundaries:  # ``node`` itself too: sum(x) reads x
            out.append(dims[-1] if dims else None)
        elif id(n) in seen or graph.is_leaf(n):
            continue
        elif n.op in ELEMENTWISE:
            stack.extend((s, dims) for s in n.srcs)
        elif n.op is Op.VIEW:
            terms = n.arg.terms
            mapped = tuple(
                dims[t.dim] if t.dim is not None and abs(t.scale) == 1 else None for t in terms
            )
            stack.append((n.srcs[0], mapped))
        elif n.op is Op.RESHAPE:
            src = n.srcs[0]
            same_last = bool(src.shape) and bool(n.shape) and src.shape[-1] == n.shape[-1]
            last = dims[-1] if same_last and dims else None
            stack.append((src, (None,) * (len(src.shape) - 1) + (last,) if src.shape else ()))
        seen.add(id(n))
    return out
