"""Programs the CUDA device schedules: compiled kernels here, library calls in ``library``.

A ``KernelProgram`` keeps a prepared argument block: one 8-byte slot per param in a ctypes
buffer and a ``void*`` array pointing at the slots, whose address goes to
``cuLaunchKernel``'s ``kernelParams`` as a plain int (cuda-python passes an int through as
the ``void**``). A launch packs every argument into the slots with one precompiled
``struct.pack_into``: no allocation, no per-argument marshalling in cuda-python.
"""

from __future__ import annotations

import ctypes
import struct
from abc import abstractmethod
from collections.abc import Callable, Sequence
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any, cast

from cuda.bindings import driver

from zyx.backend import Arg, Buffer, Program
from zyx.codegen.c import round_to
from zyx.dtypes import DType
from zyx.errors import BackendError, ErrorStatus
from zyx.ir.ops import Kernel, ParamKind
from zyx_cuda.codegen import shared_bytes
from zyx_cuda.compiler import Image
from zyx_cuda.errors import check, cuda_error

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
_handle = attrgetter("handle")


class CudaProgram(Program):
    """A program scheduled on the device's streams by its buffer params' read/write sets."""

    device: CudaDevice

    def __init__(self, device: CudaDevice, kernel: Kernel) -> None:
        super().__init__(device, kernel)
        kinds = self.param_kinds
        self.buffer_positions = tuple(i for i, k in enumerate(kinds) if k is not ParamKind.VARIABLE)
        self.reads = _picker(tuple(i for i, k in enumerate(kinds) if k is ParamKind.GLOBAL))
        """The buffers among ``args`` that the program only reads, in param order."""
        self.writes = _picker(tuple(i for i, k in enumerate(kinds) if k is ParamKind.GLOBAL_MUT))
        """The buffers among ``args`` that the program writes, in param order."""

    @abstractmethod
    def enqueue(self, stream: Any, args: Sequence[Arg]) -> None:
        """Enqueue the work on ``stream`` (the device chose it and ordered its hazards)."""

    @abstractmethod
    def add_node(self, graph: Any, deps: Sequence[Any], args: Sequence[Arg]) -> Any:
        """Add this launch to a CUDA graph after ``deps``; returns the node."""

    @abstractmethod
    def set_node(self, graph_exec: Any, node: Any, args: Sequence[Arg]) -> None:
        """Rebind the arguments of this launch's node in an instantiated graph."""

    def unload(self) -> None:
        """Free native resources; called once no queued work uses them."""


def _picker(positions: tuple[int, ...]) -> Callable[[Sequence[Arg]], tuple[Buffer, ...]]:
    """A function picking the args at ``positions`` as a tuple (``itemgetter``, which runs
    in C, returns a bare item for one position)."""
    if not positions:
        return lambda args: ()
    if len(positions) == 1:
        (position,) = positions
        return lambda args: (cast(Buffer, args[position]),)
    return cast("Callable[[Sequence[Arg]], tuple[Buffer, ...]]", itemgetter(*positions))


class ArgBlock:
    """Kernel arguments in place: one 8-byte slot per param and the ``void*`` array that
    ``kernelParams`` points to."""

    def __init__(self, kinds: Sequence[ParamKind], dtypes: Sequence[DType]) -> None:
        codes = [
            "Q" if kind is not ParamKind.VARIABLE else _SCALAR_CODES[dtype]
            for kind, dtype in zip(kinds, dtypes)
        ]
        self._struct = struct.Struct("<" + "".join(f"{c}{8 - struct.calcsize(c)}x" for c in codes))
        storage = bytearray(max(8, self._struct.size))
        # A memoryview packs fastest; the ctypes view pins the storage's address.
        self._slots = memoryview(storage)
        self._pinned = (ctypes.c_char * len(storage)).from_buffer(storage)
        base = ctypes.addressof(self._pinned)
        self._pointers = (ctypes.c_void_p * max(1, len(codes)))(
            *(base + 8 * i for i in range(len(codes)))
        )
        self.address = ctypes.addressof(self._pointers)
        """The ``void**`` to pass as ``kernelParams``."""
        self._buffers = tuple(i for i, kind in enumerate(kinds) if kind is not ParamKind.VARIABLE)
        self._only_buffers = len(self._buffers) == len(codes)
        self._packed: tuple[Arg, ...] = ()
        self._rounded = tuple(
            (i, dtype)
            for i, (kind, dtype) in enumerate(zip(kinds, dtypes))
            if kind is ParamKind.VARIABLE and dtype in (DType.F16, DType.BF16)
        )

    def pack(self, args: Sequence[Arg]) -> None:
        """Write ``args`` (already checked by ``Program.check_args``) into the slots."""
        if self._only_buffers:
            # The same buffers again (a loop, a benchmark): the slots already hold them.
            key = tuple(args)
            if key != self._packed:
                self._struct.pack_into(self._slots, 0, *map(_handle, key))
                self._packed = key
            return
        values: list[Any] = list(args)
        for i in self._buffers:
            values[i] = _handle(values[i])
        # f16/bf16 scalars travel as float; round them as the kernel's reference does.
        for i, dtype in self._rounded:
            values[i] = round_to(float(values[i]), dtype)
        try:
            self._struct.pack_into(self._slots, 0, *values)
        except struct.error as error:
            raise BackendError(
                ErrorStatus.INCORRECT_KERNEL_ARG, f"kernel argument out of range: {error}"
            ) from error


class KernelProgram(CudaProgram):
    """A compiled kernel: its module, function and prepared argument block."""

    def __init__(self, device: CudaDevice, kernel: Kernel, entry: str, image: Image) -> None:
        super().__init__(device, kernel)
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
        self.args = ArgBlock(self.param_kinds, self.param_dtypes)

    def enqueue(self, stream: Any, args: Sequence[Arg]) -> None:
        self.args.pack(args)
        gx, gy, gz = self.groups(args)
        bx, by, bz = self.local_size
        (result,) = _launch_kernel(
            self.function, gx, gy, gz, bx, by, bz, self.shared_bytes, stream, self.args.address, 0
        )
        if result:
            raise cuda_error(ErrorStatus.KERNEL_LAUNCH, f"cuLaunchKernel({self.name})", result)

    def node_params(self, args: Sequence[Arg]) -> Any:
        """Kernel node parameters for ``args``; the driver copies the argument values."""
        self.args.pack(args)
        params = driver.CUDA_KERNEL_NODE_PARAMS()
        params.func = self.function
        params.gridDimX, params.gridDimY, params.gridDimZ = self.groups(args)
        params.blockDimX, params.blockDimY, params.blockDimZ = self.local_size
        params.sharedMemBytes = self.shared_bytes
        params.kernelParams = self.args.address
        return params

    def add_node(self, graph: Any, deps: Sequence[Any], args: Sequence[Arg]) -> Any:
        return check(
            ErrorStatus.KERNEL_LAUNCH,
            "cuGraphAddKernelNode",
            driver.cuGraphAddKernelNode(graph, list(deps), len(deps), self.node_params(args)),
        )

    def set_node(self, graph_exec: Any, node: Any, args: Sequence[Arg]) -> None:
        check(
            ErrorStatus.KERNEL_LAUNCH,
            "cuGraphExecKernelNodeSetParams",
            driver.cuGraphExecKernelNodeSetParams(graph_exec, node, self.node_params(args)),
        )

    def unload(self) -> None:
        if self.module is None:
            return
        self.device.context.activate()
        check(ErrorStatus.DEINITIALIZATION, "cuModuleUnload", driver.cuModuleUnload(self.module))
        self.module = self.function = None
