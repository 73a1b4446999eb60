"""Kernel search: choosing among a kernel's variants by measured time.

What is searched is a ``Space``: the variants of one kernel (or of a few kernels that run
together), as plain hashable data with a stable ``repr``, the default first, and for each
a timer (built, bound to buffers, run alone). ``Generated`` is the space of a kernel the
scheduler emitted (its local size); any other source of kernels plugs in the same way: a
generated matmul's tiles (``timed`` over its launches), or a plugin's claim against the
generated kernels of its subgraph (variants such as ``"generated"`` and the claim's key,
each timer an ``ExecPlan.time``), so that they compete in one search and their winner
is cached like any other.

``choose(space)`` is what a plan build calls, once per kernel, as ``autotune`` says:

- off (``enabled`` false), one variant only, or a device that interprets its kernels
  (their times say nothing about compiled code): the default, nothing timed;
- a hit in the tuning cache (``zyx.tuning``; its key holds everything the result depends
  on): the cached winner, nothing timed;
- else a search: each variant compiled and timed with ``Device.launch_timed`` (one
  warm-up run, then the best of ``runs``), the default first; a default faster than
  ``min_time`` ends it there (nothing to win that a launch's overhead would not eat);
  variants not started when ``budget`` seconds have passed are not tried (one started
  runs to its end: a build cannot be cut short); a variant that fails to compile or run
  drops out (logged). The fastest, where it beats the default by ``MARGIN`` again when
  both are timed anew (``runs`` more runs each), wins and is cached (on disk where
  ``cache`` is on).
  Where no variant can be timed (memory for the timing buffers?), the default runs
  untimed: a default that cannot be built raises its error when the plan builds it.

Measurements and winners are logged on ``zyx.tune`` (``ZYX_DEBUG=256``). A search that runs
longer than a second shows a progress bar on stderr where stderr is a terminal (not in CI,
not into a log file).

A plan that is built already runs without any of this: the plan cache's hit path never
reaches a search, nor the disk.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import cached_property
from math import log2, prod
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from zyx import tuning
from zyx.allocator import allocator
from zyx.dtypes import DType
from zyx.errors import BackendError
from zyx.graph.cpu import CpuLowerer, cpu_layout
from zyx.graph.lower import UNROLL, UNROLLS, KernelSpec, Lowered, Lowerer, by_dims, resident
from zyx.graph.nodes import Node, Op

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from zyx.backend import Arg, Buffer, Device, MemoryPool, Program
    from zyx.config import AutotuneSection
    from zyx.ir.ops import Kernel

log = logging.getLogger("zyx.tune")

V = TypeVar("V", bound=Hashable)
E = TypeVar("E", bound=BaseException)

SHOW_AFTER = 1.0
"""Seconds a search runs before it shows a progress bar (on a terminal)."""

MIN_LOCAL = 32
"""The fewest work-items per group a generated kernel's search tries (a warp)."""

MAX_LOCAL = 1024
"""The most it tries: a GPU's limit. A CPU's OpenCL allows more (PoCL 4096), where a
group reduce of 4096 work-items took PoCL about 15 s to build here."""

MARGIN = 0.95
"""A variant other than the default wins only where it runs in less than this fraction of
the default's time: a gain within a machine's noise is none (a loaded 2-core VM here
measured the same kernel 10 to 40% apart from one round to the next)."""

MIN_ELEMENTS = 1 << 16
"""Elements a generated kernel computes over (its output's, or its reduction's input's),
below which its local size is not searched: all its work-items fit in one wave of any
device, and the variants differ by less than a launch costs, not worth their compiles."""

Launches = Sequence[tuple["Program", Sequence["Arg"]]]
"""What a variant of kernels runs: programs and their arguments, in order."""

Timer = Callable[[], int]
"""One run of a variant, timed alone: its nanoseconds (``Device.launch_timed``)."""


class Space(Protocol[V]):
    """The variants of a kernel on one device, and how to time each."""

    @property
    def device(self) -> Device: ...

    @property
    def name(self) -> str:
        """What is searched, for logs and ``zyx tune``."""
        ...

    def key(self) -> str:
        """The structure of what is searched, independent of the variant: equal texts must
        mean the same computation at sizes that may share a winner (the tuning cache's
        key holds it)."""
        ...

    def variants(self) -> Sequence[V]:
        """The variants, the default first: plain data, hashable, with a ``repr`` that
        names each across processes."""
        ...

    def timer(self, variant: V) -> Timer:
        """``variant`` built (compiled, bound to buffers) and ready to run timed: kernels
        through ``timed(device, launches)``, a plan through ``ExecPlan.time``. A
        ``BackendError`` where this device cannot build or run it."""
        ...


