"""How a kernel's work-items run as loops on one CPU thread: the group body's schedule.

On the host a work-group is a loop over its work-items. A ``Barrier`` cannot stop one
iteration of that loop until the others arrive, so the group body is split at barriers
into *phases*, each a loop over all work-items of the group: every item finishes the
phase before any item starts the next, which is what the barrier promises.

What runs once per group rather than per work-item:

- group ranges, local memory (``Define`` with ``Storage.LOCAL``);
- loops that contain a barrier (their trip count must be the same for every work-item);
- pure ops (cast, unary, binary, where) at that level whose operands are group-uniform:
  hoisting them is what lets a barrier loop's trip count be computed, and saves work.

A phase that ends in a bounds check ``if (l0 + offset < limit)`` runs its items of axis 0
only up to ``limit - offset`` instead (see ``Guard``).

A per-item value or register ``Define`` used in a phase other than the one defining it is
*spilled*: it becomes an array with one entry per work-item of the group.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from zyx.errors import IRError
from zyx.ir.ops import (
    Barrier,
    Binary,
    BOp,
    Cast,
    Const,
    Define,
    EndIf,
    EndLoop,
    Fma,
    If,
    Kernel,
    Load,
    Loop,
    Param,
    Range,
    Ref,
    Scope,
    Storage,
    Store,
    Unary,
    Where,
)


@dataclass
class Phase:
    """Ops ``start..stop - 1`` run by each work-item of a group in turn, except those that
    are group-level (``Schedule.group_level``) and the local ranges (known in every phase)."""

    start: Ref
    stop: Ref
    nodes: list[Ref] = field(default_factory=list)
    """The top-level ops and blocks (by their opening op), in order."""
    guard: Guard | None = None


@dataclass(frozen=True)
class Guard:
    """The phase ends in ``If`` ``ref`` whose condition is ``l0 + offset < limit`` (``offset``
    and ``limit`` group-uniform, ``offset`` may be absent), and nothing before it has a
    side effect or a later use: the work-items of axis 0 can stop at ``limit - offset``
    and the ``If`` goes. This is the bounds check of elementwise kernels; without it, the
    compiler would need masked vector loads and stores, and often gives up."""

    ref: Ref
    offset: Ref | None
    limit: Ref


@dataclass
class GroupLoop:
    """A loop containing a barrier: runs once per group around its own steps."""

    ref: Ref
    steps: list[Step] = field(default_factory=list)


@dataclass(frozen=True)
class Hoisted:
    """A group-uniform pure op, computed once per group."""

    ref: Ref


Step: TypeAlias = "Phase | GroupLoop | Hoisted"

_PURE = (Cast, Unary, Binary, Fma, Where, Load)
"""Ops whose only effect is their value."""


@dataclass
class Schedule:
    """The group body: its steps in order, and which values are group-level or spilled."""

    steps: list[Step]
    group_level: frozenset[Ref]
    """Ops rendered outside the work-item loops (hoisted, group loops, ranges, local memory)."""
    spilled: frozenset[Ref]
    """Per-item values and register Defines that live in arrays of one entry per work-item."""


def schedule(kernel: Kernel) -> Schedule:
    """Split ``kernel``'s body into phases at barriers; see the module docstring."""
    return _Scheduler(kernel).run()


