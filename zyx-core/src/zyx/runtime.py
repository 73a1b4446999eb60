"""The runtime: realizing lazy nodes through cached execution plans.

``realize(nodes)`` gives each node a buffer. The unrealized graph below them is reduced
to its *structure* (ops, dtypes, shapes, views, devices; not the data) and its *leaves*
(the realized buffers and the Python scalars it reads). A structure seen before finds
its ``ExecPlan`` in the cache: binding the leaves and launching is all that happens. A
new one is scheduled (``zyx.graph.schedule``), lowered (``zyx.graph.lower``), compiled
(each kernel once per device: the IR is shape-generic, so the compile cache serves
every shape of a structure), and cached.

A plan is a flat list of steps over buffer slots: allocate, launch, copy, release.
Intermediates are released after their last reader; targets keep theirs. Where
``zyx.native`` builds them, the structure walk (``graph/structure.c``) and a plan's run
(``runner.c``) are C; the Python ones here and in ``graph/structure.py`` are their spec
and run wherever C does not (``ZYX_NATIVE=0``).

One lock serialises plans, pool calls and the caches: every call is safe from any
thread, and a node realized by one thread is a leaf for the next.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Hashable, Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, fields, replace
from functools import cache, partial
from importlib import resources
from math import prod
from types import ModuleType
from typing import TYPE_CHECKING, Any

from zyx import native, race, search
from zyx.allocator import allocator
from zyx.backend import Buffer, Device, Program
from zyx.dtypes import DType
from zyx.graph import claims
from zyx.graph.claims import Claim
from zyx.graph.lower import MAP_LOCAL, KernelSpec, preserves_flat
from zyx.graph.nodes import Custom, Node, Op, leaf
from zyx.graph.schedule import Graph, schedule
from zyx.graph.structure import fastest, structure
from zyx.graph.views import View

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("zyx.sched")

LONG_ROW = 8192
"""Reduced elements per row from which a work-group per row gets 1024 work-items."""

PLAN_CACHE_SIZE = 1024
"""Plans kept, least recently used dropped first."""


@dataclass
class Stats:
    """Counters of what the runtime did since the process started (``zyx.stats()``).
    Subtract two snapshots to see what one piece of code did."""

    realizes: int = 0
    """Calls that had something to compute."""
    plans_built: int = 0
    """Realizes that scheduled, lowered and compiled (plan cache misses)."""
    plans_reused: int = 0
    kernels_scheduled: int = 0
    """Kernels in the plans built."""
    kernels_compiled: int = 0
    """Kernels compiled (compile cache misses)."""
    launches: int = 0
    """Kernels run (the timed runs of claim races not counted)."""
    copies: int = 0
    """Copies between devices."""
    claims_offered: int = 0
    """Claims plugins made (``zyx_match_graph``) in the plans built."""
    claim_races: int = 0
    """Claims timed against generated kernels (once per claim key and device)."""
    claims_taken: int = 0
    """Claims that run in place of generated kernels in the plans built."""
    searches: int = 0
    """Kernels whose variants were timed (``zyx.search``: tuning cache misses)."""
    replays: int = 0
    """Batches ``zyx.jit`` replayed (their kernels count in ``launches``)."""

    def __sub__(self, other: Stats) -> Stats:
        return Stats(*(getattr(self, f.name) - getattr(other, f.name) for f in fields(self)))


_stats = Stats()


@dataclass(frozen=True)
class Launch:
    device: Device
    program: Program
    args: tuple[tuple[str, Any], ...]
    """Per param: ``("slot", k)``, ``("leaf", i)`` (a buffer or scalar) or ``("value", n)``."""


@dataclass(frozen=True)
class Alloc:
    slot: int
    device: Device
    nbytes: int


@dataclass(frozen=True)
class Copy:
    slot: int
    source: tuple[str, int]


@dataclass(frozen=True)
class Release:
    slot: int


Step = Launch | Alloc | Copy | Release


@dataclass
class ExecPlan:
    steps: list[Step]
    slots: int
    targets: list[tuple[int, int]]
    """Per target: its position among the targets, and the slot holding its buffer."""
    kernels: int
    """Generated kernels among its launches."""
    used: int = field(default=0, compare=False)
    """When the runtime last ran it (a count of runs): what its cache drops first."""
    ops: list[tuple[Any, ...]] = field(init=False, repr=False, compare=False)
    """``steps`` as ``_run`` takes them (``_op``): a cached plan runs on every realize, and
    looking up each launch argument's kind there cost as much as the rest of the run."""
    native: Any = field(init=False, repr=False, compare=False)
    """The same steps prepared for ``runner.c`` (``_prepared``), which ``run`` calls; ``None``
    where that is not built, or the plan copies between devices."""

    def __post_init__(self) -> None:
        self.ops = [_op(step) for step in self.steps]
        self.native = _prepared(self.ops, self.slots, self.targets)

    def run(self, leaves: Sequence[Node], targets: Sequence[Node]) -> None:
        native = self.native
        if native is not None:
            native.run(leaves, targets)
            return
        bufs: list[Buffer | None] = [None] * self.slots
        try:
            self._run(leaves, bufs, timed=False)
            for position, slot in self.targets:
                buf = bufs[slot]
                bufs[slot] = None
                assert buf is not None
                targets[position].realize_with(buf)
        finally:  # a failed launch leaves no buffer behind
            _free(bufs)

    def time(self, leaves: Sequence[Node]) -> int:
        """Run the plan with each launch alone (``Device.launch_timed``); the launches'
        nanoseconds in total. Its results are dropped."""
        bufs: list[Buffer | None] = [None] * self.slots
        try:
            return self._run(leaves, bufs, timed=True)
        finally:
            _free(bufs)

    def _run(self, leaves: Sequence[Node], bufs: list[Buffer | None], timed: bool) -> int:
        total = 0
        for code, step, fixed, from_leaves, from_slots in self.ops:
            if code is _ALLOC:
                bufs[step.slot] = allocator.allocate(fixed, step.nbytes)
            elif code is _LAUNCH:
                args = fixed.copy()
                for i, j in from_leaves:
                    leaf = leaves[j]
                    args[i] = leaf.arg if leaf.buffer is None else leaf.buffer
                for i, slot in from_slots:
                    args[i] = bufs[slot]
                if timed:
                    total += step.device.launch_timed(step.program, args)
                else:
                    step.device.launch(step.program, args)
                    _stats.launches += 1
            elif code is _RELEASE:
                buf = bufs[step.slot]
                bufs[step.slot] = None
                assert buf is not None
                allocator.free(buf)
            else:
                src = _arg(step.source, bufs, leaves)
                dst = bufs[step.slot]
                assert isinstance(src, Buffer) and dst is not None
                dst.pool.copy_from(src.pool, src, dst)
                _stats.copies += 1
        return total


