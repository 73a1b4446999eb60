"""The host device: kernels compiled to C and run on the CPU's cores, synchronously.

A kernel is launched in ``HostDevice.launch``, which checks the arguments under the pool's
lock and runs the program (``CompiledProgram.run``: one ctypes call of its C function).

Where no C compiler works (none installed, or ``ZYX_HOST_COMPILER=none``), the same
kernels run in the numpy interpreter; the device's ``info.name`` and the ``zyx.dev`` log say
so. Launches return when the kernel has finished: the host has nothing to overlap with.

Buffers passed to one launch must not overlap when one of them is written (the kernel's
pointers are ``restrict``), as on every backend.

Bounds-checked (``bounds_checked``, ``zyx.debug.BOUNDS``), kernels are compiled with every
load and store checked (``zyx.codegen.c``); each run passes the buffers' element counts
and an error record, and raises what the record holds after the kernel.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from zyx import debug
from zyx.backend import (
    Arg,
    Buffer,
    Device,
    DeviceInfo,
    Program,
    check_compilable,
)
from zyx.codegen.c import bounds_error
from zyx.dtypes import DType, DTypeCapability, round_to
from zyx.errors import BackendError, ErrorStatus, IRError
from zyx.host import dlpack
from zyx.host.codegen import HostDialect
from zyx.host.compiler import HostCompiler, KernelFunction, Toolchain, find_compiler, toolchain
from zyx.host.cpu import cpu_info
from zyx.host.limits import private_budget
from zyx.host.pool import HostPool
from zyx.ir.interpreter import interpret
from zyx.ir.ops import Kernel
from zyx.staging import HostBytes, address

log = logging.getLogger("zyx.dev")
launch_log = logging.getLogger("zyx.launch")

_LOCAL_MEMORY = 64 * 1024
"""Local memory per group: arrays on the worker thread's stack, small enough to stay in
L1/L2 and far below any thread's stack size."""

_SCALAR_TYPES: dict[DType, type[ctypes._SimpleCData[Any]]] = {
    DType.BOOL: ctypes.c_bool, DType.U8: ctypes.c_uint8, DType.U16: ctypes.c_uint16,
    DType.U32: ctypes.c_uint32, DType.U64: ctypes.c_uint64, DType.I8: ctypes.c_int8,
    DType.I16: ctypes.c_int16, DType.I32: ctypes.c_int32, DType.I64: ctypes.c_int64,
    DType.F16: ctypes.c_float, DType.BF16: ctypes.c_float, DType.F32: ctypes.c_float,
    DType.F64: ctypes.c_double,
}  # fmt: skip
"""The C type a Variable is passed as (its ``value_type`` in the host dialect)."""


