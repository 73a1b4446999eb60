"""One CUDA GPU: its primary context, streams, pool, compiler and launches.

A kernel is launched where ``zyx_cuda.program`` says, in its first lines: native.c's
``Launcher.submit`` (C) or ``KernelProgram.schedule`` (Python). ``CudaDevice.launch`` hands
every launch to its program's ``submit``, which takes the lock the device shares with its
pool (in C, where it is the native Launcher's).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from cuda.bindings import driver

from zyx import debug, nvidia
from zyx.backend import (
    Arg,
    Buffer,
    Device,
    DeviceInfo,
    Program,
    Recording,
    check_compilable,
    not_a_program,
)
from zyx.dtypes import DType, DTypeCapability
from zyx.errors import BackendError, ErrorStatus
from zyx.ir import Kernel
from zyx_cuda.codegen import CudaDialect
from zyx_cuda.compiler import Compiler, nvrtc_version
from zyx_cuda.context import Context
from zyx_cuda.errors import check
from zyx_cuda.graphs import GraphRecording
from zyx_cuda.pool import CudaPool
from zyx_cuda.program import CudaProgram, KernelProgram, log_launch
from zyx_cuda.streams import Streams

_log = logging.getLogger("zyx.dev")
_A = driver.CUdevice_attribute


class CudaDevice(Device):
    """A GPU driven through its primary context and ``queues`` streams."""

    backend = "cuda"
    pool: CudaPool

    def __init__(
        self, ordinal: int, *, queues: int = 8, bounds_checked: bool | None = None
    ) -> None:
        self.index = ordinal
        self.bounds_checked = debug.bounds_checked() if bounds_checked is None else bounds_checked
        """Whether kernels check every load and store and each launch waits for its kernel
        and raises what it found (``zyx.debug.BOUNDS``; ``None``: as ``ZYX_DEBUG`` says)."""
        self.context = Context(ordinal)
        self.context.activate()
        self.info = query_info(self.context.device)
        self.streams = Streams(queues)
        self.pool = CudaPool(self.name, self.context, self.streams)
        self._lock = self.pool.lock
        assert self.info.compute_capability is not None
        self.compiler = Compiler(self.info.compute_capability)
        self.dialect = CudaDialect()
        self.dialect.bounds_checked = self.bounds_checked
        timing = driver.CUevent_flags.CU_EVENT_DEFAULT
        self._timers = [
            check(ErrorStatus.INITIALIZATION, "cuEventCreate", driver.cuEventCreate(timing))
            for _ in range(2)
        ]
        _log.debug(
            "%s: %s, sm_%d%d, %d streams",
            self.name,
            self.info.name,
            *self.info.compute_capability,
            queues,
        )

    @property
    def versions(self) -> tuple[str, ...]:
        """The driver's CUDA version, NVRTC's, the target it compiles for."""
        cuda = check(ErrorStatus.DEVICE_QUERY, "cuDriverGetVersion", driver.cuDriverGetVersion())
        nvrtc = ".".join(map(str, nvrtc_version()))
        checked = f"bounds_checked={self.bounds_checked}"
        return (f"driver {cuda}", f"nvrtc {nvrtc}", self.compiler.target, checked)

    def compile(self, kernel: Kernel) -> KernelProgram:
        check_compilable(kernel, self.info)
        source = self.dialect.render(kernel)
        image = self.compiler.compile(source)
        self.context.activate()
        return KernelProgram(self, kernel, source.name, image, checked=self.bounds_checked)

    def launch(self, program: Program, args: Sequence[Arg]) -> None:
        try:  # costs nothing where it does not raise, unlike getattr() or isinstance()
            ours = program.device is self
        except AttributeError:
            ours = False
        if not ours:
            raise not_a_program(self, program)
        program.submit(args)  # type: ignore[attr-defined]  # ours; cast() costs a call

    def launch_timed(self, program: Program, args: Sequence[Arg]) -> int:
        program = self.own(program, CudaProgram)
        with self._lock:
            values, reads, writes, groups = program.prepare(args)
            self._synchronize()
            streams, (start, end) = self.streams, self._timers
            stream = streams.handles[0]
            status = ErrorStatus.KERNEL_LAUNCH
            check(status, "cuEventRecord", driver.cuEventRecord(start, stream))
            program.enqueue(stream, values, groups)
            check(status, "cuEventRecord", driver.cuEventRecord(end, stream))
            streams.commit(0, reads, writes)
            if program.logged:
                log_launch(program, 0, groups)
            check(ErrorStatus.KERNEL_SYNC, "cuEventSynchronize", driver.cuEventSynchronize(end))
            streams.done(0)
            program.check_record()
            ms = check(
                ErrorStatus.KERNEL_SYNC,
                "cuEventElapsedTime",
                driver.cuEventElapsedTime(start, end),
            )
        return round(float(ms) * 1e6)

    def release(self, program: Program) -> None:
        """Unload the program's module once the work queued so far is done."""
        own = self.own(program, CudaProgram)
        with self._lock:
            own.retire()
            self.context.activate()
            self.streams.after(self.streams.now().values(), own.unload)

    def synchronize(self) -> None:
        with self._lock:
            self._synchronize()

    def _synchronize(self) -> None:
        self.context.activate()
        self.streams.synchronize()

    def record(self) -> Recording:
        """A CUDA graph of the launches; bounds-checked, the contract's launch-by-launch
        replay instead, which checks each launch."""
        return Recording(self) if self.bounds_checked else GraphRecording(self)

    # The DLPack hooks (zyx.backend): zyx_cuda.interop imports this module, hence the
    # imports inside them.

    def dlpack_device(self) -> tuple[int, int]:
        from zyx_cuda.interop import KDL_CUDA

        return (KDL_CUDA, self.index)

    def dlpack_export(
        self,
        buf: Buffer,
        dtype: DType,
        shape: tuple[int, ...],
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
    ) -> Any:
        from zyx_cuda.interop import as_array

        return as_array(buf, dtype, shape).__dlpack__(stream=stream, max_version=max_version)

    def dlpack_import(self, producer: Any) -> tuple[Buffer, DType, tuple[int, ...]]:
        from zyx_cuda.interop import import_dlpack

        try:
            return import_dlpack(producer, self)
        except BackendError as error:  # memory zyx cannot use in place: the caller copies
            if error.status is not ErrorStatus.INCORRECT_KERNEL_ARG:
                raise
            raise BufferError(str(error)) from error