_ALLOC, _LAUNCH, _RELEASE, _COPY = "alloc", "launch", "release", "copy"


def _op(step: Step) -> tuple[Any, ...]:
    """``step`` as ``ExecPlan._run`` takes it: its kind, itself, and for a launch its
    arguments with the numbers in place (``fixed``, copied per run) and the positions
    that take a leaf's value and a slot's buffer; for an allocation its pool."""
    if isinstance(step, Launch):
        fixed = [value if kind == "value" else None for kind, value in step.args]
        from_leaves = tuple((i, v) for i, (kind, v) in enumerate(step.args) if kind == "leaf")
        from_slots = tuple((i, v) for i, (kind, v) in enumerate(step.args) if kind == "slot")
        return (_LAUNCH, step, fixed, from_leaves, from_slots)
    if isinstance(step, Alloc):
        return (_ALLOC, step, step.device.pool, (), ())
    return (_RELEASE if isinstance(step, Release) else _COPY, step, None, (), ())


def _prepared(ops: list[tuple[Any, ...]], slots: int, targets: list[tuple[int, int]]) -> Any:
    """``ops`` as ``runner.c``'s ``Plan``, where it is built and they copy nothing (its op
    codes: 0 allocate, 1 launch, 2 release)."""
    runner = _runner
    if runner is None or any(op[0] is _COPY for op in ops):
        return None
    prepared: list[tuple[Any, ...]] = []
    for code, step, fixed, from_leaves, from_slots in ops:
        if code is _ALLOC:
            prepared.append((0, step.slot, fixed, step.nbytes))
        elif code is _LAUNCH:
            prepared.append((1, step.device, step.program, fixed, from_leaves, from_slots))
        else:
            prepared.append((2, step.slot))
    return runner.Plan(prepared, slots, tuple(targets))


