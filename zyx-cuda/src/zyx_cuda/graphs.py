"""``Device.record()`` on CUDA: the launches become one CUDA graph, replayed with one call.

The graph is built from explicit nodes (each program adds its own: a kernel node, or a
captured child graph for a library program), with edges only where launches share a
buffer (read-after-write, write-after-read, write-after-write), so independent launches may
run concurrently. It is instantiated on the first replay. ``set_arg`` between replays
updates the instantiated nodes in place (``cuGraphExecKernelNodeSetParams``), unless the
rebinding changes which launches share buffers, or which have work-groups (a launch without
is an empty node): then the graph is built again. Which launches share buffers is read from
the buffer arguments alone (``_sharing``: each numbered by its first use), not from every
launch's ``inspect`` again: ``zyx.jit`` rebinds a recording's inputs and outputs on every
call.

A replay is one command on the device's streams, whose reads and writes are the union of
its launches', so it is ordered against ordinary launches and copies like any other. It is
logged on ``zyx.launch`` where that logger was on for DEBUG when the recording was made
(decided once, as a program decides for its launches).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any, cast

from cuda.bindings import driver

from zyx.backend import Arg, Buffer, Program, Recording
from zyx.errors import BackendError, ErrorStatus
from zyx_cuda.errors import check
from zyx_cuda.program import CudaProgram

if TYPE_CHECKING:
    from zyx_cuda.device import CudaDevice

_launch_log = logging.getLogger("zyx.launch")

Launch = tuple[Program, list[Arg]]
Layout = tuple[tuple[int, ...], list[bool]]
"""What a graph's nodes follow from: which launches share buffers (``_sharing``), and
whether each has work-groups (a kernel node) or none (an empty node)."""


def dependencies(launches: Sequence[Launch]) -> list[tuple[int, ...]]:
    """For each launch, the earlier launches it must follow because they share a buffer
    (as ``Program.inspect`` says it reads or writes it)."""
    writer: dict[Buffer, int] = {}
    readers: dict[Buffer, list[int]] = {}
    edges = []
    for i, (program, args) in enumerate(launches):
        _, reads, writes, _ = program.inspect(args)
        after = {writer[b] for b in reads + writes if b in writer}
        for b in writes:
            after.update(readers.get(b, ()))
        for b in reads:
            readers.setdefault(b, []).append(i)
        for b in writes:
            writer[b] = i
            readers[b] = []
        edges.append(tuple(sorted(after - {i})))
    return edges


class GraphRecording(Recording):
    """Launches recorded on a ``CudaDevice``, replayed as one instantiated CUDA graph."""

    device: CudaDevice

    def __init__(self, device: CudaDevice) -> None:
        super().__init__(device)
        self._graph: Any = None
        self._exec: Any = None
        self._nodes: list[Any] = []
        self._layout: Layout = ((), [])
        self._rebound: set[int] = set()
        self._programs: tuple[CudaProgram, ...] = ()
        self._buffers: tuple[Buffer, ...] = ()
        self._reads: tuple[Buffer, ...] = ()
        self._writes: tuple[Buffer, ...] = ()
        self._accessed: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())
        """The whole graph's read-only and written buffers, as numbers of ``_sharing``."""
        self._logged = _launch_log.isEnabledFor(logging.DEBUG)

    def launch(self, program: Program, args: Sequence[Arg]) -> None:
        self.device.own(program, CudaProgram)
        with self.device.lock:
            super().launch(program, args)
            self._discard()

    def set_arg(self, launch: int, position: int, value: Arg) -> None:
        with self.device.lock:
            super().set_arg(launch, position, value)
            self._rebound.add(launch)

    def replay(self) -> None:
        """Launch the whole recording as one graph on the device's streams."""
        with self.device.lock:
            if self.launches:
                self._replay()

    def _replay(self) -> None:
        device = self.device
        device.context.activate()
        if self._exec is None:
            self._build()
        elif self._rebound:
            self._rebind()
        self._check_live()
        streams = device.streams
        queue = streams.select(self._reads, self._writes)
        check(
            ErrorStatus.KERNEL_LAUNCH,
            "cuGraphLaunch",
            driver.cuGraphLaunch(self._exec, streams.handles[queue]),
        )
        streams.commit(queue, self._reads, self._writes)
        if self._logged:
            self._log_replay(queue)

    def _log_replay(self, queue: int) -> None:
        names = ", ".join(program.name for program, _ in self.launches)
        _launch_log.debug("%s: replay of %s on stream %d", self.device.name, names, queue)

    def _check_live(self) -> None:
        """Refuse a replay whose graph points into a released program's module (unloaded
        once its queued work is done) or a released buffer."""
        for program in self._programs:
            if program.released:
                raise _released(program)
        for buf in self._buffers:
            if buf.refcount <= 0:
                raise _released(buf)

    def _build(self) -> None:
        """Create the graph's nodes and instantiate it. The template graph is kept: its
        node handles are what ``set_node`` updates in the instantiated graph. Where a step
        fails, what was made is destroyed."""
        try:
            self._make_graph()
        except BaseException:
            self._discard()
            raise
        self._rebound.clear()
        self._collect_accesses()

    def _make_graph(self) -> None:
        self._layout = self._layout_now()
        self._graph = check(ErrorStatus.KERNEL_LAUNCH, "cuGraphCreate", driver.cuGraphCreate(0))
        self._nodes = []
        for (program, args), after in zip(self.launches, dependencies(self.launches)):
            assert isinstance(program, CudaProgram)
            deps = [self._nodes[j] for j in after]
            self._nodes.append(program.add_node(self._graph, deps, args))
        self._exec = check(
            ErrorStatus.KERNEL_LAUNCH,
            "cuGraphInstantiate",
            driver.cuGraphInstantiate(self._graph, 0),
        )

    def _layout_now(self) -> Layout:
        return self._sharing()[0], [self._works(i) for i in range(len(self.launches))]

    def _works(self, launch: int) -> bool:
        """Whether launch ``launch`` has work-groups (a kernel node; else an empty one)."""
        program, args = self.launches[launch]
        return 0 not in program.groups(args)

    def _sharing(self) -> tuple[tuple[int, ...], list[Buffer]]:
        """Each buffer argument of each launch, in order, as the number of its buffer's first
        use; and the buffers in that order. Equal numbers, equal edges (``dependencies``
        follows from which buffers launches share, and its programs' param kinds)."""
        first: dict[Buffer, int] = {}
        numbers = []
        for program, args in self.launches:
            for i in program.buffer_positions:
                numbers.append(first.setdefault(args[i], len(first)))  # type: ignore[arg-type]
        return tuple(numbers), list(first)

    def _rebind(self) -> None:
        """Apply ``set_arg``s to the instantiated graph, or rebuild it if its layout
        changed."""
        sharing, buffers = self._sharing()
        working = self._layout[1].copy()
        for i in self._rebound:
            working[i] = self._works(i)
        if (sharing, working) != self._layout:
            self._discard()
            self._build()
            return
        for i in sorted(self._rebound):
            program, args = self.launches[i]
            assert isinstance(program, CudaProgram)
            program.set_node(self._exec, self._nodes[i], args)
        self._rebound.clear()
        reads, writes = self._accessed
        self._reads = tuple(buffers[j] for j in reads)
        self._writes = tuple(buffers[j] for j in writes)
        self._buffers = self._reads + self._writes

    def _collect_accesses(self) -> None:
        """The whole graph's read-only and written buffers, in first-use order."""
        read: dict[Buffer, None] = {}
        written: dict[Buffer, None] = {}
        for program, args in self.launches:
            _, reads, writes, _ = program.inspect(args)
            read.update(dict.fromkeys(reads))
            written.update(dict.fromkeys(writes))
        self._writes = tuple(written)
        self._reads = tuple(b for b in read if b not in written)
        self._buffers = self._reads + self._writes
        number = {b: j for j, b in enumerate(self._sharing()[1])}
        self._accessed = (
            tuple(number[b] for b in self._reads),
            tuple(number[b] for b in self._writes),
        )
        self._programs = tuple(dict.fromkeys(cast(CudaProgram, p) for p, _ in self.launches))

    def _discard(self) -> None:
        """Drop the graph; in-flight replays finish (the driver frees it after them)."""
        self.device.context.activate()
        self._destroy()

    def _destroy(self) -> None:
        if self._exec is not None:
            driver.cuGraphExecDestroy(self._exec)
            self._exec = None
        if self._graph is not None:
            driver.cuGraphDestroy(self._graph)
            self._graph = None

    def __del__(self) -> None:
        # A recording dropped (zyx.jit's cache evicts its batches) gives its graph back.
        # The garbage collector runs this in the middle of any code: the device's context is
        # current for the two calls only (pushed, then popped), so the thread's stays.
        with suppress(Exception):  # at interpreter exit the driver may be gone
            if self._exec is None and self._graph is None:
                return
            driver.cuCtxPushCurrent(self.device.context.handle)
            try:
                self._destroy()
            finally:
                driver.cuCtxPopCurrent()


def _released(what: Program | Buffer) -> BackendError:
    return BackendError(ErrorStatus.INCORRECT_KERNEL_ARG, f"recorded {what!r} was released")
