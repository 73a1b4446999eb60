"""OpenCL devices: what each can do, the device, and enumeration.

A kernel is launched where ``zyx_opencl.program`` says, in its first lines: in C in the
native ``Enqueuer`` (native.c), or in Python in ``OpenCLProgram.schedule`` and ``issue``.
``OpenCLDevice.launch`` hands every launch to its program's ``submit``, which takes the lock
the device shares with its pool (in C, where it is the native Enqueuer's).

Each device gets its own context, its ``queues`` in-order queues and a scheduler over
them (``zyx_opencl.scheduler``), a pool (``zyx_opencl.pool``) and a compiler with a disk
cache (``zyx_opencl.compiler``). A device of NVIDIA's platform from sm_80 is probed for
tensor cores when it opens (``zyx_opencl.tensor_cores``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

import pyopencl as cl

from zyx import debug, nvidia
from zyx.backend import Arg, Device, DeviceInfo, Program, check_compilable, not_a_program
from zyx.codegen import Source
from zyx.dtypes import DType, DTypeCapability
from zyx.errors import BackendError, ErrorStatus
from zyx.host.limits import private_budget
from zyx.ir import Kernel
from zyx_opencl import tensor_cores
from zyx_opencl.codegen import NvidiaOpenCLDialect, OpenCLDialect
from zyx_opencl.compiler import BUILD_OPTIONS, Compiler
from zyx_opencl.config import OpenCLSection
from zyx_opencl.pool import OpenCLPool, memory_capacity
from zyx_opencl.program import OpenCLProgram
from zyx_opencl.scheduler import Scheduler

_log = logging.getLogger("zyx.dev")
_asm_log = logging.getLogger("zyx.asm")

SMOKE = Source("zyx_smoke", "__kernel void zyx_smoke(__global int* x) { x[0] = 1; }", "opencl")
"""Built when a device opens: a driver whose compiler cannot build this cannot run zyx (PoCL
3.0's LLVM 14 on a CPU it does not know, an AMD Zen 5: 'unknown target CPU 'generic'')."""

UNBUILDABLE = "no OpenCL device builds the smallest kernel"
"""How ``open_devices``' error begins where every device's compiler refused ``SMOKE``."""

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
        global_mem_size=memory_capacity(device),
        tensor_cores="cl_intel_subgroup_matrix_multiply_accumulate" in extensions,
        compute_capability=(
            (device.compute_capability_major_nv, device.compute_capability_minor_nv)
            if on_nvidia
            else None
        ),
        dtypes=_dtypes(device, extensions),
        finite_math=True,  # compiler.BUILD_OPTIONS
        subnormals=bool(device.single_fp_config & cl.device_fp_config.DENORM),
        # A CPU runs a group on one thread's stack (PoCL's threads get RLIMIT_STACK's).
        private_mem_size=private_budget() if device.type & cl.device_type.CPU else sys.maxsize,
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


class OpenCLDevice(Device):
    """One OpenCL device with its own context, queues, pool and compiler."""

    backend = "opencl"
    pool: OpenCLPool

    def __init__(
        self,
        index: int,
        device: cl.Device,
        *,
        queues: int,
        window: int,
        gate: bool,
        bounds_checked: bool | None = None,
    ) -> None:
        self.index = index
        self.bounds_checked = debug.bounds_checked() if bounds_checked is None else bounds_checked
        """Whether kernels check every load and store and each launch waits for its kernel
        and raises what it found (``zyx.debug.BOUNDS``; ``None``: as ``ZYX_DEBUG`` says)."""
        self.cl_device = device
        self.info = device_info(device)
        context = cl.Context([device])
        self.compiler = Compiler(context, device)
        self.compiler.build(SMOKE)  # before queues and a pool are made for a useless device
        self.scheduler = Scheduler(context, device, queues, window, gate=gate)
        self.pool = OpenCLPool(self.name, context, device, self.scheduler)
        self._lock = self.pool.lock
        self.dialect = OpenCLDialect(fp16="cl_khr_fp16" in device.extensions.split())
        self.dialect.bounds_checked = self.bounds_checked
        self.mma_probe = self._probe_tensor_cores()
        """Whether ``Mma`` and its kin run here, or why not (``zyx_opencl.tensor_cores``)."""

    def _probe_tensor_cores(self) -> str:
        """Take on tensor cores where the probe finds them working: the dialect of inline PTX
        and ``info`` that advertises them. Says what it found, as ``mma_probe`` does."""
        reason = tensor_cores.unavailable(self.info, self.cl_device.platform.name)
        if reason is None:
            plain = self.info, self.dialect
            self.info = tensor_cores.with_tensor_cores(self.info)
            self.dialect = NvidiaOpenCLDialect(fp16=plain[1].fp16)
            self.dialect.bounds_checked = self.bounds_checked
            reason = tensor_cores.probe(tensor_cores.on_device(self))
            if reason is not None:
                self.info, self.dialect = plain
        found = "mma.sync, ldmatrix and cp.async (probed)" if reason is None else f"none: {reason}"
        _log.debug("%s: tensor cores: %s", self.name, found)
        return found

    @property
    def versions(self) -> tuple[str, ...]:
        """The platform and driver with their versions, the build options, and whether the
        tensor-core probe passed (it changes the kernels a search tries)."""
        device = self.cl_device
        platform = device.platform
        return (
            platform.name, platform.version, device.version, device.driver_version,
            *BUILD_OPTIONS, f"bounds_checked={self.bounds_checked}",
            f"tensor_cores={self.info.tensor_cores}",
        )  # fmt: skip

    def compile(self, kernel: Kernel) -> OpenCLProgram:
        check_compilable(kernel, self.info)
        source = self.dialect.render(kernel)
        if _asm_log.isEnabledFor(logging.DEBUG):
            _asm_log.debug("%s for %s:\n%s", source.name, self.name, source.code)
        program = self.compiler.build(source)
        return OpenCLProgram(self, kernel, cl.Kernel(program, source.name), self.bounds_checked)

    def launch(self, program: Program, args: Sequence[Arg]) -> None:
        # own()'s checks, inline: a Python call is a tenth of this path's time.
        if not isinstance(program, OpenCLProgram) or program.device is not self:
            raise not_a_program(self, program)
        program.submit(args)  # takes the device's lock; a released program's refuses

    def launch_timed(self, program: Program, args: Sequence[Arg]) -> int:
        own = self.own(program, OpenCLProgram)
        with self._lock:
            values, _, _, groups = own.inspect(args)  # a released program's refuses
            work = own.work(groups)
            if work is None:
                self.scheduler.synchronize()
                return 0
            elapsed = self.scheduler.time(own, values, work)
            own.check_record()
            return elapsed

    def release(self, program: Program) -> None:
        own = self.own(program, OpenCLProgram)
        with self._lock:
            if own.released:
                return
            own.retire()
            self.scheduler.flush()  # launches in the window still need the kernel
            del own.kernel  # its last reference: pyopencl releases the cl_kernel
            own.bound = None

    def synchronize(self) -> None:
        with self._lock:
            self.scheduler.synchronize()


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
    devices, refused = _open_each(found, section)
    if refused and not devices:
        raise BackendError(
            ErrorStatus.INITIALIZATION,
            f"{UNBUILDABLE}; its compiler said: " + "; ".join(error.context for error in refused),
            log=refused[0].log,
        )
    if _log.isEnabledFor(logging.DEBUG):
        for opened in devices:
            _log.debug("%s: %s (%s)", opened.name, opened.info.name, opened.cl_device.version)
    return devices


def _open_each(
    found: list[cl.Device], section: OpenCLSection
) -> tuple[list[OpenCLDevice], list[BackendError]]:
    """The devices that open, numbered in order, and why the others' compilers refused
    ``SMOKE`` (each logged as a warning: the devices that open still serve)."""
    devices: list[OpenCLDevice] = []
    refused: list[BackendError] = []
    for device in found:
        gate = bool(device.type & cl.device_type.CPU) if section.gate is None else section.gate
        try:
            opened = OpenCLDevice(
                len(devices), device, queues=section.queues, window=section.window, gate=gate
            )
        except cl.Error as error:
            message = f"cannot open a device: {error}"
            raise BackendError(ErrorStatus.INITIALIZATION, message) from error
        except BackendError as error:
            if error.status is not ErrorStatus.KERNEL_COMPILATION:  # not SMOKE's refusal
                raise
            refused.append(error)
            _log.warning("OpenCL device %s not opened: %s", device.name.strip(), error)
            continue
        devices.append(opened)
    return devices, refused


def _platform_devices(platform: cl.Platform) -> list[cl.Device]:
    try:
        return list(platform.get_devices())
    except cl.Error:  # DEVICE_NOT_FOUND: a platform (an ICD) without devices here
        return []
