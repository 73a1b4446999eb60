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
"""

from __future__ import annotations

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


class LibraryProgram(CudaProgram):
    """A callable with ``params`` (buffers and scalars, in launch order) run on zyx's streams."""

    def __init__(
        self, device: CudaDevice, name: str, params: Sequence[Param], call: LibraryCall
    ) -> None:
        super().__init__(device, Kernel(name, tuple(params)))
        self.call = call
        self._capture_stream: Any = None

    def enqueue(self, stream: Any, values: Sequence[Arg], groups: tuple[int, int, int]) -> None:
        buffers = cast("Sequence[Buffer]", values)
        pointers = [buffers[i].handle for i in self.buffer_positions]
        scalars = [cast("Scalar", values[i]) for i in self.scalar_positions]
        self.call(int(stream), pointers, scalars)

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
        """The call's work as a graph, by stream capture on a stream of its own."""
        values, _, _, groups = self.prepare(args)  # refuses a released program's
        if self._capture_stream is None:
            flags = driver.CUstream_flags.CU_STREAM_NON_BLOCKING
            self._capture_stream = check(_GRAPH, "cuStreamCreate", driver.cuStreamCreate(flags))
        stream = self._capture_stream
        mode = driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        check(_GRAPH, "cuStreamBeginCapture", driver.cuStreamBeginCapture(stream, mode))
        try:
            self.enqueue(stream, values, groups)
        finally:
            graph = check(_GRAPH, "cuStreamEndCapture", driver.cuStreamEndCapture(stream))
        return graph

    def unload(self) -> None:
        if self._capture_stream is None:
            return
        self.device.context.activate()
        stream, status = self._capture_stream, ErrorStatus.DEINITIALIZATION
        check(status, "cuStreamDestroy", driver.cuStreamDestroy(stream))
        self._capture_stream = None