def query_info(device: Any) -> DeviceInfo:
    """What codegen and scheduling need, from the device's attributes."""

    def attr(attribute: Any) -> int:
        value = check(
            ErrorStatus.DEVICE_QUERY,
            "cuDeviceGetAttribute",
            driver.cuDeviceGetAttribute(attribute, device),
        )
        return int(value)

    name = check(ErrorStatus.DEVICE_QUERY, "cuDeviceGetName", driver.cuDeviceGetName(256, device))
    total = check(ErrorStatus.DEVICE_QUERY, "cuDeviceTotalMem", driver.cuDeviceTotalMem(device))
    cc = (
        attr(_A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
        attr(_A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
    )
    sms = attr(_A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
    clock_khz = attr(_A.CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
    registers = attr(_A.CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)
    return DeviceInfo(
        name=name.split(b"\0", 1)[0].decode(),
        compute=nvidia.peak_flops(sms, clock_khz * 1e3, cc),
        max_global_work_dims=(
            attr(_A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X),
            attr(_A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
            attr(_A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z),
        ),
        max_local_threads=attr(_A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
        max_local_work_dims=(
            attr(_A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X),
            attr(_A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y),
            attr(_A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z),
        ),
        # Kernels use dynamic shared memory, which reaches the opt-in maximum.
        local_mem_size=attr(_A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
        max_register_bytes=nvidia.register_bytes(registers),
        preferred_vector_size=16,
        warp_size=attr(_A.CU_DEVICE_ATTRIBUTE_WARP_SIZE),
        global_mem_size=int(total),
        tensor_cores=cc >= (7, 0),
        shuffle=True,
        compute_capability=cc,
        dtypes=dtype_capabilities(cc),
    )


def dtype_capabilities(cc: tuple[int, int]) -> dict[DType, DTypeCapability]:
    """What each dtype can do on compute capability ``cc``: f16 arithmetic from sm_53, bf16
    only from sm_80, tensor cores for f16 from sm_70 and for bf16, tf32 (f32) and i8 later."""
    full, basic = DTypeCapability.FULL, DTypeCapability.STORAGE | DTypeCapability.ARITHMETIC
    tensor = DTypeCapability.TENSOR_CORE
    caps: dict[DType, DTypeCapability] = {d: basic for d in DType if not d.is_float}
    caps[DType.F32] = full | (tensor if cc >= (8, 0) else DTypeCapability.NONE)
    caps[DType.F64] = full
    caps[DType.F16] = (full if cc >= (5, 3) else DTypeCapability.STORAGE) | (
        tensor if cc >= (7, 0) else DTypeCapability.NONE
    )
    if cc >= (8, 0):
        caps[DType.BF16] = full | tensor
    if cc >= (7, 5):
        caps[DType.I8] |= tensor
    return caps


def open_devices(ordinals: Sequence[int], count: int, queues: int) -> list[CudaDevice]:
    """Devices for ``ordinals`` of the ``count`` the driver sees (``driver.initialize``); an
    ordinal it does not have is DeviceEnumeration."""
    missing = [o for o in ordinals if not 0 <= o < count]
    if missing:
        raise BackendError(
            ErrorStatus.DEVICE_ENUMERATION,
            f"cuda.device_ids names {missing}, but the driver sees {count} device(s)",
        )
    return [CudaDevice(o, queues=queues) for o in ordinals]
