"""OpenCL devices: enumeration, what each can do, compiling and launching kernels.

Each device gets its own context, its ``queues`` in-order queues and a scheduler over
them (``zyx_opencl.scheduler``), a pool (``zyx_opencl.pool``) and a compiler with a disk
cache (``zyx_opencl.compiler``).

The launch path is code generated per program, in two parts: ``submit`` checks a
launch's arguments (``Program.specialize``) and appends it to the scheduler's window;
``enqueue``, when the window is enqueued, chooses its queue and waits, sets the kernel's
arguments where they differ from the ones it last ran with, enqueues it without an event
(``zyx_opencl.native``, else pyopencl) and records it by sequence number
(``Scheduler.inline``). Where zyx-opencl's native module is built, both parts run in C
for the launches that repeat the shape of an earlier one (``Scheduler.enqueuer``), and
the generated functions take the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
import pyopencl as cl

from zyx import nvidia
from zyx.backend import (
    Arg,
    Device,
    DeviceInfo,
    Program,
    check_compilable,
    generate,
    not_a_program,
)
from zyx.dtypes import DType, DTypeCapability, round_to
from zyx.errors import BackendError, ErrorStatus
from zyx.ir import Kernel, ParamKind
from zyx_opencl.codegen import OpenCLDialect
from zyx_opencl.compiler import Compiler
from zyx_opencl.config import OpenCLSection
from zyx_opencl.native import launcher
from zyx_opencl.pool import OpenCLPool
from zyx_opencl.scheduler import Scheduler, Work, enqueue_failure

_log = logging.getLogger("zyx.dev")
_asm_log = logging.getLogger("zyx.asm")

_INT32_MAX = 2**31 - 1
_CUDA_GRID = (_INT32_MAX, 65535, 65535)
"""NVIDIA's OpenCL maps work-groups onto a CUDA grid, whose y and z are 16-bit."""


