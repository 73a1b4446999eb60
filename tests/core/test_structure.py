"""The plan cache's key (``zyx.graph.structure``): the C walk gives what the Python walk
gives, the same key (equal, equal-hashing, item for item of the same type) and the same
leaves, on random graphs built node by node and through the array API, on graphs it hands
to the Python walk (unusual objects), and where a custom op's ``key`` raises or changes the
graph; it leaks no reference. Without native code (``ZYX_NATIVE=0``, test_native.py) the
Python walk is used and the runtime works as before.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from importlib import resources
from typing import Any

import numpy as np
import pytest

import zyx
from zyx import native as zyx_native
from zyx.backend import Device
from zyx.dtypes import DType
from zyx.graph.nodes import Custom, Node, Op
from zyx.graph.structure import Structure, fastest, structure
from zyx.tensor import Tensor

Result = tuple[Hashable, list[Node]]


@pytest.fixture
def native() -> Structure:
    walk = fastest()
    if walk is structure:
        pytest.skip("no native structure here (no C compiler, no Python.h, or ZYX_NATIVE=0)")
    return walk


def same_items(a: Any, b: Any) -> bool:
    """Equal item for item, each of the same type: ``True == 1`` would hide a bool the key
    uses to tell a leaf's entry from an op's. Objects other than ints and tuples (ops,
    dtypes, args) are the same object."""
    if type(a) is not type(b):
        return False
    if type(a) is tuple:
        return len(a) == len(b) and all(same_items(x, y) for x, y in zip(a, b))
    return a == b if type(a) is int else a is b


def assert_same(native: Structure, targets: Sequence[Node]) -> Result:
    key, leaves = structure(targets)
    got_key, got_leaves = native(targets)
    assert same_items(got_key, key)
    assert got_key == key and hash(got_key) == hash(key)
    assert type(got_leaves) is list and [id(n) for n in got_leaves] == [id(n) for n in leaves]
    return got_key, got_leaves


# ---- random graphs, node by node --------------------------------------------------------


class Keyed(Custom):
    def __init__(self, key: Hashable) -> None:
        self.key = key


class Computed(Custom):
    """A key computed on each read: Python code in the middle of the walk."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.reads = 0

    @property
    def key(self) -> Hashable:  # type: ignore[override]
        self.reads += 1
        return ("computed", self.n)


DEVICES: tuple[Any, ...] = (object(), object(), object())
"""The walk reads a node's device by identity only."""
DTYPES = (DType.F32, DType.I64, DType.BOOL, DType.F16)
ARGS: tuple[Hashable, ...] = (None, 0, 3, -1, 2.5, "add", (1, 2), ((0,), (1, 1)), True)
OPS = (Op.VIEW, Op.RESHAPE, Op.UNARY, Op.BINARY, Op.WHERE, Op.CAST, Op.REDUCE, Op.COPY)


def realized_leaves(device: Device) -> list[Node]:
    """Nodes with buffers: uploaded arrays, and a realized op (no sources any more)."""
    x = zyx.asarray(np.arange(6, dtype=np.float32), device=device)
    y = zyx.asarray(np.ones((2, 3), dtype=np.int64), device=device)
    done = x * 2.0
    zyx.realize(done)
    return [x.node, y.node, done.node]


def random_node(rng: np.random.Generator, pool: list[Node]) -> Node:
    dtype = DTYPES[rng.integers(len(DTYPES))]
    shape = tuple(int(d) for d in rng.integers(1, 5, size=rng.integers(0, 4)))
    device = DEVICES[rng.integers(len(DEVICES))]
    arg = ARGS[rng.integers(len(ARGS))]
    kind = rng.random()
    if kind < 0.1:
        return Node(Op.SCALAR, float(rng.random()), (), dtype, (), device)
    if kind < 0.15:
        return Node(Op.CONST if rng.random() < 0.5 else Op.IOTA, arg, (), dtype, shape, device)
    count = int(rng.choice([1, 1, 1, 2, 2, 3, 5]))
    srcs = tuple(pool[rng.integers(len(pool))] for _ in range(count))  # shared, repeated
    if kind < 0.25:
        custom: Custom = Keyed(("sort", int(rng.integers(3)))) if kind < 0.2 else Computed(count)
        return Node(Op.CUSTOM, custom, srcs, dtype, shape, device)
    if kind < 0.27:  # a scalar with sources: a leaf all the same
        return Node(Op.SCALAR, 1.0, srcs, dtype, (), device)
    return Node(OPS[rng.integers(len(OPS))], arg, srcs, dtype, shape, device)