@dataclass(frozen=True)
class Result(Generic[V]):
    """What a search measured."""

    winner: V
    times: dict[V, int]
    """Nanoseconds per variant timed: the best of its runs."""
    seconds: float


def settings() -> AutotuneSection:
    """The ``autotune`` section of the process's configuration."""
    from zyx.plugins import registry

    return registry().config.values.autotune


def choose(space: Space[V], options: AutotuneSection | None = None) -> tuple[V, bool]:
    """The variant of ``space`` to run, and whether a search was run for it (the module
    docstring says when)."""
    variants = space.variants()
    if len(variants) == 1:
        return variants[0], False
    options = settings() if options is None else options
    if not options.enabled or space.device.interpreted:
        return variants[0], False
    key = tuning.Key(
        space.key(),
        tuning.Identity.of(space.device),
        tuple(options.model_dump(exclude={"enabled", "cache"}).items()),
        tuple(repr(v) for v in variants),
    )
    entry = tuning.cache.get(key, disk=options.cache)
    named = {} if entry is None else {repr(v): v for v in variants}
    if entry is not None and entry.variant in named:
        return named[entry.variant], False
    try:
        result = search(space, options)
    except BackendError as error:  # none could run (memory for the timing buffers?)
        log.warning("%s on %s: no variant could be timed, the default runs: %s", space.name,
                    space.device.name, error)  # fmt: skip
        return variants[0], False
    times = {repr(v): t for v, t in result.times.items()}
    stored = tuning.Entry(repr(result.winner), times, space.name, space.device.name, result.seconds)
    # Only the default timed (under min_time, or the budget spent on it): kept for this
    # process only, so that small kernels leave nothing on disk.
    disk = options.cache and len(result.times) > 1
    tuning.cache.put(key, stored, disk=disk)
    return result.winner, True


def search(space: Space[V], options: AutotuneSection) -> Result[V]:
    """Time the variants of ``space`` (the module docstring says how); the fastest."""
    start = time.perf_counter()
    variants = space.variants()
    trials = _Trials(space, options.runs)
    with _Bar(space.name, len(variants), start) as bar:
        for i, variant in enumerate(variants):
            if i and time.perf_counter() - start >= options.budget:
                log.debug("%s: budget spent, %d of %d variants timed", space.name, i, len(variants))
                break
            best = trials.time(variant)
            bar.advance()
            if i == 0 and best is not None and best < options.min_time * 1e9:
                break
    winner = trials.confirm(variants[0])
    seconds = time.perf_counter() - start
    times = trials.times
    if len(times) > 1:
        default = times.get(variants[0])
        gain = f", {default / times[winner]:.2f}x the default" if default else ""
        log.info("%s on %s: %r wins in %d ns%s (%d variants timed in %.2f s)", space.name,
                 space.device.name, winner, times[winner], gain, len(times), seconds)  # fmt: skip
    return Result(winner, times, seconds)


class _Trials(Generic[V]):
    """The variants of one search timed so far."""

    def __init__(self, space: Space[V], runs: int) -> None:
        self.space = space
        self.runs = runs
        self.times: dict[V, int] = {}
        self.timers: dict[V, Timer] = {}
        self.failure: BackendError | None = None

    def time(self, variant: V) -> int | None:
        """``variant``'s best time, or ``None`` where it fails to build or run (logged)."""
        try:
            timer = self.timers[variant] = self.space.timer(variant)
            timer()  # the warm-up
            best = self.times[variant] = min(timer() for _ in range(self.runs))
        except BackendError as error:  # this variant loses; the others may run
            log.debug("%s: %r failed: %s", self.space.name, variant, error)
            self.failure = self.failure or _detached(error)
            return None
        log.debug("%s: %r: %d ns", self.space.name, variant, best)
        return best

    def confirm(self, default: V) -> V:
        """The fastest variant, once it has beaten ``default`` again, by ``MARGIN``: both
        timed anew, in turn, each keeping its best time of both rounds. A loaded machine's
        noise can make a variant look faster once; it rarely does so twice."""
        if not self.times:
            assert self.failure is not None
            raise self.failure
        winner = min(self.times, key=self.times.__getitem__)
        if winner == default or default not in self.times:
            return winner
        for _ in range(self.runs):
            for variant in (default, winner):
                self.times[variant] = min(self.times[variant], self.timers[variant]())
        if self.times[winner] >= MARGIN * self.times[default]:
            log.debug("%s: %r did not beat the default by %.0f%% when timed again",
                      self.space.name, winner, 100 * (1 - MARGIN))  # fmt: skip
            return default
        return winner


def _detached(error: E) -> E:
    """``error``, kept, without the tracebacks of it and of its causes: their frames hold
    the variant's timing inputs (a claim's stand-ins: device memory), which a reference
    cycle through the kept error would hold until the cyclic collector ran."""
    link: BaseException | None = error
    while link is not None:
        link.__traceback__ = None
        link = link.__cause__ or link.__context__
    return error