def device_info(device: cl.Device) -> DeviceInfo:
    """What codegen and scheduling need, from ``clGetDeviceInfo``."""
    extensions = frozenset(device.extensions.split())
    on_nvidia = "cl_nv_device_attribute_query" in extensions
    local = tuple(device.max_work_item_sizes) + (1, 1)
    address_limit = 2**device.address_bits - 1
    # Work-groups per axis: int32 group ids everywhere, and the item count must fit size_t.
    groups = _CUDA_GRID if on_nvidia else (_INT32_MAX,) * 3
    max_groups = tuple(min(g, address_limit // max(1, n)) for g, n in zip(groups, local))
    # Elsewhere 64 32-bit registers, a common GPU work-item's share.
    registers = nvidia.register_bytes(device.registers_per_block_nv) if on_nvidia else 256
    return DeviceInfo(
        name=device.name.strip(),
        compute=_flops(device),
        max_global_work_dims=(max_groups[0], max_groups[1], max_groups[2]),
        max_local_threads=device.max_work_group_size,
        max_local_work_dims=(local[0], local[1], local[2]),
        local_mem_size=device.local_mem_size,
        max_register_bytes=registers,
        preferred_vector_size=4 * device.preferred_vector_width_float,
        warp_size=_warp_size(device, extensions),
        global_mem_size=device.global_mem_size,
        tensor_cores="cl_intel_subgroup_matrix_multiply_accumulate" in extensions,
        compute_capability=(
            (device.compute_capability_major_nv, device.compute_capability_minor_nv)
            if on_nvidia
            else None
        ),
        dtypes=_dtypes(device, extensions),
    )


def _flops(device: cl.Device) -> float:
    """Peak f32 FLOP/s, a guess: compute units × clock × lanes per unit × 2 (FMA)."""
    mhz = device.max_clock_frequency or 1000  # Intel's CPU runtime reports 0 MHz
    if "cl_nv_device_attribute_query" in device.extensions.split():
        cc = (device.compute_capability_major_nv, device.compute_capability_minor_nv)
        return nvidia.peak_flops(device.max_compute_units, mhz * 1e6, cc)
    if device.type & cl.device_type.GPU:
        lanes = 64  # an AMD CU
    else:
        lanes = device.native_vector_width_float * 2  # two vector FMA pipes per core
    return float(device.max_compute_units * mhz * 1e6 * lanes * 2)


def _warp_size(device: cl.Device, extensions: frozenset[str]) -> int:
    """NVIDIA's warp or AMD's wavefront; 1 where the device does not say."""
    if "cl_nv_device_attribute_query" in extensions:
        return int(device.warp_size_nv)
    if "cl_amd_device_attribute_query" in extensions:
        return int(device.wavefront_width_amd)
    return 1


def _dtypes(device: cl.Device, extensions: frozenset[str]) -> dict[DType, DTypeCapability]:
    """f16 and bf16 always work (stored as half/ushort, computed in float); f64 only with
    ``cl_khr_fp64``; matrix units take int8, f16 and bf16 with Intel's extension."""
    arithmetic = DTypeCapability.STORAGE | DTypeCapability.ARITHMETIC
    caps = {dtype: arithmetic for dtype in DType if not dtype.is_float}
    caps |= dict.fromkeys((DType.F16, DType.BF16, DType.F32), DTypeCapability.FULL)
    if "cl_khr_fp64" in extensions or device.double_fp_config:
        caps[DType.F64] = DTypeCapability.FULL
    if "cl_intel_subgroup_matrix_multiply_accumulate" in extensions:
        for dtype in (DType.I8, DType.U8, DType.F16, DType.BF16):
            caps[dtype] |= DTypeCapability.TENSOR_CORE
    return caps


_SCALAR_DTYPES = {
    DType.BOOL: np.uint8, DType.F16: np.float32, DType.BF16: np.float32,
}  # fmt: skip
"""Scalar arguments whose OpenCL type differs from their numpy dtype (``value_type``)."""


class OpenCLProgram(Program):
    """A built kernel: the ``cl.Kernel`` with the arguments it last ran with, and its
    global size (work-items per axis, as OpenCL counts them). A static global size outside
    the device's limits was refused at compile time (``check_compilable``); one that depends on
    a ``Variable`` is checked at each launch."""

    device: OpenCLDevice

    def __init__(self, device: OpenCLDevice, kernel: Kernel, cl_kernel: cl.Kernel) -> None:
        super().__init__(device, kernel)
        self.kernel = cl_kernel
        """Deleted by ``OpenCLDevice.release``."""
        kinds = self.param_kinds
        self.buffer_positions = tuple(i for i, k in enumerate(kinds) if k is not ParamKind.VARIABLE)
        self.scalar_positions = tuple(i for i, k in enumerate(kinds) if k is ParamKind.VARIABLE)
        self._halves = tuple(
            (i, dtype)
            for i in self.scalar_positions
            if (dtype := self.param_dtypes[i]) in (DType.F16, DType.BF16)
        )
        """f16 and bf16 scalars: passed as float, so rounded to their dtype first, f16 once
        from the Python float (through float32 it would round twice), bf16 through float32
        as the IR defines it."""
        # pyopencl packs scalars by these dtypes in one call (set_arg one by one costs µs).
        cl_kernel.set_scalar_arg_dtypes([
            None if kind is not ParamKind.VARIABLE else _SCALAR_DTYPES.get(dtype, dtype.numpy)
            for kind, dtype in zip(kinds, self.param_dtypes)
        ])  # fmt: skip
        self.bound: tuple[Arg, ...] | None = None
        """The arguments the kernel holds, as set by the last ``bind``."""
        self.fixed_work = None if self.symbolic else self._work(self.groups(()))
        """The global work of every launch; ``None`` where it depends on a ``Variable``
        (or where there is no work-group)."""
        submit, enqueue = self._specialize_submit(), self._specialize_enqueue()
        scheduler = self.device.scheduler
        native = scheduler.enqueuer(self, submit, enqueue, self._failure) if launcher() else None
        self.submit = native.submit if native else submit
        """``Device.launch`` of this program, its device already checked."""
        self.enqueue = native.enqueue if native else enqueue
        """The scheduler's ``Launchable.enqueue``."""

    def work(self, groups: tuple[int, int, int]) -> tuple[int, int, int] | None:
        """Global work-items per axis for a launch of ``groups`` work-groups (``inspect``
        says how many); ``None`` when there is no work-group."""
        return self.fixed_work if self.fixed_work is not None else self._work(groups)

    def _work(self, groups: tuple[int, int, int]) -> tuple[int, int, int] | None:
        # ``inspect`` checked the counts against the device's limits.
        if 0 in groups:
            return None
        (x, y, z), (lx, ly, lz) = groups, self.local_size
        return (x * lx, y * ly, z * lz)

    def _specialize_submit(self) -> Callable[[Sequence[Arg]], None]:
        """``inspect``'s checks, then the launch appended to the window as
        ``(self, args, work)``; nothing where it has no work-group."""
        args = "".join(f"a{i}, " for i in range(len(self.param_kinds)))
        append, names = self.device.scheduler.appending(f"(program, ({args}), work)")
        names["program"] = self
        if self.fixed_work is not None:
            names["work"] = self.fixed_work
            body = append
        elif self.symbolic:  # inspect checked that no count is negative
            lx, ly, lz = self.local_size
            body = [
                "if g0 and g1 and g2:",
                f"    work = (g0 * {lx}, g1 * {ly}, g2 * {lz})",
                *(f"    {line}" for line in append),
            ]
        else:
            body = []
        submit = self.specialize(body, names, returns=False)
        return cast("Callable[[Sequence[Arg]], None]", submit)

    def _specialize_enqueue(self) -> Callable[[tuple[Arg, ...], Work], int]:
        """The scheduler's ``Launchable.enqueue``, straight-line for this program's params:
        through zyx-opencl's native module where it is built, else through pyopencl (its
        event dropped)."""
        count = len(self.param_kinds)
        scheduler, native = self.device.scheduler, launcher()
        lx, ly, lz = self.local_size
        if native is not None:
            enqueue = [
                f"status = enqueue_kernel(queue_addresses[queue], {self.kernel.int_ptr}, "
                f"work[0], work[1], work[2], {lx}, {ly}, {lz}, wait_list)",
                "if status:",
                "    raise enqueue_failure(what, status)",
            ]
        else:  # positional: keywords cost extra in pyopencl's binding
            enqueue = [
                "cl.enqueue_nd_range_kernel(scheduler_queues[queue], program.kernel, work, "
                f"{self.local_size}, None, wait_list)"
            ]
        schedule, names = scheduler.inline(
            self.arg_names(ParamKind.GLOBAL),
            self.arg_names(ParamKind.GLOBAL_MUT),
            ["if program.bound != args:", "    program.bind(args)", *enqueue],
            native=native is not None,
        )
        unpack = [f"{''.join(f'a{i}, ' for i in range(count))}= args"] if count else []
        lines = [*unpack, *schedule, "return queue"]
        enqueued = generate(
            ["def enqueue(args, work):", *(f"    {line}" for line in lines)],
            {
                **names,
                "program": self,
                "cl": cl,
                "enqueue_kernel": native,
                "enqueue_failure": enqueue_failure,
                "what": f"clEnqueueNDRangeKernel({self.name})",
                "queue_addresses": [queue.int_ptr for queue in scheduler.queues],
                "scheduler_queues": scheduler.queues,
            },
            f"enqueue {self.name}",
        )
        return cast("Callable[[tuple[Arg, ...], Work], int]", enqueued)

    def _failure(self, call: str, status: int) -> BackendError:
        return enqueue_failure(f"{call}({self.name})", status)

    def retire(self) -> None:
        super().retire()
        self.submit = self.refused

    def bind(self, args: tuple[Arg, ...]) -> None:
        """Set the kernel's arguments to ``args``. While its scalars stay the same, only the
        buffers that changed are set, one ``set_arg`` each (a launch over fresh outputs
        changes one or two); else all, in one ``set_args``, which packs the scalars by
        their dtypes."""
        bound, kernel = self.bound, self.kernel
        values: list[Any] = list(args)  # Buffers at the buffer positions (checked)
        self.bound = None  # until every argument is set: a failure leaves nothing assumed
        if bound is not None and self._same_scalars(args, bound):
            for i in self.buffer_positions:
                if values[i] is not bound[i]:
                    kernel.set_arg(i, values[i].handle)
        else:
            for i in self.buffer_positions:
                values[i] = values[i].handle
            for i, dtype in self._halves:
                values[i] = round_to(float(values[i]), dtype)
            kernel.set_args(*values)
        self.bound = args

    def _same_scalars(self, args: tuple[Arg, ...], bound: tuple[Arg, ...]) -> bool:
        for i in self.scalar_positions:
            if args[i] != bound[i]:
                return False
        return True


class OpenCLDevice(Device):
    """One OpenCL device with its own context, queues, pool and compiler."""

    backend = "opencl"
    pool: OpenCLPool

    def __init__(
        self, index: int, device: cl.Device, *, queues: int, window: int, gate: bool
    ) -> None:
        self.index = index
        self.cl_device = device
        self.info = device_info(device)
        context = cl.Context([device])
        self.scheduler = Scheduler(context, device, queues, window, gate=gate)
        self.pool = OpenCLPool(self.name, context, device, self.scheduler)
        self.compiler = Compiler(context, device)
        self.dialect = OpenCLDialect(fp16="cl_khr_fp16" in device.extensions.split())

    def compile(self, kernel: Kernel) -> OpenCLProgram:
        check_compilable(kernel, self.info)
        source = self.dialect.render(kernel)
        if _asm_log.isEnabledFor(logging.DEBUG):
            _asm_log.debug("%s for %s:\n%s", source.name, self.name, source.code)
        program = self.compiler.build(source)
        return OpenCLProgram(self, kernel, cl.Kernel(program, source.name))

    def launch(self, program: Program, args: Sequence[Arg]) -> None:
        # own()'s checks, inline: a Python call is a tenth of this path's time.
        if not isinstance(program, OpenCLProgram) or program.device is not self:
            raise not_a_program(self, program)
        program.submit(args)  # a released program's refuses

    def launch_timed(self, program: Program, args: Sequence[Arg]) -> int:
        own = self._live(program)
        work = own.work(own.inspect(args)[2])
        if work is None:
            self.synchronize()
            return 0
        return self.scheduler.time(own, tuple(args), work)

    def release(self, program: Program) -> None:
        own = self.own(program, OpenCLProgram)
        if own.released:
            return
        own.retire()
        self.scheduler.flush()  # launches in the window still need the kernel
        del own.kernel  # its last reference: pyopencl releases the cl_kernel
        own.bound = None

    def synchronize(self) -> None:
        self.scheduler.synchronize()

    def _live(self, program: Program) -> OpenCLProgram:
        """``program``, if it is an unreleased program of this device."""
        own = self.own(program, OpenCLProgram)
        if own.released:
            own.refused(())
        return own


def open_devices(section: OpenCLSection) -> list[OpenCLDevice]:
    """The devices of the platforms ``section.platform_ids`` selects, numbered in order."""
    try:
        platforms = cl.get_platforms()
    except cl.Error as error:
        message = f"no OpenCL platform: {error}"
        raise BackendError(ErrorStatus.DEVICE_ENUMERATION, message) from error
    ids = range(len(platforms)) if section.platform_ids is None else section.platform_ids
    missing = [i for i in ids if i >= len(platforms)]
    if missing:
        raise BackendError(
            ErrorStatus.DEVICE_ENUMERATION,
            f"opencl.platform_ids names platforms {missing}; there are {len(platforms)}: "
            + ", ".join(f"{i}: {p.name}" for i, p in enumerate(platforms)),
        )
    found = [device for i in ids for device in _platform_devices(platforms[i])]
    if not found:
        names = ", ".join(platforms[i].name for i in ids)
        raise BackendError(ErrorStatus.DEVICE_ENUMERATION, f"no device on platforms {names}")
    try:
        devices = [
            OpenCLDevice(
                index,
                device,
                queues=section.queues,
                window=section.window,
                gate=bool(device.type & cl.device_type.CPU)
                if section.gate is None
                else section.gate,
            )
            for index, device in enumerate(found)
        ]
    except cl.Error as error:
        raise BackendError(ErrorStatus.INITIALIZATION, f"cannot open a device: {error}") from error
    if _log.isEnabledFor(logging.DEBUG):
        for device in devices:
            _log.debug("%s: %s (%s)", device.name, device.info.name, device.cl_device.version)
    return devices


def _platform_devices(platform: cl.Platform) -> list[cl.Device]:
    try:
        return list(platform.get_devices())
    except cl.Error:  # DEVICE_NOT_FOUND: a platform (an ICD) without devices here
        return []
