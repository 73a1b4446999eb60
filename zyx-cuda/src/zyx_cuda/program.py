"""Programs the CUDA device schedules: compiled kernels here, library calls in ``library``.

``CudaDevice.launch`` calls ``program.submit``, an attribute each program sets. Where a
kernel is launched:

- ``KernelProgram._specialize_submit``: the generated Python ``submit`` (its ``launch`` lines:
  native.c's ``launch`` where the native module is built, else cuda-python's call);
- native.c ``launch_and_commit``: the native ``Launcher``'s C path, which is ``submit``
  where the module is built (``KernelProgram._native_submit``) and hands the launches it
  does not run to the generated function;
- ``KernelProgram.enqueue``: cuda-python's ``cuLaunchKernel``, for ``CudaDevice.launch_timed``;
- ``GraphRecording.replay`` (``graphs``): ``cuGraphLaunch`` of the nodes ``add_node`` made;
- ``CudaProgram.schedule``: ``submit`` of a ``LibraryProgram``, whose ``enqueue`` calls the
  library.

A ``KernelProgram`` keeps a prepared argument block: one 8-byte slot per param in a ctypes
buffer and a ``void*`` array pointing at the slots, whose address is ``cuLaunchKernel``'s
``kernelParams``. Its generated ``submit`` (``Program.specialize``) is the argument checks,
one precompiled ``struct.pack_into`` into the slots, the stream choice and hazard
bookkeeping of ``Streams.inline``, and the ``cuLaunchKernel`` call: straight-line code, no
allocation beyond the call's own. The native ``Launcher`` in front of it runs in C a launch
that repeats the packed arguments, or changes only buffers, on a stream without a
cross-stream hazard.

Whether a program logs its launches (``zyx.launch`` at DEBUG, ``ZYX_DEBUG=32``) is decided
once, when it is made (``logged``): a logging kernel gets a generated ``submit`` with the log
call and no ``Launcher`` (its C path does not log); a kernel that does not log has no check
for it on its launch path (``schedule``, a library program's, tests ``logged``).
"""

from __future__ import annotations

import ctypes
import logging
import struct
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from cuda.bindings import driver

from zyx.backend import Arg, Buffer, Prepared, Program
from zyx.dtypes import DType, round_to
from zyx.errors import BackendError, ErrorStatus
from zyx.ir.ops import Kernel, ParamKind
from zyx.native import tracked_params
from zyx.streams import Access
from zyx_cuda.codegen import shared_bytes
from zyx_cuda.compiler import Image
from zyx_cuda.context import current_context
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
        self.prepare: Callable[[Sequence[Arg]], Prepared] = self.inspect
        """``inspect``, and where the program has one, readies its argument block for the
        next ``enqueue``: the launch path's one pass over the arguments."""
        self.logged = _launch_log.isEnabledFor(logging.DEBUG)
        """Whether its launches are logged on ``zyx.launch``, decided once, here."""
        self.submit: Callable[[Sequence[Arg]], None] = self.schedule
        """``Device.launch`` of this program, its device already checked: ``schedule``, or
        a ``KernelProgram``'s generated function or native ``Launcher``."""

    def schedule(self, args: Sequence[Arg]) -> None:
        """The launch path of a program without a generated one: the arguments checked
        before any native call, then a stream chosen, its hazards ordered, the work
        enqueued and recorded."""
        reads, writes, groups = self.prepare(args)
        device = self.device
        device.context.activate()
        streams = device.streams
        queue = streams.select(reads, writes)
        self.enqueue(streams.handles[queue], args, groups)
        streams.commit(queue, reads, writes)
        if self.logged:
            log_launch(self, queue, groups)

    def retire(self) -> None:
        super().retire()
        self.prepare = self.submit = self.refused

    @abstractmethod
    def enqueue(self, stream: Any, args: Sequence[Arg], groups: tuple[int, int, int]) -> None:
        """Enqueue the work on ``stream`` (the device chose it and ordered its hazards).
        Call it right after ``prepare(args)``, with the ``groups`` that returned: a
        ``KernelProgram`` launches the block that call packed, not ``args``."""

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
        self._kinds, self._dtypes = tuple(kinds), tuple(dtypes)
        self.packed: list[object] = [_EMPTY] * len(codes)
        """The argument objects the slots hold (``_EMPTY`` where they hold none)."""
        self.grid = [0, 0, 0]
        """The work-groups per axis of the launch the slots were packed for."""

    def packing(self) -> tuple[list[str], dict[str, object]]:
        """Lines for ``Program.specialize`` that write a launch's checked arguments ``a0``,
        ``a1``, ... into the slots with one ``struct.pack_into``, and the names they use. An
        int scalar out of its C type's range is IncorrectKernelArg; a float one past its
        dtype's range is an infinity."""
        values, rounded = [], []
        for i, (kind, dtype) in enumerate(zip(self._kinds, self._dtypes)):
            if kind is not ParamKind.VARIABLE:
                values.append(f"a{i}.handle")
            elif dtype in (DType.F16, DType.BF16):
                # They travel as float; rounded as the kernel's reference rounds them.
                values.append(f"round_to(float(a{i}), DType.{dtype.name})")
            else:
                values.append(f"a{i}")
            f32 = kind is ParamKind.VARIABLE and dtype is DType.F32
            rounded.append(f"round_to(float(a{i}), DType.F32)" if f32 else values[-1])
        if not values:
            return [], {}
        args = [f"a{i}" for i in range(len(values))]
        # The slots keep what was packed last: a launch with the same argument objects (the
        # same buffers, say) skips the packing. A failed packing forgets them. The grid
        # follows from the scalars, so it is kept with them.
        lines = [
            f"if {' or '.join(f'{a} is not packed[{i}]' for i, a in enumerate(args))}:",
            "    try:",
            "        try:",
            f"            pack_into(slots, 0, {', '.join(values)})",
            "        except OverflowError:  # a float past f32's range: an infinity, as C converts",
            f"            pack_into(slots, 0, {', '.join(rounded)})",
            "    except (struct_error, OverflowError) as error:",
            "        packed[:] = unpacked",
            "        raise out_of_range(error) from error",
            f"    packed[:] = ({', '.join(args)},)",
            "    grid[:] = (g0, g1, g2)",
        ]
        names = {
            "pack_into": self._struct.pack_into,
            "slots": self._slots,
            "packed": self.packed,
            "grid": self.grid,
            "unpacked": [_EMPTY] * len(values),
            "struct_error": struct.error,
            "out_of_range": _out_of_range,
            "round_to": round_to,
            "DType": DType,
        }
        return lines, names