def timed(device: Device, launches: Launches) -> Timer:
    """A timer of ``launches`` on ``device``: each run alone, their nanoseconds summed."""
    return lambda: sum(device.launch_timed(program, args) for program, args in launches)


@dataclass(frozen=True, order=True)
class Layout:
    """A variant of a generated kernel: how its work is laid out, not what it computes."""

    local: int
    """Work-items per group."""
    unroll: int = UNROLL
    """Elements a work-item reads per trip of its loop (``Lowerer``'s ``unroll``)."""
    rows: bool = False
    """A map kernel laid out along its output's rows (``Lowerer``'s ``rows``)."""


class Generated:
    """The space of a kernel the scheduler emitted: its local size (work-items per group),
    powers of two from ``MIN_LOCAL`` to the device's limit (at most ``MAX_LOCAL``), the
    runtime's rule (``default``, a power of two) first, and on a GPU (a warp of more than
    one) each with the elements per trip ``UNROLLS`` where its kernel has a loop to unroll
    (a map kernel, a reduce kernel whose row is not resident), and a map kernel whose
    elements need their per-dim indices each also laid out along its rows (``_rows``,
    the default's layout where a row holds a group's work); the default alone under
    ``MIN_ELEMENTS``, and on the host (``zyx.graph.cpu``: a group is one work-item).

    Timing binds the kernel's realized inputs and scalars as they are, and zero-filled
    scratch buffers for its output and for inputs other kernels of the plan compute
    (zeros are valid indices and divisors: every value a kernel reads is in range). The
    scratch is freed at ``close`` (or the end of a ``with``).
    """

    def __init__(
        self,
        spec: KernelSpec,
        is_input: Callable[[Node], bool],
        default: int,
        compile: Callable[[Kernel], Program],
    ) -> None:
        self.spec = spec
        self.is_input = is_input
        self.default = default
        self.compile = compile
        self._lowered: dict[Layout, Lowered] = {}
        self._scratch: dict[int, Buffer] = {}

    @property
    def device(self) -> Device:
        return self.spec.output.device

    @property
    def name(self) -> str:
        return self.lowered(self.first).kernel.name

    @cached_property
    def first(self) -> Layout:
        """The default variant: the runtime's local size, along rows where a map kernel
        has them (``_rows``) and each row holds the work of a group."""
        return Layout(self.default, rows=self._rows(self.default, UNROLL, whole=True))

    @cached_property
    def _by_dims(self) -> bool:
        return by_dims(self.spec, self.is_input)

    def variants(self) -> list[Layout]:
        """The default, then the others nearest it first (by factors of two in both the
        local size and the unroll, then the same layout before the other): those a budget
        leaves untried are the least likely to win."""
        first = self.first
        reduction = self.spec.reduction
        if (prod(reduction[0]) if reduction else self.spec.output.size) < MIN_ELEMENTS:
            return [first]
        if cpu_layout(self.device):  # one work-item per group: the local size is no variant
            return [first]
        info = self.device.info
        limit = min(info.max_local_threads, info.max_local_work_dims[0], MAX_LOCAL)
        layouts: list[Layout] = []
        size = MIN_LOCAL
        while size <= limit:
            unrolls = UNROLLS if info.warp_size > 1 and self._loops(size) else (UNROLL,)
            for u in unrolls:
                layouts.append(Layout(size, u))
                if self._rows(size, u):
                    layouts.append(Layout(size, u, rows=True))
            size *= 2
        others = sorted((v for v in layouts if v != first), key=self._distance)
        return [first, *others]

    def _loops(self, local: int) -> bool:
        """Whether the kernel at ``local`` work-items per group has a loop to unroll."""
        return self.spec.reduction is None or not resident(self.spec, local)

    def _rows(self, local: int, unroll: int, whole: bool = False) -> bool:
        """Whether a map kernel can be laid out along its output's rows at ``local`` and
        ``unroll`` (``Lowerer._map``): on a device of work-groups, for an output whose
        elements need their per-dim indices, whose rows and chunks of a row fit the
        device's group counts; a row at least half a group's work (all of it: ``whole``),
        where fewer work-items would sit idle past its end."""
        shape, info = self.spec.output.shape, self.device.info
        if self.spec.reduction is not None or cpu_layout(self.device) or len(shape) < 2:
            return False
        rows, chunk = prod(shape[:-1]), local * unroll
        chunks = -(-shape[-1] // chunk)
        fits = rows <= info.max_global_work_dims[0] and chunks <= info.max_global_work_dims[1]
        long = shape[-1] >= (chunk if whole else chunk // 2)
        return rows > 1 and fits and long and self._by_dims

    def _distance(self, v: Layout) -> tuple[float, bool, int, int]:
        steps = abs(log2(v.local / self.default)) + abs(log2(v.unroll / UNROLL))
        return (steps, v.rows != self.first.rows, v.local, v.unroll)

    def key(self) -> str:
        """The kernel's IR and its sizes (shape numbers, strides, offsets) each rounded up
        to a power of two: the shapes of one such bucket share a winner, so a program of
        many shapes searches each bucket once, not each shape."""
        lowered = self.lowered(self.first)
        sizes = tuple(_bucket(a) for a in lowered.args if not isinstance(a, Node))
        return repr((lowered.kernel.ops, sizes))

    def lowered(self, variant: Layout) -> Lowered:
        """The kernel laid out as ``variant`` says (lowered once)."""
        found = self._lowered.get(variant)
        if found is None:
            make = CpuLowerer if cpu_layout(self.device) else Lowerer
            lowerer = make(self.spec, self.is_input, variant.local, variant.unroll, variant.rows)
            found = self._lowered[variant] = lowerer.lower()
        return found

    def timer(self, variant: Layout) -> Timer:
        return timed(self.device, self.launches(variant))

    def launches(self, variant: Layout) -> Launches:
        """The kernel laid out as ``variant`` says, compiled, and its arguments for
        timing."""
        lowered = self.lowered(variant)
        return [(self.compile(lowered.kernel), [self._bind(a) for a in lowered.args])]

    def _bind(self, arg: Any) -> Arg:
        if not isinstance(arg, Node):
            return arg  # type: ignore[no-any-return]
        if arg.op is Op.SCALAR:
            return arg.arg  # type: ignore[no-any-return]
        if arg.buffer is not None:
            return arg.buffer
        found = self._scratch.get(id(arg))
        if found is None:
            found = self._scratch[id(arg)] = _zeros(arg.device, arg.nbytes)
        return found

    def close(self) -> None:
        """Free the scratch buffers of timing."""
        scratch, self._scratch = self._scratch, {}
        for buf in scratch.values():
            allocator.free(buf)

    def __enter__(self) -> Generated:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _bucket(size: int) -> int:
    """``size`` rounded up to a power of two, keeping its sign (an offset of a reversed
    dim is negative)."""
    magnitude = 1 << (abs(size) - 1).bit_length() if size else 0
    return magnitude if size >= 0 else -magnitude


TIMING_BLOCK = 1 << 20
"""Elements of the random sample ``fill_for_timing`` writes again and again."""


def fill_for_timing(pool: MemoryPool, buf: Buffer, dtype: DType) -> None:
    """Fill ``buf`` with values to time a kernel on: a standard normal sample for floats,
    zeros for other dtypes (valid indices and divisors). Not zeros for floats: a
    tensor-core product of zeros draws less power than one of real data and so runs at
    higher clocks, and plans timed on zeros can rank otherwise than on the data they
    will run on."""
    import numpy as np

    count = buf.nbytes // dtype.itemsize
    if not count:
        return
    size = min(count, TIMING_BLOCK)
    if dtype.is_float:
        sample = np.random.default_rng(0).standard_normal(size, dtype=np.float32)
        block = sample.astype(dtype.numpy)
    else:
        block = np.zeros(size, dtype.numpy)
    for start in range(0, count, size):
        pool.write(buf, block[: count - start], start * dtype.itemsize)


def _zeros(device: Device, nbytes: int) -> Buffer:
    buf = allocator.allocate(device.pool, max(nbytes, 1))
    fill_for_timing(device.pool, buf, DType.U8)  # not a float: zeros
    return buf


class _Bar:
    """A rich progress bar of one search on stderr, shown once the search has run
    ``SHOW_AFTER`` seconds, and only where stderr is a terminal and ``CI`` is unset."""

    def __init__(self, name: str, total: int, start: float) -> None:
        self.name = name
        self.total = total
        self.start = start
        self.done = 0
        self.progress: Progress | None = None
        self.task: TaskID | None = None

    def advance(self) -> None:
        self.done += 1
        if self.progress is None:
            if time.perf_counter() - self.start < SHOW_AFTER or not terminal():
                return
            self._show()
        assert self.progress is not None and self.task is not None
        self.progress.update(self.task, completed=self.done)

    def _show(self) -> None:
        from rich.console import Console
        from rich.progress import Progress

        self.progress = Progress(console=Console(stderr=True), transient=True)
        self.progress.start()
        self.task = self.progress.add_task(f"tuning {self.name}", total=self.total)

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()


def terminal() -> bool:
    """Whether a progress bar may show: stderr is a terminal, not a dumb one, outside CI."""
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced by an object without it, or closed
        return False
    return tty and "CI" not in os.environ and os.environ.get("TERM") != "dumb"
