"""Programs the CUDA device launches: compiled kernels here, library calls in ``library``.

Where a kernel is launched (``CudaDevice.launch`` calls ``program.submit``, which takes
the device's lock):

- in C, native.c's ``Launcher.submit`` (``launch_and_commit``), where zyx-cuda's native
  module is built: a launch that repeats the packed arguments, or changes only buffers, on
  a stream without a cross-stream hazard;
- in Python, ``KernelProgram.schedule``: every other launch, and every launch where the
  native module is not built (``ZYX_NATIVE=0``). It is the specification of the C path.
  Its one driver call is ``KernelProgram.enqueue``, which ``launch_timed`` uses too.

A recording's replay (``graphs``) launches a CUDA graph of the same kernels instead.

A ``KernelProgram`` keeps a prepared argument block: one 8-byte slot per param in a ctypes
buffer and a ``void*`` array pointing at the slots, whose address is ``cuLaunchKernel``'s
``kernelParams``. A launch with the argument objects of the last one skips the packing;
the C path packs only the buffers that changed.

A bounds-checked ``KernelProgram`` (``zyx.debug.BOUNDS``) has no ``Launcher``: its block
holds the hidden arguments too (its error record's address and each buffer's element
count, ``zyx.codegen.c``), and ``schedule`` waits for the launch and raises what the record
holds.

Whether a program logs its launches (``zyx.launch`` at DEBUG, ``ZYX_DEBUG=32``) is decided
once, when it is made (``logged``): a logging kernel has no ``Launcher`` (its C path does
not log).
"""

from __future__ import annotations

import ctypes
import logging
import struct
from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cuda.bindings import driver

from zyx.backend import Arg, Prepared, Program
from zyx.codegen.c import bounds_error
from zyx.dtypes import DType, round_to
from zyx.errors import BackendError, ErrorStatus
from zyx.ir.ops import Kernel, ParamKind
from zyx.native import LaunchLayout, launch_layout
from zyx_cuda.codegen import shared_bytes
from zyx_cuda.compiler import Image
from zyx_cuda.errors import check, cuda_error
from zyx_cuda.native import launch_function, launcher_type

if TYPE_CHECKING:
    from zyx_cuda.device import CudaDevice

# struct codes of scalar params, by the C type the dialect declares them with (value_type).
_SCALAR_CODES = {
    DType.BOOL: "?", DType.U8: "B", DType.U16: "H", DType.U32: "I", DType.U64: "Q",
    DType.I8: "b", DType.I16: "h", DType.I32: "i", DType.I64: "q", DType.F16: "f",
    DType.BF16: "f", DType.F32: "f", DType.F64: "d",
}  # fmt: skip
_STATIC_SHARED_LIMIT = 48 * 1024
_launch_kernel = driver.cuLaunchKernel
_launch_log = logging.getLogger("zyx.launch")
_EMPTY = object()
"""What ``ArgBlock.packed`` holds where its slot holds no argument: never an argument (as
``None`` may be), since the native ``Launcher`` takes an argument identical to the packed
one as checked."""


