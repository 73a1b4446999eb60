"""Claims: plugins offering their own programs for parts of a graph (``zyx_match_graph``).

At a plan cache miss, before kernelizing, the runtime asks every plugin that implements
``zyx_match_graph`` once per device of the graph. A ``Claim`` names one node of the graph
(``output``), the nodes its launches read (``inputs``), and the launches that compute
``output`` from them; everything between is the claimed subgraph. The runtime times the
claim against the generated kernels of the same subgraph (``Device.launch_timed``) and
remembers the winner by the claim's ``key``; a claim taken becomes a custom op in a copy of
the graph (``rewrite``), which is then scheduled as any other.

A plugin that raises, or returns something that is not a valid claim, loses that claim
(a warning on ``zyx.sched``), never the realize.

``matmuls(graph)`` finds the matrix products of a graph, with their operands as strided
buffers: what a library that claims matmuls (cuDNN) needs to know; ``strided(view)`` reads
any view node that way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from math import prod
from typing import TYPE_CHECKING, Any

from zyx.graph.nodes import Custom, CustomLaunch, Node, Op, ReduceOp, custom, walk
from zyx.ir.ops import BOp

if TYPE_CHECKING:
    from zyx.backend import Device
    from zyx.graph.schedule import Graph

log = logging.getLogger("zyx.sched")


@dataclass(frozen=True, eq=False)
class Claim:
    """A plugin's program for ``output``, reading ``inputs``.

    ``launches(device)`` are run in order, each a ``CustomLaunch`` whose params bind to
    ``("src", i)`` (input ``i``'s buffer: contiguous, row-major, of its shape; for an
    ``Op.SCALAR`` input, its value: a number whose value the graph's structure omits),
    ``("out", 0)`` (``output``'s buffer, the same), ``("scratch", j)`` or a number; its
    kernel is IR (compiled by zyx, once per device) or a ``Program`` already built for
    ``device``. ``key`` says everything the launches depend on besides the data (shapes,
    strides, dtypes, the plugin's options): the runtime remembers its choice by it.
    """

    output: Node
    inputs: tuple[Node, ...]
    key: Hashable
    launches: Callable[[Device], Sequence[CustomLaunch]]
    scratch: tuple[int, ...] = ()
    plugin: str = ""
    """Who claimed it (set by ``offers``), for logs and errors."""


class Claimed(Custom):
    """A claim taken: its launches as a custom op over its inputs."""

    def __init__(self, claim: Claim) -> None:
        self.claim = claim
        self.key = ("claim", claim.plugin, claim.key)

    def scratch(self, node: Node) -> Sequence[int]:
        return self.claim.scratch

    def launches(self, device: Device, node: Node) -> Sequence[CustomLaunch]:
        return self.claim.launches(device)


def offers(graph: Graph) -> list[Claim]:
    """Every valid claim of every plugin, asked once per device of ``graph``, then core's
    own (``zyx.graph.matmul``: each of its variants where ``autotune`` is on): the claims of
    one node race each other and the generated kernels (``zyx.race``), in this order, the
    first the default."""
    from zyx.plugins import registry

    hook = registry().plugin_manager.hook.zyx_match_graph
    devices = {id(n.device): n.device for n in graph.order if not graph.is_leaf(n)}
    claimed: list[Claim] = []
    for impl in hook.get_hookimpls():
        for device in devices.values():
            claimed += _ask(impl, graph, device)
    products = matmuls(graph)
    if products:  # loaded only here: a graph without matmuls (most) pays no import for it
        from zyx import search
        from zyx.graph import matmul  # it builds on this module

        searched = search.settings().enabled  # every variant races, else the default alone
        for device in devices.values():
            claimed += matmul.offer(products, device, searched)
    return claimed


def _ask(impl: Any, graph: Graph, device: Device) -> list[Claim]:
    try:
        given = {"graph": graph, "device": device}  # pluggy lets an impl take fewer
        found = impl.function(**{name: given[name] for name in impl.argnames})
        return [_valid(c, graph, device, impl.plugin_name) for c in found or ()]
    except Exception as error:  # a plugin's fault costs its claims, not the realize
        log.warning("zyx_match_graph of %s on %s: %s", impl.plugin_name, device.name, error)
        return []


def _valid(claim: Any, graph: Graph, device: Device, plugin: str) -> Claim:
    """``claim`` as offered by ``plugin``, if it can stand in for its subgraph."""
    if not isinstance(claim, Claim):
        raise TypeError(f"returned {type(claim).__name__!r}, not a zyx.graph.claims.Claim")
    out = claim.output
    if id(out) not in graph.consumers or graph.is_leaf(out) or out.device is not device:
        raise ValueError(f"claim of {out!r}: not an op of this graph on {device.name}")
    if not isinstance(claim.inputs, tuple) or any(
        id(i) not in graph.consumers for i in claim.inputs
    ):
        raise ValueError(f"claim of {out!r}: its inputs are not a tuple of this graph's nodes")
    inputs = {id(i) for i in claim.inputs}
    for node in _below(claim):  # the launches read nothing that is not an input
        if (node.realized or node.op is Op.SCALAR) and id(node) not in inputs:
            raise ValueError(f"claim of {out!r} reads {node!r}, which is not among its inputs")
    if id(out) in inputs:
        raise ValueError(f"claim of {out!r} takes its own output as an input")
    return replace(claim, scratch=tuple(claim.scratch), plugin=plugin)


def rewrite(targets: Sequence[Node], taken: Sequence[Claim]) -> list[Node]:
    """A copy of the graph under ``targets`` in which each claim's output is its custom
    op (leaves and realized nodes are shared, not copied: the plan binds them)."""
    claims = {id(c.output): c for c in taken}
    return _copy(targets, lambda node, new: _claimed(claims, node, new), lambda n: n.realized)


def subgraph(
    claim: Claim, standins: Sequence[Node], inner: Sequence[Claim] = ()
) -> tuple[Node, Node]:
    """The claimed subgraph over ``standins`` (one per input), generated and claimed: the
    two alternatives the runtime times. ``inner`` are claims taken within it (``within``):
    the generated alternative runs them, as the graph would without ``claim``."""
    mapping = {id(i): s for i, s in zip(claim.inputs, standins, strict=True)}
    taken = {id(c.output): c for c in inner}

    def swap(node: Node, new: dict[int, Node]) -> Node | None:
        found = mapping.get(id(node))
        return found if found is not None else _claimed(taken, node, new)

    (generated,) = _copy([claim.output], swap, lambda n: id(n) in mapping or n.realized)
    return generated, _custom(claim, standins)


def within(claim: Claim, taken: Sequence[Claim]) -> list[Claim]:
    """The claims of ``taken`` inside ``claim``'s subgraph: their outputs among the nodes
    it replaces, their inputs among those or its inputs. (Where they nest, the outer one's
    custom op leaves the inner one's unused.)"""
    inputs = {id(i) for i in claim.inputs}
    inside = {id(n) for n in _below(claim)}
    return [
        c for c in taken
        if id(c.output) in inside and id(c.output) not in inputs
        and all(id(i) in inside for i in c.inputs)
    ]  # fmt: skip


def _below(claim: Claim) -> list[Node]:
    """The nodes ``claim`` replaces, with its inputs and the realized nodes they read."""
    inputs = {id(i) for i in claim.inputs}
    return walk([claim.output], lambda n: id(n) in inputs or n.realized)


def _claimed(claims: dict[int, Claim], node: Node, new: dict[int, Node]) -> Node | None:
    """``node``'s claim's custom op over the copies of its inputs (``new``), where
    ``claims`` holds one for it (by its id)."""
    claim = claims.get(id(node))
    return None if claim is None else _custom(claim, [new[id(i)] for i in claim.inputs])


def _custom(claim: Claim, srcs: Sequence[Node]) -> Node:
    out = claim.output
    return custom(Claimed(claim), tuple(srcs), out.dtype, out.shape, out.device)


def _copy(
    roots: Sequence[Node],
    swap: Callable[[Node, dict[int, Node]], Node | None],
    stop: Callable[[Node], bool],
) -> list[Node]:
    """A copy of the graph under ``roots`` (down to ``stop`` nodes) in which a node that
    ``swap`` replaces (given the copies made so far) is its replacement; leaves and
    realized nodes are shared."""
    new: dict[int, Node] = {}
    for node in walk(roots, stop):
        found = swap(node, new)
        if found is None and (node.realized or not node.srcs):
            found = node
        if found is None:
            srcs = tuple(new[id(s)] for s in node.srcs)
            found = Node(node.op, node.arg, srcs, node.dtype, node.shape, node.device)
        new[id(node)] = found
    return [new[id(r)] for r in roots]


@dataclass(frozen=True)
class Operand:
    """A matmul operand: ``node``'s buffer (contiguous, row-major) read at ``offset +
    sum(index * strides)``, in elements, over (*batch, rows, columns)."""

    node: Node
    offset: int
    strides: tuple[int, ...]


@dataclass(frozen=True)
class Matmul:
    """``output[*b, i, j, 0] = sum over l of a[*b, i, l] * b[*b, l, j]``: a ``SUM`` over the
    last dim of a product of two strided views (what ``zyx.matmul`` records)."""

    output: Node
    a: Operand
    b: Operand
    batch: tuple[int, ...]
    n: int
    m: int
    k: int


def matmuls(graph: Graph) -> list[Matmul]:
    """The matrix products among ``graph``'s nodes (see ``Matmul``)."""
    return [m for n in graph.order if (m := _matmul(n)) is not None]


def _matmul(node: Node) -> Matmul | None:
    if node.op is not Op.REDUCE or node.realized or node.arg.op is not ReduceOp.SUM:
        return None
    (product,) = node.srcs
    ndim = len(product.shape)
    if ndim < 3 or node.arg.axes != (ndim - 1,) or product.op is not Op.BINARY:
        return None
    if product.arg is not BOp.MUL or any(s.op is not Op.VIEW or s.arg.masked for s in product.srcs):
        return None
    *batch, n, m, k = product.shape
    left, right = (strided(s) for s in product.srcs)
    if not _reads_rows(left, ndim, m):
        left, right = right, left
    if not (_reads_rows(left, ndim, m) and _reads_columns(right, ndim, n)):
        return None
    a = Operand(left.node, left.offset, (*left.strides[:-3], left.strides[-3], left.strides[-1]))
    b = Operand(
        right.node, right.offset, (*right.strides[:-3], right.strides[-1], right.strides[-2])
    )
    return Matmul(node, a, b, tuple(batch), n, m, k)


def _reads_rows(x: Operand, ndim: int, m: int) -> bool:
    return x.strides[ndim - 2] == 0 or m == 1


def _reads_columns(x: Operand, ndim: int, n: int) -> bool:
    return x.strides[ndim - 3] == 0 or n == 1


def strided(view_node: Node) -> Operand:
    """A view node as its source's buffer read with strides over the view's dims (what a
    plugin needs of an epilogue's operands too: a bias broadcast by a view)."""
    v = view_node.arg
    source = v.source
    strides = [0] * len(v.shape)
    offset = 0
    for j, term in enumerate(v.terms):
        row = prod(source[j + 1 :])
        offset += term.offset * row
        if term.dim is not None:
            strides[term.dim] += term.scale * row
    return Operand(view_node.srcs[0], offset, tuple(strides))