class HostDevice(Device):
    """The CPU. ``threads`` caps the worker threads of a kernel (``None``: OpenMP's default,
    one per core unless ``OMP_NUM_THREADS`` says otherwise). With ``interpret``, kernels run
    in the numpy interpreter even where a C compiler works: it checks every load and store
    against its buffer, which makes it the bounds-checked host of tests and fuzzers.
    ``bounds_checked`` compiles every load and store checked (``None``: as ``ZYX_DEBUG``
    says, ``zyx.debug.bounds_checked``)."""

    backend = "host"
    index = 0
    pool: HostPool

    def __init__(
        self,
        pool: HostPool,
        threads: int | None = None,
        interpret: bool = False,
        bounds_checked: bool | None = None,
    ) -> None:
        self.pool = pool
        self.threads = threads
        self.bounds_checked = debug.bounds_checked() if bounds_checked is None else bounds_checked
        self.toolchain = None if interpret else toolchain()
        self._compiler = HostCompiler(self.toolchain) if self.toolchain else None
        self.info = _device_info(self.toolchain, pool, "asked for" if interpret else None)
        log.info("host: opened %s", self.info.name)

    @property
    def name(self) -> str:
        return "host"

    @property
    def interpreted(self) -> bool:
        """Whether kernels run in the numpy interpreter (no working C compiler)."""
        return self._compiler is None

    @property
    def versions(self) -> tuple[str, ...]:
        """The C compiler with its version and flags, the CPU, the worker threads."""
        if self.toolchain is None:
            return ("interpreter",)
        chain = self.toolchain
        return (
            chain.command, chain.version, *chain.flags, cpu_info().model,
            f"threads={self.threads}", f"bounds_checked={self.bounds_checked}",
        )  # fmt: skip

    def compile(self, kernel: Kernel) -> Program:
        check_compilable(kernel, self.info)
        if self._compiler is None:
            return InterpretedProgram(self, kernel)
        assert self.toolchain is not None
        try:  # a barrier the host cannot split into phases
            chain = self.toolchain
            dialect = HostDialect(native_f16=chain.native_f16, wide_vectors=chain.wide_vectors)
            dialect.bounds_checked = self.bounds_checked
            source = dialect.render(kernel)
        except IRError as error:
            raise BackendError(ErrorStatus.KERNEL_COMPILATION, str(error)) from error
        library, function = self._compiler.compile(source)
        return CompiledProgram(self, kernel, library, function, checked=self.bounds_checked)

    def launch(self, program: Program, args: Sequence[Arg]) -> None:
        """Run ``program`` on ``args`` and return when it finished: where a host kernel is
        launched. The pool's lock is held only while the arguments are checked and their
        memory taken: the run holds that memory, so a release during it frees nothing the
        kernel uses, and other threads' launches and copies go on meanwhile."""
        program = self.own(program, HostProgram)
        with self.pool.lock:
            values, _, _, groups = program.inspect(args)
            memory = [values[i].handle for i in program.buffer_positions]  # type: ignore[union-attr]
        if launch_log.isEnabledFor(logging.DEBUG):
            launch_log.debug("host: launch %s groups=%s", program.name, groups)
        program.run(values, memory, self.threads or 0)

    def launch_timed(self, program: Program, args: Sequence[Arg]) -> int:
        start = time.perf_counter_ns()
        self.launch(program, args)
        return time.perf_counter_ns() - start

    def release(self, program: Program) -> None:
        own = self.own(program, HostProgram)
        with self.pool.lock:
            own.retire()
        own.release()

    def synchronize(self) -> None:
        """Nothing is ever pending: launches are synchronous."""

    def dlpack_device(self) -> tuple[int, int]:
        return dlpack.CPU

    def dlpack_export(
        self,
        buf: Buffer,
        dtype: DType,
        shape: tuple[int, ...],
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
    ) -> Any:
        return dlpack.export(self.pool, buf, dtype, shape, stream, max_version)

    def dlpack_import(self, producer: Any) -> tuple[Buffer, DType, tuple[int, ...]]:
        return dlpack.adopt(self.pool, producer)


class HostProgram(Program):
    """A kernel ready to run on the host device."""

    def run(self, values: Sequence[Arg], memory: Sequence[HostBytes], threads: int) -> None:
        """Run on checked ``values`` (``inspect``), whose buffers' memory is ``memory``, in
        buffer param order. Returns when the kernel finished."""
        raise NotImplementedError

    def release(self) -> None:
        """Drop what the program holds (a loaded library stays mapped: ctypes never unloads)."""