def random_graph(rng: np.random.Generator, leaves: list[Node]) -> list[Node]:
    """Targets (repeated, some of them leaves) of a random graph over ``leaves``."""
    pool = list(leaves)
    for _ in range(int(rng.integers(1, 40))):
        pool.append(random_node(rng, pool))
    picks = rng.integers(len(pool), size=rng.integers(1, 6))
    return [pool[-1], *(pool[i] for i in picks)]


def test_random_graphs_have_the_same_key_and_leaves(native: Structure) -> None:
    rng = np.random.default_rng(11)
    leaves = realized_leaves(zyx.device("host"))
    for _ in range(2000):
        targets = random_graph(rng, leaves)
        assert_same(native, targets)
        assert_same(native, tuple(targets))


def test_a_custom_key_is_read_as_often_as_the_python_walk_reads_it(native: Structure) -> None:
    computed = Computed(2)
    leaf = realized_leaves(zyx.device("host"))[0]
    node = Node(Op.CUSTOM, computed, (leaf, leaf), DType.F32, (6,), DEVICES[0])
    shared = Node(Op.UNARY, None, (node,), DType.F32, (6,), DEVICES[0])
    targets = [Node(Op.BINARY, "add", (shared, node), DType.F32, (6,), DEVICES[0])]
    structure(targets)
    assert computed.reads == 1
    native(targets)
    assert computed.reads == 2


def test_long_chains_and_wide_nodes(native: Structure) -> None:
    """Past every array the C walk keeps on its stack: a chain of 20000 ops (no recursion)
    and a node of 300 sources."""
    leaves = realized_leaves(zyx.device("host"))
    node = leaves[0]
    for i in range(20000):
        node = Node(Op.UNARY, i % 7, (node,), DType.F32, (6,), DEVICES[0])
    wide = Node(Op.CUSTOM, Keyed("cat"), tuple(leaves * 100), DType.F32, (6,), DEVICES[1])
    distinct = [Node(Op.CAST, i, (leaves[1],), DType.F16, (2, 3), DEVICES[2]) for i in range(300)]
    many = Node(Op.CUSTOM, Keyed("many"), tuple(distinct), DType.F16, (2, 3), DEVICES[2])
    assert_same(native, [node, wide, many, node])


# ---- graphs through the array API ------------------------------------------------------


def _unary(t: Tensor) -> Tensor:
    return zyx.exp(t) if t.dtype == zyx.float32 else -t


STEPS: tuple[Callable[[Tensor, Tensor], Tensor], ...] = (
    lambda t, u: t + u,
    lambda t, u: t * 2.5,
    lambda t, u: _unary(t),
    lambda t, u: zyx.matrix_transpose(t),
    lambda t, u: t[::-1, 1:] if t.shape[1] > 1 else t,
    lambda t, u: zyx.sum(t, axis=0, keepdims=True) + u,
    lambda t, u: t @ u,
    lambda t, u: zyx.sort(t, axis=-1),
    lambda t, u: zyx.cumulative_sum(t, axis=1),
    lambda t, u: zyx.where(t > 0, t, 0.0),
    lambda t, u: zyx.reshape(t, (-1,))[: t.shape[0] * t.shape[1]].reshape(t.shape),
)


def test_random_array_programs_have_the_same_key_and_leaves(native: Structure) -> None:
    """Programs of the namespace's ops (views, reductions, matmul, custom sorts and scans,
    Python scalars), some of their values realized on the way, targets shared."""
    rng = np.random.default_rng(5)
    device = zyx.device("host")
    for _ in range(60):
        n = int(rng.integers(2, 5))
        values = [zyx.asarray(rng.standard_normal((n, n), dtype=np.float32), device=device)]
        for _ in range(int(rng.integers(1, 12))):
            t, u = (values[rng.integers(len(values))] for _ in range(2))
            step = STEPS[rng.integers(len(STEPS))]
            values.append(step(t, u) if t.shape == u.shape == (n, n) else t + 1.0)
            if rng.random() < 0.15:
                zyx.realize(values[-1])
        targets = [values[i].node for i in rng.integers(len(values), size=rng.integers(1, 4))]
        assert_same(native, targets)


# ---- what the C walk hands to the Python walk, and what raises --------------------------


class Sub(Node):
    __slots__ = ()


HANDED = "handed to the Python walk"


@pytest.fixture(scope="module")
def probe() -> Structure:
    """The C walk built under a name of its own, whose Python walk is a stand-in that says
    it was handed the call."""
    name = "_zyx_structure_probe"
    source = resources.files("zyx.graph").joinpath("structure.c").read_text()
    module = zyx_native.load(name, source.replace("_zyx_structure", name), prelude=("tracker",))
    if module is None:
        pytest.skip("no native structure here (no C compiler, no Python.h, or ZYX_NATIVE=0)")
    module.configure(Node, Op.SCALAR, Op.CUSTOM, lambda targets: (HANDED, targets))
    walk: Structure = module.structure
    return walk