def _load_runner() -> ModuleType | None:
    """``runner.c`` (``ExecPlan.run`` in C) where ``zyx.native`` builds it."""
    source = resources.files("zyx").joinpath("runner.c").read_text()
    module = native.load("_zyx_runner", source)
    if module is not None:
        module.configure(allocator.allocate, allocator.free, _stats)
    return module


def _free(bufs: list[Buffer | None]) -> None:
    for buf in bufs:
        if buf is not None:
            allocator.free(buf)


def _arg(ref: tuple[str, Any], bufs: list[Buffer | None], leaves: Sequence[Node]) -> Any:
    kind, value = ref
    if kind == "slot":
        return bufs[value]
    if kind == "leaf":
        leaf = leaves[value]
        return leaf.buffer if leaf.buffer is not None else leaf.arg
    return value


@dataclass
class Capture:
    """What one thread realized while ``zyx.jit`` captured a function (``capturing``)."""

    plans: list[tuple[ExecPlan, list[Node], list[Node]]] = field(default_factory=list)
    """Each plan run, in order, with the leaves it bound and the targets it realized."""
    reads: int = 0
    """Values read back to Python (``Runtime.read``): what a replay could not repeat."""


capturing: ContextVar[Capture | None] = ContextVar("capturing", default=None)
"""The ``Capture`` of the function ``zyx.jit`` is running in this thread, if any."""