def log_launch(program: CudaProgram, queue: int, groups: tuple[int, int, int]) -> None:
    """Log a launch of ``program`` on stream ``queue`` (the caller checked ``logged``)."""
    _launch_log.debug(
        "%s: launch %s on stream %d, groups %s", program.device.name, program.name, queue, groups
    )


def _out_of_range(error: struct.error) -> BackendError:
    return BackendError(ErrorStatus.INCORRECT_KERNEL_ARG, f"kernel argument out of range: {error}")


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
        if all(isinstance(d, int) for d in self.global_size):  # else packing sets it
            self.args.grid[:] = self.groups(())
        pack, names = self.args.packing()
        self.prepare = self.specialize(pack, names)
        generated = self._specialize_submit(pack, names)
        self.submit = self._native_submit(generated) or generated

    def _specialize_submit(
        self, pack: list[str], names: dict[str, object]
    ) -> Callable[[Sequence[Arg]], None]:
        """``submit`` as one generated function: ``prepare``'s checks and packing (``pack``,
        ``names``), then the streams' scheduling (``Streams.inline``) around the
        ``cuLaunchKernel`` call, with every constant of the call bound in. It saves the half
        of zyx's time per launch that went to Python calls."""
        streams, fast = self.device.streams, launch_function()
        bx, by, bz = self.local_size
        constants = f"{bx}, {by}, {bz}, {self.shared_bytes}, stream, {self.args.address}"
        launch = [
            f"result = native_launch({int(self.function)}, g0, g1, g2, {constants})"
            if fast is not None
            else f"(result,) = launch_kernel(function, g0, g1, g2, {constants}, 0)",
            "if result:",
            "    raise launch_error(result)",
        ]
        if self.logged:
            launch.append("log_launch(program, queue, (g0, g1, g2))")
        schedule, scheduling = streams.inline(
            self.arg_names(ParamKind.GLOBAL),
            self.arg_names(ParamKind.GLOBAL_MUT),
            launch,
            address=fast is not None,
        )
        work = ["if current.context is not context:", "    context.activate()", *schedule]
        symbolic = [f"g{axis}" for axis, d in enumerate(self.global_size) if not isinstance(d, int)]
        if symbolic:  # a Variable may leave an axis no work-group: nothing to launch then
            work = [f"if {' and '.join(symbolic)}:", *(f"    {line}" for line in work)]
        submit = self.specialize(
            [*pack, *work],
            {
                **names,
                **scheduling,
                "launch_kernel": _launch_kernel,
                "native_launch": fast,
                "function": self.function,
                "launch_error": self._launch_error,
                "current": current_context,
                "context": self.device.context,
                "log_launch": log_launch,
                "program": self,
            },
            returns=False,
        )
        return cast("Callable[[Sequence[Arg]], None]", submit)

    def _native_submit(
        self, generated: Callable[[Sequence[Arg]], None]
    ) -> Callable[[Sequence[Arg]], None] | None:
        """``generated`` behind zyx-cuda's native ``Launcher``, which runs a launch in C
        when it repeats the packed arguments on a stream without a cross-stream hazard, and
        hands every other launch to ``generated``; ``None`` without the native module, where
        launches are logged, or where it does not apply (no params, more than 64, or more
        than 32 buffers)."""
        launcher = launcher_type()
        tracked = tracked_params(self.param_kinds)
        if launcher is None or self.logged or not self.param_kinds or tracked is None:
            return None
        reads, writes = tracked
        streams = self.device.streams
        native = launcher(
            generated, self.args.packed, self.args.grid, reads, writes, streams.tracker.load,
            streams.issued, streams.reached, streams.tracker.track, self._launch_error,
            self.device.pool, Buffer, Access,
            tuple(int(handle) for handle in streams.handles), int(self.device.context.handle),
            int(self.function), self.local_size, self.shared_bytes, self.args.address,
        )  # fmt: skip
        return cast("Callable[[Sequence[Arg]], None]", native.submit)

    def _launch_error(self, result: int) -> BackendError:
        return cuda_error(ErrorStatus.KERNEL_LAUNCH, f"cuLaunchKernel({self.name})", result)

    def enqueue(self, stream: Any, args: Sequence[Arg], groups: tuple[int, int, int]) -> None:
        """Launch the argument block as the ``prepare(args)`` just before packed it (``args``
        itself is not read)."""
        if 0 in groups:  # no work-group: nothing to run (the driver refuses a zero grid)
            return
        gx, gy, gz = groups
        bx, by, bz = self.local_size
        (result,) = _launch_kernel(
            self.function, gx, gy, gz, bx, by, bz, self.shared_bytes, stream, self.args.address, 0
        )
        if result:
            raise self._launch_error(result)

    def node_params(self, args: Sequence[Arg]) -> Any:
        """Kernel node parameters for ``args`` (the driver copies the argument values);
        ``None`` where the launch has no work-group."""
        _, _, groups = self.prepare(args)
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