class CudaProgram(Program):
    """A program scheduled on the device's streams by its buffer params' read/write sets."""

    device: CudaDevice

    def __init__(self, device: CudaDevice, kernel: Kernel) -> None:
        super().__init__(device, kernel)
        self.logged = _launch_log.isEnabledFor(logging.DEBUG)
        """Whether its launches are logged on ``zyx.launch``, decided once, here."""
        self._lock, self._context, self._streams = device.lock, device.context, device.streams
        self.submit: Callable[[Sequence[Arg]], None] = self.schedule
        """``Device.launch`` of this program, its device checked: ``schedule``, or a
        ``KernelProgram``'s native ``Launcher.submit`` (a replaying ``LibraryProgram``'s
        ``Replayer.submit``); each takes the device's lock."""

    def prepare(self, args: Sequence[Arg]) -> Prepared:
        """``inspect``, and where the program has one, its argument block packed for the
        next ``enqueue``."""
        return self.inspect(args)

    def schedule(self, args: Sequence[Arg]) -> None:
        """The launch, in Python, under the device's lock: the arguments checked before any
        native call, then a stream chosen, its hazards ordered, the work enqueued and
        recorded."""
        with self._lock:
            values, reads, writes, groups = self.prepare(args)
            if 0 in groups:  # no work-group: nothing to run (the driver refuses a zero grid)
                return
            self._context.activate()
            streams = self._streams
            queue = streams.select(reads, writes)
            self.enqueue(streams.handles[queue], values, groups)
            streams.commit(queue, reads, writes)
            if self.logged:
                log_launch(self, queue, groups)
            self.check_record()

    def check_record(self) -> None:
        """Bounds-checked: wait for the device and raise what the error record holds (and
        clear it). Nothing for an unchecked program."""

    def retire(self) -> None:
        super().retire()
        self.submit = self.schedule  # whose inspect refuses it, where a Launcher would not

    def native_layout(self) -> LaunchLayout | None:
        """The program's ``LaunchLayout`` on the device's streams, for a native submit
        (``Launcher``, ``Replayer``); ``None`` where its launches are logged (the C path
        does not log) or it has more params than a layout takes."""
        streams = self.device.streams
        return None if self.logged else launch_layout(self, streams, streams.addresses)

    @abstractmethod
    def enqueue(self, stream: Any, values: Sequence[Arg], groups: tuple[int, int, int]) -> None:
        """Enqueue the work on ``stream`` (the device chose it and ordered its hazards).
        Call it right after ``prepare(args)``, with the ``values`` and ``groups`` that
        returned: a ``KernelProgram`` launches the block that call packed."""

    @abstractmethod
    def add_node(self, graph: Any, deps: Sequence[Any], args: Sequence[Arg]) -> Any:
        """Add this launch to a CUDA graph after ``deps``; returns the node."""

    @abstractmethod
    def set_node(self, graph_exec: Any, node: Any, args: Sequence[Arg]) -> None:
        """Rebind the arguments of this launch's node in an instantiated graph."""

    def unload(self) -> None:
        """Free native resources; called once no queued work uses them."""


class ArgBlock:
    """Kernel arguments in place: one 8-byte slot per param and the ``void*`` array that
    ``kernelParams`` points to."""

    def __init__(self, kinds: Sequence[ParamKind], dtypes: Sequence[DType]) -> None:
        codes = [
            "Q" if kind is not ParamKind.VARIABLE else _SCALAR_CODES[dtype]
            for kind, dtype in zip(kinds, dtypes)
        ]
        self._pack_into = struct.Struct(
            "<" + "".join(f"{c}{8 - struct.calcsize(c)}x" for c in codes)
        ).pack_into
        storage = bytearray(max(8, 8 * len(codes)))
        # A memoryview packs fastest; the ctypes view pins the storage's address.
        self._slots = memoryview(storage)
        self._pinned = (ctypes.c_char * len(storage)).from_buffer(storage)
        base = ctypes.addressof(self._pinned)
        self._pointers = (ctypes.c_void_p * max(1, len(codes)))(
            *(base + 8 * i for i in range(len(codes)))
        )
        self.address = ctypes.addressof(self._pointers)
        """The ``void**`` to pass as ``kernelParams``."""
        self._buffers = [i for i, kind in enumerate(kinds) if kind is not ParamKind.VARIABLE]
        self._halves = [
            (i, dtype)
            for i, (kind, dtype) in enumerate(zip(kinds, dtypes))
            if kind is ParamKind.VARIABLE and dtype in (DType.F16, DType.BF16)
        ]
        """f16 and bf16 scalars: they travel as float, rounded as the kernel's reference
        rounds them."""
        self._floats = [
            i
            for i, (kind, dtype) in enumerate(zip(kinds, dtypes))
            if kind is ParamKind.VARIABLE and dtype is DType.F32
        ]
        self.packed: list[object] = [_EMPTY] * len(codes)
        """The argument objects the slots hold (``_EMPTY`` where they hold none)."""
        self.grid = [0, 0, 0]
        """The work-groups per axis of the launch the slots were packed for."""

    def pack(self, values: Sequence[Arg], groups: tuple[int, int, int]) -> None:
        """Write the checked ``values`` of a launch of ``groups`` into the slots, with one
        ``struct.pack_into``, unless the slots hold these very objects. An int scalar out
        of its C type's range is IncorrectKernelArg; a float one past its dtype's range is
        an infinity, as C converts it. A failed packing forgets what was packed."""
        packed = self.packed
        for value, held in zip(values, packed):
            if value is not held:
                break
        else:
            return  # the grid follows from the scalars: it is the one kept with them
        try:
            try:
                self._pack_into(self._slots, 0, *self._native(values))
            except OverflowError:  # a float past f32's range: an infinity, as C converts
                self._pack_into(self._slots, 0, *self._native(values, round_f32=True))
        except (struct.error, OverflowError) as error:
            packed[:] = [_EMPTY] * len(packed)
            raise BackendError(
                ErrorStatus.INCORRECT_KERNEL_ARG, f"kernel argument out of range: {error}"
            ) from error
        packed[:] = values
        self.grid[:] = groups

    def _native(self, values: Sequence[Arg], *, round_f32: bool = False) -> list[Any]:
        """The values as the slots take them: buffers as their device addresses, f16 and
        bf16 (and, where ``round_f32``, f32) rounded to their dtype."""
        native: list[Any] = list(values)
        for i in self._buffers:
            native[i] = native[i].handle
        for i, dtype in self._halves:
            native[i] = round_to(float(native[i]), dtype)
        if round_f32:
            for i in self._floats:
                native[i] = round_to(float(native[i]), DType.F32)
        return native