class Runtime:
    """The plan cache and the compile cache, used under ``allocator.held`` (the lock
    around every pool call too)."""

    def __init__(self) -> None:
        self.plans: dict[Hashable, ExecPlan] = {}
        """Least recently used dropped first (by ``ExecPlan.used``: an ``OrderedDict``'s
        ``move_to_end`` hashed each hit's key a second time, a tenth of a realize)."""
        self._uses = itertools.count()
        self._last: tuple[Hashable, ExecPlan | None] = ((), None)
        """The last plan run and its key: a program realizing the same computation again
        and again finds it by comparing keys, which stops at the first entry that differs
        and passes those that are the same objects, where a lookup first hashes every entry
        (a key holds dozens, hashed anew each realize: a third of a cached realize's
        own host time, after the walk that makes the key)."""
        self.programs: dict[tuple[int, Hashable], Program] = {}
        self.choices: dict[Hashable, int | None] = {}
        """Per group of claims of one node (their keys) and device: the claim that won its
        race (its index in the group), or ``None``: the generated kernels."""

    def realize(self, nodes: Iterable[Node]) -> None:
        with allocator.held:
            self._realize([n for n in nodes if n.buffer is None])

    def read(self, node: Node) -> np.ndarray[Any, Any]:
        """``node``'s value in a new numpy array (realizing it first)."""
        capture = capturing.get()
        if capture is not None:
            capture.reads += 1
        with allocator.held:
            if node.buffer is None:
                self._realize([node])
            out: np.ndarray[Any, Any] = _numpy().empty(node.shape, dtype=node.dtype.numpy)
            buf = node.buffer
            if out.nbytes:  # numpy's, not the node's properties: each is a Python call
                assert buf is not None
                buf.pool.read(buf, out)
            return out

    def upload(self, data: np.ndarray[Any, Any], dtype: DType, device: Device) -> Node:
        """A realized node holding a copy of the contiguous host array ``data``."""
        with allocator.held:
            buf = allocator.allocate(device.pool, max(data.nbytes, 1))
            try:
                if data.nbytes:
                    device.pool.write(buf, data)
            except BaseException:
                allocator.free(buf)
                raise
        return leaf(buf, dtype, tuple(data.shape), device)

    def _realize(self, nodes: list[Node]) -> None:
        targets = nodes if len(nodes) < 2 else list({id(n): n for n in nodes}.values())
        if not targets:
            return
        _stats.realizes += 1
        for target in targets:
            if target.op is _SCALAR:
                _as_view(target)
        key, leaves = _structure(targets)
        last = self._last
        if last[0] == key:
            plan = last[1]
        else:
            plan = self.plans.get(key)
        if plan is None:
            plan = self._plan(targets, leaves)
            _stats.kernels_scheduled += plan.kernels
            plan.used = next(self._uses)
            plans = self.plans
            plans[key] = plan
            if len(plans) > PLAN_CACHE_SIZE:
                del plans[min(plans, key=lambda k: plans[k].used)]
            _stats.plans_built += 1
        else:
            plan.used = next(self._uses)
            _stats.plans_reused += 1
        self._last = (key, plan)
        plan.run(leaves, targets)
        capture = capturing.get()
        if capture is not None:
            capture.plans.append((plan, leaves, targets))

    def _plan(self, targets: list[Node], leaves: list[Node]) -> ExecPlan:
        graph = Graph(targets)
        offered = claims.offers(graph)
        _stats.claims_offered += len(offered)
        alternatives: dict[int, list[Claim]] = {}
        for claim in offered:
            alternatives.setdefault(id(claim.output), []).append(claim)
        position = {id(node): i for i, node in enumerate(graph.order)}
        taken: list[Claim] = []
        for group in sorted(alternatives.values(), key=lambda g: position[id(g[0].output)]):
            chosen = self._take(group, claims.within(group[0], taken))
            if chosen is not None:
                inside = claims.within(chosen, taken)
                taken = [c for c in taken if c not in inside] + [chosen]
        _stats.claims_taken += len(taken)
        if taken:
            graph = Graph(claims.rewrite(targets, taken))
        return self._generated(graph, leaves)

    def _generated(self, graph: Graph, leaves: list[Node], tuned: bool = True) -> ExecPlan:
        """The plan of the generated kernels; ``tuned``: each kernel's variant searched
        (``zyx.search``), else its default."""
        sched = schedule(graph)
        return _Planner(self, graph, sched.boundaries, leaves, tuned).build(sched.steps)

    def _take(self, group: list[Claim], inner: list[Claim]) -> Claim | None:
        """The claim of one node's ``group`` that runs in place of its generated kernels and
        the ``inner`` claims taken inside its subgraph, or ``None``: the fastest of them all
        (``zyx.race``), chosen once per group, inner claims and device."""
        keys = tuple((c.plugin, c.key) for c in group)
        key = (keys, tuple((c.plugin, c.key) for c in inner), id(group[0].output.device))
        if key not in self.choices:
            winner, raced = race.choose(group, self._timer, inner=inner)
            self.choices[key] = None if winner is None else group.index(winner)
            _stats.claim_races += raced
        index = self.choices[key]
        return None if index is None else group[index]

    def _timer(self, node: Node) -> search.Timer:
        """A timer of the plan of ``node``'s generated kernels at their default variants: a
        search of the generic kernels a claim would replace (a generic matmul runs for
        seconds) costs more than the race, for kernels thrown away where the claim wins;
        where it loses, the plan built then searches them."""
        _, leaves = structure([node])
        plan = self._generated(Graph([node]), leaves, tuned=False)
        return partial(plan.time, leaves)

    def compile(self, device: Device, kernel: Any) -> Program:
        key = (id(device), kernel.ops)
        program = self.programs.get(key)
        if program is None:
            program = device.compile(kernel)
            self.programs[key] = program
            _stats.kernels_compiled += 1
        return program


