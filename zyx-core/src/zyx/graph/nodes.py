"""The lazy graph: each array op records a ``Node`` and returns at once.

A node is an op, its sources, and the shape, dtype and device of its value. Realizing a
node gives it a ``Buffer`` (contiguous, row-major, of its shape and dtype) and drops its
sources, so the graph above a realized node can be freed; later graphs read it as a leaf.

Elementwise ops take sources of their own shape: broadcasting is a ``VIEW`` inserted in
front of them. Reductions keep the reduced dims as size 1 (``keepdims``); dropping them
is a view too.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from enum import Enum
from math import prod
from typing import TYPE_CHECKING, Any, NamedTuple

from zyx.allocator import allocator
from zyx.dtypes import DType
from zyx.graph.views import View, indexable

if TYPE_CHECKING:
    from zyx.backend import Buffer, Device, Program
    from zyx.ir.ops import BOp, Kernel, UOp


class Op(Enum):
    __hash__ = object.__hash__  # members are singletons; Enum's hash runs Python code

    BUFFER = "buffer"
    """A leaf that holds data from its creation (``asarray``, a loaded file)."""
    SCALAR = "scalar"
    """A Python number, shape (): a kernel argument, so that other values reuse the kernel."""
    CONST = "const"
    """A constant, shape (), baked into kernels (zeros, the identity of a reduction)."""
    IOTA = "iota"
    """The index along dim ``arg`` of the node's shape (int64)."""
    VIEW = "view"
    """Its one source through a ``View`` (``arg``)."""
    RESHAPE = "reshape"
    """Its one source, same elements in row-major order, another shape."""
    UNARY = "unary"
    BINARY = "binary"
    WHERE = "where"
    CAST = "cast"
    REDUCE = "reduce"
    """``arg``: a ``Reduction``."""
    CUSTOM = "custom"
    """``arg``: a ``Custom``: hand-written kernels over realized sources."""
    COPY = "copy"
    """Its one source, copied to this node's device."""
    GATHER = "gather"
    """Its first source read at indices its second source holds: ``arg`` is a ``Gather``."""
    SCATTER = "scatter"
    """Its first source with the region a ``View`` (``arg``) selects replaced by its second
    source (of the region's shape): ``x[key] = value`` for a basic index ``key``."""


class ReduceOp(Enum):
    __hash__ = object.__hash__  # members are singletons; Enum's hash runs Python code

    SUM = "sum"
    PROD = "prod"
    MAX = "max"
    MIN = "min"
    ARGMAX = "argmax"
    ARGMIN = "argmin"


class Reduction(NamedTuple):
    """A named tuple, as a ``View`` is: it is in every reduction's plan key, which each
    realize hashes and compares, and a dataclass's ``__hash__`` and ``__eq__`` are Python
    code."""

    op: ReduceOp
    axes: tuple[int, ...]
    """Sorted, non-negative; the node keeps them as size 1."""


@dataclass(frozen=True, slots=True)
class Gather:
    axis: int
    along: bool
    """``take_along_axis`` (the indices have the result's shape, and replace its index
    along ``axis``), else ``take`` (the indices' dims replace dim ``axis``)."""


# The members the constructors below read, which every array op calls: reading an enum's
# member off its class costs a Python call (``EnumType.__getattr__`` in Python 3.11).
_BUFFER, _CONST, _SCALAR, _VIEW, _RESHAPE = Op.BUFFER, Op.CONST, Op.SCALAR, Op.VIEW, Op.RESHAPE
_UNARY, _BINARY, _WHERE, _CAST, _REDUCE = Op.UNARY, Op.BINARY, Op.WHERE, Op.CAST, Op.REDUCE

ELEMENTWISE = frozenset({Op.UNARY, Op.BINARY, Op.WHERE, Op.CAST})
LEAVES = frozenset({Op.BUFFER, Op.SCALAR, Op.CONST, Op.IOTA})


@dataclass(frozen=True)
class CustomLaunch:
    """One launch of a custom op: a kernel and, per param, what it is bound to: ``("src",
    i)`` (the op's source ``i``, realized and contiguous), ``("out", 0)`` (the op's
    result), ``("scratch", j)`` (its scratch buffer ``j``), or a Python number. The kernel
    is IR (compiled once per device) or a ``Program`` built for the device (a claim's)."""

    kernel: Kernel | Program
    args: tuple[tuple[str, int] | bool | int | float, ...]


class Custom:
    """Hand-written kernels computing one node from its realized sources (sort, scan, ...).

    ``key`` is hashable and says everything the launches depend on besides the data (it
    joins the plan cache's key); ``scratch`` are the sizes in bytes of the temporary
    buffers the launches use; ``launches`` are the kernels to run, in order. Each kernel
    is compiled once per device (the compile cache is keyed by its IR).
    """

    key: Hashable

    def scratch(self, node: Node) -> Sequence[int]:
        return ()

    def launches(self, device: Device, node: Node) -> Sequence[CustomLaunch]:
        raise NotImplementedError


