"""Library programs: work a native library enqueues (a cuDNN plan, a cuBLAS call), run as a
``Program`` so the device schedules it like a kernel: same stream choice, same hazards.

The library's callable gets the stream handle (an int), the device pointers of the buffer
params in param order, and the scalar params in param order::

    def matmul(stream: int, pointers: list[int], scalars: list[Scalar]) -> None:
        plan.execute(handle, stream, pointers, ...)

    program = LibraryProgram(device, "matmul", params, matmul)
    device.launch(program, [a, b, c])

In a recording (``Device.record``) the call is captured once into a child graph, and
captured again when ``set_arg`` rebinds it, on a stream of the program's own that
``Device.release`` destroys.

``replay=True`` (for a call whose work depends on nothing but its arguments, as a cuDNN
plan's execute): launched twice in a row with the same pointers and scalars, the call is
captured into a CUDA graph, and later launches with those arguments replay it with one
``cuGraphLaunch`` instead of calling the library (cuDNN's execute costs several times a
graph launch on the host). The last ``REPLAYS`` argument sets keep their graphs. A call
that cannot be captured is from then on called, not replayed (logged on ``zyx.dev``).

Where zyx-cuda's native module is built and launches are not logged, a replaying
program's ``submit`` is native.c's ``Replayer.submit``: a launch with the very argument
objects of the last one, where that one launched a graph, launches it again in C
(``NativeReplay``); every other launch takes the Python path, ``schedule``, which is its
specification.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from cuda.bindings import driver

from zyx.backend import Arg, Buffer, Scalar
from zyx.errors import BackendError, ErrorStatus
from zyx.ir.ops import Kernel, Param
from zyx_cuda.errors import check, cuda_error
from zyx_cuda.native import replayer_type
from zyx_cuda.program import CudaProgram, NativeProgram

if TYPE_CHECKING:
    from zyx_cuda.device import CudaDevice

LibraryCall = Callable[[int, list[int], list[Scalar]], None]
"""``(stream, device pointers, scalars)``; enqueues work on ``stream`` and returns."""

_GRAPH = ErrorStatus.KERNEL_LAUNCH

REPLAYS = 8
"""Argument sets whose captured graphs a replaying program keeps (the least recent goes)."""

_log = logging.getLogger("zyx.dev")

Arguments = tuple[tuple[int, ...], tuple[Scalar, ...]]


@dataclass(frozen=True)
class NativeReplay(NativeProgram):
    """A replaying program's, for a ``Replayer``: ``packed`` holds the argument objects of
    the last launch, where it launched ``graph``."""

    graph: list[int]
    """``[address]``: the graph exec the last launch launched, which the C path launches
    again for ``packed``; ``[0]`` where it launches none. The Python path sets it to 0
    before anything that could make it stale (a capture, an eviction, a call, a release)."""


class LibraryProgram(CudaProgram):
    """A callable with ``params`` (buffers and scalars, in launch order) run on zyx's streams."""

    def __init__(
        self,
        device: CudaDevice,
        name: str,
        params: Sequence[Param],
        call: LibraryCall,
        *,
        replay: bool = False,
    ) -> None:
        super().__init__(device, Kernel(name, tuple(params)))
        self.call = call
        self.replay = replay
        self._capture_stream: Any = None
        self._graphs: OrderedDict[Arguments, Any] = OrderedDict()
        """Graph execs by the arguments they were captured with, least recent first."""
        self._last: Arguments | None = None
        self._packed: list[object] = [None] * len(self.param_kinds)
        self._graph = [0]
        """``NativeReplay.packed`` and ``graph``: kept here, read by the ``Replayer``."""
        self.replayer = self._replayer() if replay else None
        """zyx-cuda's native ``Replayer`` of this program, or ``None`` (see ``_replayer``)."""
        if self.replayer is not None:
            self.submit = self.replayer.submit

    def enqueue(self, stream: Any, values: Sequence[Arg], groups: tuple[int, int, int]) -> None:
        pointers, scalars = self._arguments(values)
        if self.replay:
            # No graph for the C path until this launch launches one: a replay there
            # leaves ``_last`` and the graphs' order as they are, right for the last
            # launch's graph only, and must never find one destroyed (evicted, released).
            self._graph[0] = 0
            key = (tuple(pointers), tuple(scalars))
            graph = self._graphs.get(key)
            if graph is None and key == self._last:
                graph = self._captured(key, pointers, scalars)
            self._last = key
            if graph is not None:
                self._graphs.move_to_end(key)
                check(_GRAPH, "cuGraphLaunch", driver.cuGraphLaunch(graph, stream))
                self._packed[:] = values
                self._graph[0] = int(graph)
                return
        self.call(int(stream), pointers, scalars)

    def _replayer(self) -> Any:
        """zyx-cuda's native ``Replayer`` for this program, which launches the last
        launch's graph again in C where a launch repeats its argument objects on a stream
        without a cross-stream hazard, and hands every other launch to ``schedule``;
        ``None`` without the native module, where launches are logged, or where a
        ``LaunchLayout`` does not apply (more params than it takes)."""
        replayer, layout = replayer_type(), self.native_layout()
        if replayer is None or layout is None:
            return None
        replay = NativeReplay(
            schedule=self.schedule,
            failure=self._launch_error,
            packed=self._packed,
            graph=self._graph,
            context=int(self.device.context.handle),
        )
        return replayer(layout, replay)

    @staticmethod
    def _launch_error(result: int) -> BackendError:
        return cuda_error(_GRAPH, "cuGraphLaunch", result)

    def retire(self) -> None:
        self._graph[0] = 0  # its graphs are destroyed once the work queued so far is done
        super().retire()

    def _arguments(self, values: Sequence[Arg]) -> tuple[list[int], list[Scalar]]:
        """The call's device pointers and scalars, each in param order."""
        buffers = cast("Sequence[Buffer]", values)
        pointers = [buffers[i].handle for i in self.buffer_positions]
        return pointers, [cast("Scalar", values[i]) for i in self.scalar_positions]

    def _captured(self, key: Arguments, pointers: list[int], scalars: list[Scalar]) -> Any:
        """The call captured and instantiated for ``key``, kept; ``None`` where it cannot be
        (the program stops replaying)."""
        try:
            graph = self._record(pointers, scalars)
            try:
                found = driver.cuGraphInstantiate(graph, 0)
            finally:
                driver.cuGraphDestroy(graph)
            graph_exec = check(_GRAPH, "cuGraphInstantiate", found)
        except Exception as error:  # noqa: BLE001 - the call still runs, uncaptured
            _log.debug("%s: %s is called, not replayed: %s", self.device.name, self.name, error)
            self.replay = False
            return None
        self._graphs[key] = graph_exec
        if len(self._graphs) > REPLAYS:
            _, oldest = self._graphs.popitem(last=False)
            driver.cuGraphExecDestroy(oldest)  # one in flight is freed when it completes
        return graph_exec

    def add_node(self, graph: Any, deps: Sequence[Any], args: Sequence[Arg]) -> Any:
        child = self._capture(args)
        try:
            return check(
                _GRAPH,
                "cuGraphAddChildGraphNode",
                driver.cuGraphAddChildGraphNode(graph, list(deps), len(deps), child),
            )
        finally:
            driver.cuGraphDestroy(child)

    def set_node(self, graph_exec: Any, node: Any, args: Sequence[Arg]) -> None:
        child = self._capture(args)
        try:
            check(
                _GRAPH,
                "cuGraphExecChildGraphNodeSetParams",
                driver.cuGraphExecChildGraphNodeSetParams(graph_exec, node, child),
            )
        finally:
            driver.cuGraphDestroy(child)

    def _capture(self, args: Sequence[Arg]) -> Any:
        """The call's work as a graph, for a recording."""
        values, _, _, _ = self.prepare(args)  # refuses a released program's
        return self._record(*self._arguments(values))

    def _record(self, pointers: list[int], scalars: list[Scalar]) -> Any:
        """The call's work as a graph, by stream capture on a stream of its own."""
        if self._capture_stream is None:
            flags = driver.CUstream_flags.CU_STREAM_NON_BLOCKING
            self._capture_stream = check(_GRAPH, "cuStreamCreate", driver.cuStreamCreate(flags))
        stream = self._capture_stream
        mode = driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        check(_GRAPH, "cuStreamBeginCapture", driver.cuStreamBeginCapture(stream, mode))
        try:
            self.call(int(stream), pointers, scalars)
        finally:
            graph = check(_GRAPH, "cuStreamEndCapture", driver.cuStreamEndCapture(stream))
        return graph

    def unload(self) -> None:
        if self._capture_stream is None:  # nor any graph
            return
        self.device.context.activate()
        for graph_exec in self._graphs.values():
            driver.cuGraphExecDestroy(graph_exec)
        self._graphs.clear()
        stream, status = self._capture_stream, ErrorStatus.DEINITIALIZATION
        check(status, "cuStreamDestroy", driver.cuStreamDestroy(stream))
        self._capture_stream = None