@dataclass(frozen=True)
class NativeProgram:
    """What zyx-cuda's native ``Launcher`` and ``Replayer`` need of every program besides
    its ``zyx.native.LaunchLayout`` (native.c reads these fields by name)."""

    schedule: Callable[[Sequence[Arg]], None]
    """The Python path, for every launch the C path hands over."""
    failure: Callable[[int], BackendError]
    """The error of a launch (``cuLaunchKernel``, ``cuGraphLaunch``) that returned this
    result."""
    packed: list[object]
    """The argument objects of the launch the C path repeats, one per param."""
    context: int


@dataclass(frozen=True)
class NativeKernel(NativeProgram):
    """A kernel's, for a ``Launcher``: ``packed`` is ``ArgBlock.packed``, which the C path
    keeps up to date as it packs buffers."""

    grid: list[int]
    """``ArgBlock.grid``."""
    function: int
    block: tuple[int, int, int]
    shared: int
    """Dynamic shared memory bytes."""
    params: int
    """``ArgBlock.address``."""


def log_launch(program: CudaProgram, queue: int, groups: tuple[int, int, int]) -> None:
    """Log a launch of ``program`` on stream ``queue`` (the caller checked ``logged``)."""
    _launch_log.debug(
        "%s: launch %s on stream %d, groups %s", program.device.name, program.name, queue, groups
    )