class Node:
    """One value of the lazy graph."""

    __slots__ = ("op", "arg", "srcs", "dtype", "shape", "device", "buffer", "__weakref__")

    def __init__(
        self,
        op: Op,
        arg: Any,
        srcs: tuple[Node, ...],
        dtype: DType,
        shape: tuple[int, ...],
        device: Device,
        buffer: Buffer | None = None,
    ) -> None:
        self.op = op
        self.arg = arg
        self.srcs = srcs
        self.dtype = dtype
        self.shape = shape
        self.device = device
        self.buffer = buffer

    @property
    def realized(self) -> bool:
        return self.buffer is not None

    @property
    def size(self) -> int:
        return prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def realize_with(self, buffer: Buffer) -> None:
        """Hold ``buffer`` (its reference is now this node's) and forget the sources."""
        self.buffer = buffer
        self.srcs = ()

    def __del__(self) -> None:
        # At interpreter exit this module's globals may be gone (None) before the last nodes
        # die; their memory goes with the process.
        if self.buffer is not None and allocator is not None:
            allocator.dead(self.buffer)

    def __repr__(self) -> str:
        what = "realized" if self.buffer is not None else f"{len(self.srcs)} sources"
        return f"<Node {self.op.value} {self.dtype} {self.shape} on {self.device.name}, {what}>"


def leaf(buffer: Buffer, dtype: DType, shape: tuple[int, ...], device: Device) -> Node:
    return Node(_BUFFER, None, (), dtype, shape, device, buffer)


def const(value: bool | int | float, dtype: DType, device: Device) -> Node:
    return Node(_CONST, value, (), dtype, (), device)


def scalar(value: bool | int | float, dtype: DType, device: Device) -> Node:
    return Node(_SCALAR, value, (), dtype, (), device)


def iota(shape: tuple[int, ...], dim: int, device: Device) -> Node:
    return Node(Op.IOTA, dim, (), DType.I64, shape, device)


def view(src: Node, v: View) -> Node:
    """``src`` through ``v``; views of views merge into one."""
    if v.is_identity:
        return src
    if src.op is _VIEW and src.buffer is None:
        return view(src.srcs[0], v.after(src.arg))
    return Node(_VIEW, v, (src,), src.dtype, v.shape, src.device)


def reshape(src: Node, shape: tuple[int, ...]) -> Node:
    """``src`` in another shape; a reshape that only adds or drops size-1 dims is a view."""
    if shape == src.shape:
        return src
    # A scatter's arg is a View too (its region), the identity one where it covers all.
    through = src.op is _VIEW and src.buffer is None
    base = src.arg if through else View.identity(src.shape)
    squeezed = base.squeeze_to(shape)
    if squeezed is not None:
        return view(src.srcs[0] if through else src, squeezed)
    if src.op is _RESHAPE and src.buffer is None:
        src = src.srcs[0]
    return Node(_RESHAPE, shape, (src,), src.dtype, shape, src.device)


def unary(op: UOp, x: Node, dtype: DType | None = None) -> Node:
    return Node(_UNARY, op, (x,), dtype or x.dtype, x.shape, x.device)


def binary(op: BOp, a: Node, b: Node, dtype: DType) -> Node:
    return Node(_BINARY, op, (a, b), dtype, a.shape, a.device)


def where(cond: Node, a: Node, b: Node) -> Node:
    return Node(_WHERE, None, (cond, a, b), a.dtype, a.shape, a.device)


def cast(x: Node, dtype: DType) -> Node:
    if dtype is x.dtype:
        return x
    return Node(_CAST, dtype, (x,), dtype, x.shape, x.device)


def reduce(op: ReduceOp, x: Node, axes: tuple[int, ...], dtype: DType) -> Node:
    shape = list(x.shape)
    for d in axes:
        shape[d] = 1
    return Node(_REDUCE, Reduction(op, axes), (x,), dtype, tuple(shape), x.device)


def reduced(reduction: Reduction, x: Node, shape: tuple[int, ...], dtype: DType) -> Node:
    """``reduce`` with the ``Reduction`` and the kept shape made already: a caller that
    memoizes them (``matmul``) spares half of ``reduce``'s time."""
    return Node(_REDUCE, reduction, (x,), dtype, shape, x.device)


def custom(
    arg: Custom, srcs: tuple[Node, ...], dtype: DType, shape: tuple[int, ...], device: Device
) -> Node:
    return Node(Op.CUSTOM, arg, srcs, dtype, shape, device)


def copy(x: Node, device: Device) -> Node:
    return Node(Op.COPY, None, (x,), x.dtype, x.shape, device)


def gather(x: Node, indices: Node, g: Gather, shape: tuple[int, ...]) -> Node:
    return Node(Op.GATHER, g, (x, indices), x.dtype, indexable(shape), x.device)


def scatter(x: Node, value: Node, region: View) -> Node:
    return Node(Op.SCATTER, region, (x, value), x.dtype, x.shape, x.device)


def walk(roots: Sequence[Node], stop: Callable[[Node], bool] = lambda n: n.realized) -> list[Node]:
    """The nodes under ``roots`` in dependency order (sources first), each once, without
    recursion (a chain of many thousand ops is fine); ``stop`` nodes are leaves."""
    order: list[Node] = []
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(r, False) for r in reversed(roots)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        if not stop(node):
            stack.extend((s, False) for s in reversed(node.srcs) if id(s) not in seen)
    return order
