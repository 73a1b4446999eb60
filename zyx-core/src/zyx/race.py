"""A node's claims and the generated kernels they would replace, as one kernel search.

Where several plugins (and core's own matmul, ``zyx.graph.matmul``) claim the same node,
they and the generated kernels of its subgraph are the variants of one ``search.Space``:
each claim by ``(plugin, key)``, in the order offered (the first is the default), then
``"generated"``: the generated kernels, with the claims already taken inside the node's
subgraph (``claims.within``; the runtime races a graph's nodes sources first), so that a
fused matmul and epilogue races the bare matmul's claim followed by a generated epilogue.
``search.choose`` times them as it times any kernel's variants and keeps the winner in the
tuning cache, on disk too, so a new process takes it untimed. Each variant is timed as the
plan of its subgraph over stand-in inputs (``ExecPlan.time``).

Two rules of the race are its own:

- every variant is timed however fast the first is (``min_time`` 0): a claim is a
  different program, not a launch setting, and the generated kernels may beat it even where
  both are fast;
- the generated kernels' run stops, lost, once it takes twice the fastest claim's time: a
  generic kernel may take seconds where a claim takes milliseconds.

A claim that fails to build or run is its plugin's fault: it drops out of the race, logged
as a warning on ``zyx.sched``, and the others run. A claim chosen without a race (autotune
off, or the tuning cache's winner) is built before it is taken, and one that fails to build
leaves its node to the generated kernels.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, TypeVar

from zyx import search
from zyx.allocator import allocator
from zyx.errors import BackendError, ErrorStatus
from zyx.graph import claims
from zyx.graph.claims import Claim
from zyx.graph.nodes import LEAVES, Node, leaf
from zyx.search import Timer

if TYPE_CHECKING:
    from zyx.backend import Device
    from zyx.config import AutotuneSection

log = logging.getLogger("zyx.sched")

GENERATED = "generated"
"""The variant of the generated kernels."""

LOST = 2
"""The generated kernels lose where a run of theirs takes this many times the fastest claim's."""

T = TypeVar("T")

TimerOf = Callable[[Node], Timer]
"""A timer of the plan of the generated kernels that compute a node (the runtime's)."""


class ClaimRace:
    """The claims of one node (``group``) and its generated kernels (``search.Space``)."""

    def __init__(
        self, group: Sequence[Claim], timer_of: TimerOf, inner: Sequence[Claim] = ()
    ) -> None:
        self.group = group
        self.timer_of = timer_of
        self.inner = inner
        """Claims taken inside the node's subgraph, which its generated alternative runs."""
        output = group[0].output
        self.device: Device = output.device
        self.name = f"claims of {output.op.value} {output.dtype.value} {output.shape}"
        self.fastest: int | None = None
        """The fastest time of a claim so far, in ns."""

    def key(self) -> str:
        inner = [(claim.plugin, claim.key) for claim in self.inner]
        return "claim race " + repr(self.variants()) + (f" over {inner!r}" if inner else "")

    def variants(self) -> list[Hashable]:
        return [(claim.plugin, claim.key) for claim in self.group] + [GENERATED]

    def timer(self, variant: Hashable) -> Timer:
        if variant == GENERATED:
            return self._generated()
        claim = self.group[self.variants().index(variant)]
        _, claimed = claims.subgraph(claim, [_standin(i) for i in claim.inputs])
        time = self._guarded(claim, lambda: self.timer_of(claimed))

        def run() -> int:
            ns = self._guarded(claim, time)
            self.fastest = ns if self.fastest is None else min(self.fastest, ns)
            return ns

        return run

    def _generated(self) -> Timer:
        claim = self.group[0]
        generated, _ = claims.subgraph(claim, [_standin(i) for i in claim.inputs], self.inner)
        time = self.timer_of(generated)

        def run() -> int:
            ns = time()
            if self.fastest is not None and ns > LOST * self.fastest:
                raise BackendError(
                    ErrorStatus.KERNEL_LAUNCH,
                    f"generated kernels took {ns} ns, over {LOST}x the fastest claim's",
                )
            return ns

        return run

    def _guarded(self, claim: Claim, call: Callable[[], T]) -> T:
        """``call()``; a failure is the claim's: logged, and raised as a ``BackendError``,
        which takes it out of the search."""
        try:
            return call()
        except Exception as error:  # noqa: BLE001 - the plugin's failure; the others run
            log.warning("claim %s of %s failed, it drops out: %s", claim.key, claim.plugin, error)
            if isinstance(error, BackendError):
                raise
            raise BackendError(ErrorStatus.KERNEL_LAUNCH, f"{claim.plugin}: {error}") from error


def choose(
    group: Sequence[Claim],
    timer_of: TimerOf,
    options: AutotuneSection | None = None,
    inner: Sequence[Claim] = (),
) -> tuple[Claim | None, bool]:
    """The claim of ``group`` to run in place of the generated kernels and ``inner`` (the
    claims taken inside its subgraph; ``None``: they run), and whether a race was run."""
    race = ClaimRace(group, timer_of, inner)
    options = search.settings() if options is None else options
    winner, raced = search.choose(race, options.model_copy(update={"min_time": 0.0}))
    if not raced and winner != GENERATED:
        try:  # chosen untimed (autotune off, or from the cache): built here, so that a
            race.timer(winner)  # claim that fails costs its plugin the node, not the realize
        except BackendError:
            winner = GENERATED
    log.debug("%s on %s: %r runs%s", race.name, race.device.name, winner,
              " (raced)" if raced else "")  # fmt: skip
    if winner == GENERATED:
        return None, raced
    return group[race.variants().index(winner)], raced


def _standin(node: Node) -> Node:
    """``node`` for timing: itself where it is a leaf, else a realized node of its shape
    holding values to time on (``search.fill_for_timing``)."""
    if node.realized or node.op in LEAVES:
        return node
    buf = allocator.allocate(node.device.pool, max(node.nbytes, 1))
    search.fill_for_timing(node.device.pool, buf, node.dtype)
    return leaf(buf, node.dtype, node.shape, node.device)