@cache
def _numpy() -> ModuleType:
    """numpy, imported on first use (``import zyx.runtime`` stays without it): an import
    statement costs 0.7 µs each time it runs, a tenth of reading a small result."""
    import numpy

    return numpy


def _as_view(node: Node) -> None:
    """Turn a Python number about to be realized as an array (``full((), 2.5)``, ``any``
    of nothing) into an identity view of it: a kernel writes the number into the node's
    buffer, where as a leaf it would be a kernel's argument, not its output."""
    number = Node(node.op, node.arg, (), node.dtype, node.shape, node.device)
    node.op, node.arg, node.srcs = Op.VIEW, View.identity(node.shape), (number,)


_SCALAR = Op.SCALAR
"""For ``_realize``: reading an enum's member off its class runs Python code."""

_structure = fastest()
_runner = _load_runner()
"""``structure`` and ``ExecPlan.run``, in C where they are built. Loaded with this module
(the first process on a machine builds them here), not on the first realize, which finds
what it needs ready."""


class _Planner:
    """Turns a schedule into an ``ExecPlan``: slots, lowered and compiled kernels."""

    def __init__(
        self,
        runtime: Runtime,
        graph: Graph,
        boundaries: set[int],
        leaves: list[Node],
        tuned: bool = True,
    ) -> None:
        self.runtime = runtime
        self.tuned = tuned
        self.graph = graph
        self.boundaries = boundaries
        self.slots: dict[int, int] = {}
        self.count = 0
        self.leaves = {id(n): i for i, n in enumerate(leaves)}
        self.steps: list[Step] = []
        self.kernels = 0
        self.shared: set[int] = set()
        """Slots that a reshape shares with its source (``alias``)."""

    def ref(self, node: Node) -> tuple[str, int]:
        found = self.leaves.get(id(node))
        if found is not None:
            return ("leaf", found)
        return ("slot", self.slots[id(node)])

    def new_slot(self, device: Device, nbytes: int) -> int:
        """A slot for a new buffer of ``nbytes``, allocated at this point of the plan."""
        slot = self.count
        self.count += 1
        self.steps.append(Alloc(slot, device, max(nbytes, 1)))
        return slot

    def output(self, node: Node) -> int:
        slot = self.new_slot(node.device, node.nbytes)
        self.slots[id(node)] = slot
        return slot

    def build(self, steps: list[KernelSpec | Node]) -> ExecPlan:
        for step in steps:
            if isinstance(step, KernelSpec):
                self.kernel(step)
            elif step.op is Op.COPY:
                slot = self.output(step)
                if step.size:
                    self.steps.append(Copy(slot, self.ref(step.srcs[0])))
            else:
                self.custom(step)
        self.release_dead()
        targets = [(i, self.slots[id(t)]) for i, t in enumerate(self.graph.targets)]
        return ExecPlan(self.steps, self.count, targets, self.kernels)

    def kernel(self, spec: KernelSpec) -> None:
        out = spec.output
        if self.alias(spec):
            return
        self.output(out)
        if out.size == 0:
            return
        device = out.device
        boundaries = self.boundaries

        def is_input(n: Node) -> bool:
            return n is not out and (n.realized or id(n) in boundaries)

        compile = partial(self.runtime.compile, device)
        with search.Generated(spec, is_input, local_size(device, spec), compile) as space:
            variant, searched = search.choose(space) if self.tuned else (space.variants()[0], False)
            lowered = space.lowered(variant)
        _stats.searches += searched
        log.debug("kernel %s: %s", lowered.kernel.name, out)
        self.kernels += 1
        program = self.runtime.compile(device, lowered.kernel)
        args = tuple(self.ref(a) if isinstance(a, Node) else ("value", a) for a in lowered.args)
        self.steps.append(Launch(device, program, args))

    def alias(self, spec: KernelSpec) -> bool:
        """Give a kernel that only reshapes a buffer of this plan that buffer's slot: a
        buffer is contiguous, so a reshape of it, or a view that only adds or drops size-1
        dims, is the same bytes (a claim's output, made in the claim's shape, seen in the
        target's). Not for a source that is a target or shares its slot already: each
        target owns its buffer."""
        out = spec.output
        reshape = out.op is Op.RESHAPE or out.op is Op.VIEW and preserves_flat(out.arg)
        if spec.passes or not reshape:
            return False
        src = out.srcs[0]
        slot = self.slots.get(id(src))
        if slot is None or slot in self.shared or any(t is src for t in self.graph.targets):
            return False
        self.slots[id(out)] = slot
        self.shared.add(slot)
        return True

    def custom(self, node: Node) -> None:
        """A custom op's launches, on its own scratch buffers (released after their last
        reader, as intermediates are)."""
        slot = self.output(node)
        op: Custom = node.arg
        scratch = [self.new_slot(node.device, n) for n in op.scratch(node)]
        for launch in op.launches(node.device, node) if node.size else ():
            kernel = launch.kernel
            program = (
                kernel if isinstance(kernel, Program) else self.runtime.compile(node.device, kernel)
            )
            args = tuple(self._custom_arg(a, node, slot, scratch) for a in launch.args)
            self.steps.append(Launch(node.device, program, args))

    def _custom_arg(self, arg: Any, node: Node, out: int, scratch: list[int]) -> tuple[str, Any]:
        if not isinstance(arg, tuple):
            return ("value", arg)
        kind, i = arg
        if kind == "src":
            return self.ref(node.srcs[i])
        if kind == "out":
            return ("slot", out)
        return ("slot", scratch[i])

    def release_dead(self) -> None:
        """Release each intermediate after the last step that reads it."""
        targets = {self.slots[id(t)] for t in self.graph.targets}
        last: dict[int, int] = {}
        for i, step in enumerate(self.steps):
            refs = (
                step.args
                if isinstance(step, Launch)
                else [step.source]
                if isinstance(step, Copy)
                else []
            )
            for kind, value in refs:
                if kind == "slot":
                    last[value] = i
        steps: list[Step] = []
        for i, step in enumerate(self.steps):
            steps.append(step)
            steps.extend(Release(s) for s, at in last.items() if at == i and s not in targets)
        written = {s.slot for s in self.steps if isinstance(s, Alloc)}
        unread = written - set(last) - targets
        steps.extend(Release(s) for s in sorted(unread))
        self.steps = steps


def local_size(device: Device, spec: KernelSpec | None = None) -> int:
    """Work-items per group: a power of two, 256 (or the device's limit below it), and up to
    1024 for a work-group per row of many elements: fewer rows in flight keep each row's
    later passes in the cache."""
    wanted = MAP_LOCAL
    reduction = spec.reduction if spec is not None and spec.group else None
    if reduction is not None and prod(reduction[0][d] for d in reduction[1]) >= LONG_ROW:
        wanted = 1024
    limit = min(wanted, device.info.max_local_threads, device.info.max_local_work_dims[0])
    size = 1
    while size * 2 <= limit:
        size *= 2
    return size


runtime = Runtime()


def realize(*arrays: Any) -> None:
    """Compute every array of ``arrays`` now (in one plan: shared work runs once)."""
    try:
        nodes = [a.node for a in arrays]
    except AttributeError:
        kinds = ", ".join(type(a).__name__ for a in arrays)
        raise TypeError(f"realize takes zyx arrays, got {kinds}") from None
    runtime.realize(nodes)


def stats() -> Stats:
    """A snapshot of the runtime's counters (``Stats``)."""
    return replace(_stats)