def unusual_graphs() -> list[Any]:
    """Targets the C walk does not take: a subclass of ``Node``, sources in a list, targets
    in a deque, a field unset, cycles (which the API cannot make)."""
    leaves = realized_leaves(zyx.device("host"))
    top = Node(Op.BINARY, "add", (leaves[0], leaves[2]), DType.F32, (6,), DEVICES[0])
    sub = Sub(Op.UNARY, None, (leaves[0],), DType.F32, (6,), DEVICES[0])
    listed = Node(Op.BINARY, "mul", [leaves[0], top], DType.F32, (6,), DEVICES[0])  # type: ignore[arg-type]
    unset = Node.__new__(Node)
    unset.op, unset.arg, unset.srcs, unset.buffer = Op.UNARY, None, (leaves[0],), None
    itself = Node(Op.UNARY, None, (), DType.F32, (6,), DEVICES[0])
    itself.srcs = (itself,)
    other = Node(Op.UNARY, None, (), DType.F32, (6,), DEVICES[0])
    around = Node(Op.BINARY, "add", (leaves[0], other), DType.F32, (6,), DEVICES[0])
    other.srcs = (around,)
    return [[sub], [top, sub], [listed], deque([top, leaves[1]]), [top, unset], [itself],
            [top, around]]  # fmt: skip


def test_unusual_graphs_go_to_the_python_walk(probe: Structure) -> None:
    for targets in unusual_graphs():
        assert probe(targets) == (HANDED, targets)
    leaves = realized_leaves(zyx.device("host"))
    usual = [Node(Op.BINARY, "add", (leaves[0], leaves[2]), DType.F32, (6,), DEVICES[0])]
    assert probe(usual) == structure(usual)


def test_unusual_graphs_have_the_python_walks_key(native: Structure) -> None:
    for targets in unusual_graphs()[:4]:  # the rest raise or never end in Python
        assert_same(native, targets)


def test_what_raises_in_the_python_walk_raises_alike(native: Structure) -> None:
    leaves = realized_leaves(zyx.device("host"))

    class Broken(Custom):
        @property
        def key(self) -> Hashable:  # type: ignore[override]
            raise LookupError("no key")

    broken = Node(Op.CUSTOM, Broken(), (leaves[0],), DType.F32, (6,), DEVICES[0])
    unset = Node.__new__(Node)
    unset.op, unset.arg, unset.srcs, unset.buffer = Op.UNARY, None, (leaves[0],), None
    before = [sys.getrefcount(n) for n in leaves]
    for walk in (structure, native):
        for _ in range(100):
            with pytest.raises(LookupError, match="no key"):
                walk([Node(Op.UNARY, None, (broken,), DType.F32, (6,), DEVICES[0])])
            with pytest.raises(AttributeError):
                walk([unset])
    assert [sys.getrefcount(n) for n in leaves] == before


def test_a_key_that_changes_the_graph_reads_as_the_python_walk_does(native: Structure) -> None:
    """A custom key that drops sources of nodes still to come: both walks hold what they
    read, and read each node's sources when they make its entry."""
    leaves = realized_leaves(zyx.device("host"))

    def graph() -> list[Node]:
        later = Node(Op.UNARY, None, (leaves[1],), DType.I64, (2, 3), DEVICES[0])

        class Dropping(Custom):
            @property
            def key(self) -> Hashable:  # type: ignore[override]
                later.srcs = ()
                return "dropping"

        first = Node(Op.CUSTOM, Dropping(), (leaves[0],), DType.F32, (6,), DEVICES[0])
        return [first, Node(Op.CAST, None, (later,), DType.F32, (2, 3), DEVICES[0])]

    key, leaves_seen = structure(graph())
    got_key, got_leaves = native(graph())
    assert same_items(got_key, key) and got_leaves == leaves_seen


def test_no_reference_is_leaked(native: Structure) -> None:
    rng = np.random.default_rng(2)
    leaves = realized_leaves(zyx.device("host"))
    graphs = [random_graph(rng, leaves) for _ in range(20)]
    nodes = {id(n): n for g in graphs for n in g} | {id(n): n for n in leaves}
    watched = [*nodes.values(), *DTYPES, *ARGS, Op.SCALAR, Op.CUSTOM]
    for targets in graphs:  # first calls: whatever they cache is made
        native(targets)
    before = [sys.getrefcount(o) for o in watched]
    for _ in range(50):
        for targets in graphs:
            native(targets)
    assert [sys.getrefcount(o) for o in watched] == before


# ---- the runtime, with and without native code -----------------------------------------


def test_the_runtime_walks_in_c_where_it_can(native: Structure) -> None:
    assert type(native).__name__ == "builtin_function_or_method"
    assert fastest() is native
