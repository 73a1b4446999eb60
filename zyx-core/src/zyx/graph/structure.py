"""The plan cache's key of a graph about to be realized, and the leaves a plan binds.

``structure`` is the specification, in Python. It runs on every realize, so a C build of
the same walk (``structure.c``, through ``zyx.native``) takes its place where it can be
had (``fastest``); the C walk hands any graph it finds unusual to this one.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from functools import cache
from importlib import resources
from typing import Any, cast

from zyx import native
from zyx.graph.nodes import Node, Op

Structure = Callable[[Sequence[Node]], tuple[Hashable, list[Node]]]


def structure(targets: Sequence[Node]) -> tuple[Hashable, list[Node]]:
    """The plan cache's key for realizing ``targets``, and the leaves a plan binds, in
    the order the key numbers them: each node's entry once its sources have theirs (the
    order of ``walk``).

    This runs on every realize, so it is one pass, and the key is flat: per leaf ``(is
    a scalar, dtype, shape, device)``, per op ``(op, arg, dtype, shape, device, number of
    sources, their positions...)`` (a bool, not an ``Op``, starts a leaf's entry, so the
    entries read back one way), then the targets' positions in a tuple: a tuple per node
    cost as much again to build and to hash. A node is pushed again under ``_EMIT`` to
    make its entry once its sources are done; sources are pushed unchecked (a node seen
    already is skipped when popped). Nodes key ``position`` themselves (a node hashes and
    compares by identity), which spares an ``id`` call per look-up."""
    position: dict[Node, int] = {}
    leaves: list[Node] = []
    key: list[Hashable] = []
    entry = key.extend
    stack: list[Any] = list(reversed(targets))
    pop, push, extend = stack.pop, stack.append, stack.extend
    count = 0  # len(position), without a call
    while stack:
        node = pop()
        if node is _EMIT:
            node = pop()
            op, arg, srcs = node.op, node.arg, node.srcs
            if op is _CUSTOM:
                arg = arg.key
            position[node] = count
            count += 1
            if len(srcs) == 1:  # most ops: their entry in one tuple
                entry((op, arg, node.dtype, node.shape, id(node.device), 1, position[srcs[0]]))
            elif len(srcs) == 2:
                first, second = position[srcs[0]], position[srcs[1]]
                entry((op, arg, node.dtype, node.shape, id(node.device), 2, first, second))
            else:
                entry((op, arg, node.dtype, node.shape, id(node.device), len(srcs)))
                entry([position[s] for s in srcs])
        elif node in position:
            continue
        elif node.buffer is not None or node.op is _SCALAR:
            position[node] = count
            count += 1
            leaves.append(node)
            entry((node.op is _SCALAR, node.dtype, node.shape, id(node.device)))
        else:
            push(node)
            push(_EMIT)
            srcs = node.srcs
            if len(srcs) == 1:
                push(srcs[0])
            else:
                extend(reversed(srcs))
    key.append(tuple([position[t] for t in targets]))
    return tuple(key), leaves


_EMIT = object()
"""``structure``'s mark: the node below it on the stack has its sources' entries."""

_CUSTOM, _SCALAR = Op.CUSTOM, Op.SCALAR
"""For ``structure``'s loop: reading an enum's member off its class runs Python code."""


@cache
def fastest() -> Structure:
    """``structure`` in C where ``zyx.native`` builds it (``ZYX_NATIVE=0``, no compiler:
    ``structure`` itself), configured to hand unusual graphs to ``structure``."""
    source = resources.files("zyx.graph").joinpath("structure.c").read_text()
    module = native.load("_zyx_structure", source, prelude=("tracker",))
    if module is None:
        return structure
    module.configure(Node, Op.SCALAR, Op.CUSTOM, structure)
    return cast(Structure, module.structure)