class CompiledProgram(HostProgram):
    """A kernel compiled to a shared library.

    The pointer array the C function takes is built once; a launch only rewrites the
    entries whose argument changed since the last launch. One launch of it runs at a time
    (``_running``): the array is the program's.
    """

    def __init__(
        self,
        device: HostDevice,
        kernel: Kernel,
        library: ctypes.CDLL,
        function: KernelFunction,
        *,
        checked: bool = False,
    ) -> None:
        super().__init__(device, kernel)
        self._library: ctypes.CDLL | None = library
        self._function: KernelFunction | None = function
        count = len(kernel.params)
        self._running = threading.Lock()
        self._argv = (ctypes.c_void_p * (count + 2 if checked else count))()
        self._checked: tuple[Kernel, Any, Any] | None = None
        """Where bounds-checked: the kernel, its error record and its element counts, which
        ``argv`` points to past the params."""
        if checked:
            record, lengths = (ctypes.c_int64 * 4)(), (ctypes.c_int64 * max(1, count))()
            self._argv[count] = ctypes.addressof(record)
            self._argv[count + 1] = ctypes.addressof(lengths)
            self._checked = (kernel, record, lengths)
        self._bound: list[object] = [None] * count
        self._scalars: list[tuple[int, ctypes._SimpleCData[Any], DType | None]] = []
        """Per ``Variable``: its position, its C value, and the dtype it is rounded to
        first where the C value is wider (f16 and bf16 travel as float)."""
        for i in self.scalar_positions:
            dtype = self.param_dtypes[i]
            scalar = _SCALAR_TYPES[dtype]()
            self._argv[i] = ctypes.addressof(scalar)
            rounded = dtype if dtype in (DType.F16, DType.BF16) else None
            self._scalars.append((i, scalar, rounded))

    def run(self, values: Sequence[Arg], memory: Sequence[HostBytes], threads: int) -> None:
        with self._running:
            if self._function is None:
                raise BackendError(ErrorStatus.KERNEL_LAUNCH, f"{self.name} was released")
            argv, bound = self._argv, self._bound
            for i, array in zip(self.buffer_positions, memory):
                # `bound` holds the Buffer itself, so an identical one is the same buffer,
                # live when checked, whose memory has not moved.
                if values[i] is not bound[i]:
                    argv[i] = address(array)
                    bound[i] = values[i]
            for i, scalar, rounded in self._scalars:
                value = values[i]
                # f16 rounded once, from the Python float (bf16 through float32, as the IR
                # defines it): converting to float first would round f16 twice.
                scalar.value = value if rounded is None else round_to(cast(float, value), rounded)
            if self._checked is None:
                self._function(argv, threads)
                return
            kernel, record, lengths = self._checked
            for i, array in zip(self.buffer_positions, memory):
                lengths[i] = len(array) // self.param_dtypes[i].itemsize
            self._function(argv, threads)
            error = bounds_error(kernel, record)
            if error is not None:
                ctypes.memset(record, 0, ctypes.sizeof(record))
                raise error

    def release(self) -> None:
        with self._running:  # after the run in flight, if any
            self._function = None
            self._library = None
            self._bound = [None] * len(self._bound)


class InterpretedProgram(HostProgram):
    """A kernel run by the numpy interpreter, on typed views of the host buffers."""

    def __init__(self, device: HostDevice, kernel: Kernel) -> None:
        super().__init__(device, kernel)
        self.kernel = kernel

    def run(self, values: Sequence[Arg], memory: Sequence[HostBytes], threads: int) -> None:
        typed: list[Any] = list(values)
        for i, raw in zip(self.buffer_positions, memory):
            typed[i] = _typed_view(raw, self.param_dtypes[i])
        try:
            interpret(self.kernel, typed)
        except IRError as error:
            raise BackendError(ErrorStatus.KERNEL_LAUNCH, str(error)) from error


def _typed_view(raw: HostBytes, dtype: DType) -> np.ndarray[Any, Any]:
    whole = len(raw) - len(raw) % dtype.itemsize
    return raw[:whole].view(dtype.numpy)


def _device_info(found: Toolchain | None, pool: HostPool, why: str | None) -> DeviceInfo:
    """``why``: the reason kernels are interpreted where a compiler was not looked for."""
    cpu = cpu_info()
    if found is not None:
        how = f"C: {found.describe()}"
    else:
        why = why or find_compiler()[1] or "the C compiler does not work"
        how = f"numpy interpreter: {why}"
    dtypes = {
        dtype: DTypeCapability.FULL
        if dtype.is_float
        else DTypeCapability.STORAGE | DTypeCapability.ARITHMETIC
        for dtype in DType
    }
    return DeviceInfo(
        name=f"{cpu.model}, {cpu.cores} cores ({how})",
        compute=cpu.peak_flops,
        max_global_work_dims=(2**31 - 1, 2**31 - 1, 2**31 - 1),
        max_local_threads=1024,
        max_local_work_dims=(1024, 1024, 1024),
        local_mem_size=_LOCAL_MEMORY,
        max_register_bytes=32 * cpu.vector_bytes,
        preferred_vector_size=cpu.vector_bytes,
        warp_size=1,
        global_mem_size=pool.capacity,
        dtypes=dtypes,
        private_mem_size=private_budget(),  # a group's work-items run on one thread's stack
    )
