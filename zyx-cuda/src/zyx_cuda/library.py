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
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from cuda.bindings import driver

from zyx.backend import Arg, Buffer, Scalar
from zyx.errors import ErrorStatus
from zyx.ir.ops import Kernel, Param
from zyx_cuda.errors import check
from zyx_cuda.program import CudaProgram

if TYPE_CHECKING:
    from zyx_cuda.device import CudaDevice

LibraryCall = Callable[[int, list[int], list[Scalar]], None]
"""``(stream, device pointers, scalars)``; enqueues work on ``stream`` and returns."""

_GRAPH = ErrorStatus.KERNEL_LAUNCH

REPLAYS = 8
"""Argument sets whose captured graphs a replaying program keeps (the least recent goes)."""

_log = logging.getLogger("zyx.dev")

Arguments = tuple[tuple[int, ...], tuple[Scalar, ...]]


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

    def enqueue(self, stream: Any, values: Sequence[Arg], groups: tuple[int, int, int]) -> None:
        pointers, scalars = self._arguments(values)
        if self.replay:
            key = (tuple(pointers), tuple(scalars))
            graph = self._graphs.get(key)
            if graph is None and key == self._last:
                graph = self._captured(key, pointers, scalars)
            self._last = key
            if graph is not None:
                self._graphs.move_to_end(key)
                check(_GRAPH, "cuGraphLaunch", driver.cuGraphLaunch(graph, stream))
                return
        self.call(int(stream), pointers, scalars)

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