class _Scheduler:
    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.ops = kernel.ops
        self.ends = _matching_ends(kernel)
        self.barrier_loops = self._barrier_loops()
        self.uniform: set[Ref] = set()
        self.group_level: set[Ref] = set()
        self.phase_of: dict[Ref, int] = {}
        self.phases = 0

    def run(self) -> Schedule:
        for ref, op in enumerate(self.ops):
            if isinstance(op, (Param, Const)) or _is_group_range(op):
                self.uniform.add(ref)
            if _is_group_range(op) or (isinstance(op, Define) and op.storage is Storage.LOCAL):
                self.group_level.add(ref)
        steps = self.scope(0, len(self.ops))
        spilled = self.spills()
        for phase in _phases(steps):
            phase.guard = self.guard(phase, spilled)
        return Schedule(steps, frozenset(self.group_level), frozenset(spilled))

    def _barrier_loops(self) -> set[Ref]:
        """Loops with a barrier anywhere inside (the verifier keeps barriers out of Ifs)."""
        loops: set[Ref] = set()
        open_loops: list[Ref] = []
        for ref, op in enumerate(self.ops):
            if isinstance(op, Loop):
                open_loops.append(ref)
            elif isinstance(op, EndLoop):
                open_loops.pop()
            elif isinstance(op, Barrier):
                loops.update(open_loops)
        return loops

    def scope(self, start: Ref, stop: Ref) -> list[Step]:
        """The steps of ``ops[start:stop]``, a group-level scope."""
        steps: list[Step] = []
        phase: Phase | None = None
        ref = start
        while ref < stop:
            op = self.ops[ref]
            if ref in self.group_level or isinstance(op, (Param, Const, Range)):
                ref += 1
            elif isinstance(op, Barrier):
                phase, ref = None, ref + 1
            elif ref in self.barrier_loops:
                steps.append(self.group_loop(ref))
                phase, ref = None, self.ends[ref] + 1
            elif self.hoistable(ref):
                self.uniform.add(ref)
                self.group_level.add(ref)
                # Before the open phase, which may use it: its operands are all known by then.
                steps.insert(len(steps) - 1 if phase else len(steps), Hoisted(ref))
                ref += 1
            else:
                if phase is None:
                    phase = Phase(ref, ref)
                    self.phases += 1
                    steps.append(phase)
                end = self.ends.get(ref, ref) + 1
                for inner in range(ref, end):
                    self.phase_of[inner] = self.phases
                phase.nodes.append(ref)
                phase.stop, ref = end, end
        return steps

    def group_loop(self, ref: Ref) -> GroupLoop:
        op = self.ops[ref]
        assert isinstance(op, Loop)
        if op.size not in self.uniform:
            raise IRError(
                f"kernel {self.kernel.name!r}, op %{ref}: a loop containing a barrier needs a "
                f"trip count that is the same for every work-item of a group, and %{op.size} "
                "depends on the work-item"
            )
        self.uniform.add(ref)
        self.group_level.add(ref)
        return GroupLoop(ref, self.scope(ref + 1, self.ends[ref]))

    def hoistable(self, ref: Ref) -> bool:
        op = self.ops[ref]
        if isinstance(op, Cast | Unary):
            return op.x in self.uniform
        if isinstance(op, Binary | Fma | Where):
            return all(ref in self.uniform for ref in _operands(op))
        return False

    def guard(self, phase: Phase, spilled: set[Ref]) -> Guard | None:
        """The phase's bounds check, if it has the form ``Guard`` describes."""
        *before, last = phase.nodes
        op = self.ops[last]
        if not isinstance(op, If) or any(
            r in spilled or not isinstance(self.ops[r], _PURE) for r in before
        ):
            return None
        cond = self.ops[op.cond]
        if not (isinstance(cond, Binary) and cond.op is BOp.CMPLT and cond.b in self.uniform):
            return None
        if self.is_item_axis0(cond.a):
            return Guard(last, None, cond.b)
        index = self.ops[cond.a]
        if isinstance(index, Binary) and index.op is BOp.ADD:
            for item, offset in ((index.a, index.b), (index.b, index.a)):
                if self.is_item_axis0(item) and offset in self.uniform:
                    return Guard(last, offset, cond.b)
        return None

    def is_item_axis0(self, ref: Ref) -> bool:
        op = self.ops[ref]
        return isinstance(op, Range) and op.scope is Scope.LOCAL and op.axis == 0

    def spills(self) -> set[Ref]:
        spilled: set[Ref] = set()
        for user, op in enumerate(self.ops):
            phase = self.phase_of.get(user)
            for used in _operands(op):
                home = self.phase_of.get(used)
                if home is not None and phase is not None and home != phase:
                    spilled.add(used)
        return spilled


def _phases(steps: list[Step]) -> list[Phase]:
    """Every phase in ``steps``, also inside group loops."""
    found: list[Phase] = []
    for step in steps:
        if isinstance(step, Phase):
            found.append(step)
        elif isinstance(step, GroupLoop):
            found += _phases(step.steps)
    return found


def _is_group_range(op: object) -> bool:
    return isinstance(op, Range) and op.scope is Scope.GROUP


def _matching_ends(kernel: Kernel) -> dict[Ref, Ref]:
    """Each Loop or If to its EndLoop or EndIf."""
    ends: dict[Ref, Ref] = {}
    open_scopes: list[Ref] = []
    for ref, op in enumerate(kernel.ops):
        if isinstance(op, (Loop, If)):
            open_scopes.append(ref)
        elif isinstance(op, (EndLoop, EndIf)):
            ends[open_scopes.pop()] = ref
    return ends


def _operands(op: object) -> tuple[Ref, ...]:
    if isinstance(op, Load):
        return (op.src, op.index)
    if isinstance(op, Store):
        return (op.dst, op.index, op.value)
    if isinstance(op, Cast | Unary):
        return (op.x,)
    if isinstance(op, Binary):
        return (op.a, op.b)
    if isinstance(op, Fma):
        return (op.a, op.b, op.c)
    if isinstance(op, Where):
        return (op.cond, op.a, op.b)
    if isinstance(op, Loop):
        return (op.size,)
    if isinstance(op, If):
        return (op.cond,)
    return ()