class KernelProgram(CudaProgram):
    """A compiled kernel: its module, function and prepared argument block."""

    def __init__(
        self, device: CudaDevice, kernel: Kernel, entry: str, image: Image, *, checked: bool = False
    ) -> None:
        super().__init__(device, kernel)
        self._ir = kernel
        self.record: int | None = None
        """A bounds-checked kernel's error record: the address of ``int64 [4]`` of device
        memory of its own (not the pool's, whose count of free bytes it would change)."""
        if checked:
            status = ErrorStatus.MEMORY_ALLOCATION
            self.record = int(check(status, "cuMemAlloc", driver.cuMemAlloc(32)))
            self._clear_record()
        status = ErrorStatus.KERNEL_COMPILATION
        self.module = check(status, "cuModuleLoadData", driver.cuModuleLoadData(image.data))
        self.function = check(
            status, "cuModuleGetFunction", driver.cuModuleGetFunction(self.module, entry.encode())
        )
        self.shared_bytes = shared_bytes(kernel)
        if self.shared_bytes > _STATIC_SHARED_LIMIT:
            attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            check(
                status,
                "cuFuncSetAttribute",
                driver.cuFuncSetAttribute(self.function, attribute, self.shared_bytes),
            )
        hidden = 1 + len(self.buffer_positions) if checked else 0
        self.args = ArgBlock(
            self.param_kinds + (ParamKind.VARIABLE,) * hidden,
            self.param_dtypes + ((DType.U64,) + (DType.I64,) * (hidden - 1) if hidden else ()),
        )
        if not self.symbolic:  # else packing sets it
            self.args.grid[:] = self.groups(())
        self._native_launch = launch_function()
        """zyx-cuda's native ``launch`` (``cuLaunchKernel`` with plain ints), or ``None``:
        cuda-python's binding then."""
        self._function_address = int(self.function)
        self.launcher = self._launcher()
        """zyx-cuda's native ``Launcher`` of this kernel, or ``None`` (see ``_launcher``)."""
        self.submit = self.schedule if self.launcher is None else self.launcher.submit

    def prepare(self, args: Sequence[Arg]) -> Prepared:
        prepared = self.inspect(args)
        if self.record is None:
            self.args.pack(prepared[0], prepared[3])
            return prepared
        values, dtypes = prepared[0], self.param_dtypes
        buffers: list[Any] = [values[i] for i in self.buffer_positions]
        lengths = [b.nbytes // dtypes[i].itemsize for b, i in zip(buffers, self.buffer_positions)]
        self.args.pack((*values, self.record, *lengths), prepared[3])
        return prepared

    def check_record(self) -> None:
        if self.record is None:
            return
        self.device.synchronize()
        found = (ctypes.c_int64 * 4)()
        status = ErrorStatus.KERNEL_SYNC
        check(status, "cuMemcpyDtoH", driver.cuMemcpyDtoH(ctypes.addressof(found), self.record, 32))
        error = bounds_error(self._ir, list(found))
        if error is not None:
            self._clear_record()
            raise error

    def _clear_record(self) -> None:
        status = ErrorStatus.KERNEL_SYNC
        check(status, "cuMemsetD8", driver.cuMemsetD8(self.record, 0, 32))
        check(status, "cuCtxSynchronize", driver.cuCtxSynchronize())

    def enqueue(self, stream: Any, values: Sequence[Arg], groups: tuple[int, int, int]) -> None:
        """Launch the argument block as the ``prepare`` just before packed it, on
        ``stream``: where a kernel is launched in Python."""
        if 0 in groups:  # no work-group: nothing to run (the driver refuses a zero grid)
            return
        gx, gy, gz = groups
        bx, by, bz = self.local_size
        shared, params = self.shared_bytes, self.args.address
        if self._native_launch is not None:
            function = self._function_address
            result = self._native_launch(
                function, gx, gy, gz, bx, by, bz, shared, int(stream), params
            )
        else:
            (result,) = _launch_kernel(
                self.function, gx, gy, gz, bx, by, bz, shared, stream, params, 0
            )
        if result:
            raise self._launch_error(result)

    def _launcher(self) -> Any:
        """zyx-cuda's native ``Launcher`` for this kernel, which runs a launch in C when it
        repeats the packed arguments on a stream without a cross-stream hazard and hands
        every other launch to ``schedule``; ``None`` without the native module, where
        launches are logged, or where it does not apply (no params, or more than a
        ``LaunchLayout`` takes)."""
        launcher, layout = launcher_type(), self.native_layout()
        checked = self.record is not None
        if launcher is None or not self.param_kinds or layout is None or checked:
            return None
        kernel = NativeKernel(
            schedule=self.schedule,
            failure=self._launch_error,
            packed=self.args.packed,
            grid=self.args.grid,
            context=int(self.device.context.handle),
            function=self._function_address,
            block=self.local_size,
            shared=self.shared_bytes,
            params=self.args.address,
        )
        return launcher(layout, kernel)

    def _launch_error(self, result: int) -> BackendError:
        return cuda_error(ErrorStatus.KERNEL_LAUNCH, f"cuLaunchKernel({self.name})", result)

    def node_params(self, args: Sequence[Arg]) -> Any:
        """Kernel node parameters for ``args`` (the driver copies the argument values);
        ``None`` where the launch has no work-group."""
        _, _, _, groups = self.prepare(args)
        if 0 in groups:
            return None
        params = driver.CUDA_KERNEL_NODE_PARAMS()
        params.func = self.function
        params.gridDimX, params.gridDimY, params.gridDimZ = groups
        params.blockDimX, params.blockDimY, params.blockDimZ = self.local_size
        params.sharedMemBytes = self.shared_bytes
        params.kernelParams = self.args.address
        return params

    def add_node(self, graph: Any, deps: Sequence[Any], args: Sequence[Arg]) -> Any:
        params, status = self.node_params(args), ErrorStatus.KERNEL_LAUNCH
        if params is None:  # no work-group: a node that keeps the graph's order, no kernel
            empty = driver.cuGraphAddEmptyNode(graph, list(deps), len(deps))
            return check(status, "cuGraphAddEmptyNode", empty)
        kernel = driver.cuGraphAddKernelNode(graph, list(deps), len(deps), params)
        return check(status, "cuGraphAddKernelNode", kernel)

    def set_node(self, graph_exec: Any, node: Any, args: Sequence[Arg]) -> None:
        """The recording rebuilds its graph where a launch gains or loses its work-groups,
        so ``node`` is a kernel node exactly where ``args`` have work-groups."""
        params = self.node_params(args)
        if params is not None:
            check(
                ErrorStatus.KERNEL_LAUNCH,
                "cuGraphExecKernelNodeSetParams",
                driver.cuGraphExecKernelNodeSetParams(graph_exec, node, params),
            )

    def unload(self) -> None:
        if self.module is None:
            return
        self.device.context.activate()
        check(ErrorStatus.DEINITIALIZATION, "cuModuleUnload", driver.cuModuleUnload(self.module))
        self.module = self.function = None
        if self.record is not None:
            check(ErrorStatus.DEINITIALIZATION, "cuMemFree", driver.cuMemFree(self.record))
            self.record = None
