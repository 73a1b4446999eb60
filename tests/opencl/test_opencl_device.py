"""Devices: what clGetDeviceInfo says, launch checks, timing, program lifetime; and, on
NVIDIA's OpenCL, the GPU's own properties and native f16."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyopencl as cl
import pytest
from opencl_support import add_kernel, open_all, read

from zyx.backend import Buffer
from zyx.dtypes import DType, DTypeCapability
from zyx.errors import BackendError, ErrorStatus
from zyx.ir import KernelBuilder, ParamKind, ceil_div
from zyx_opencl.device import OpenCLDevice
from zyx_opencl.pool import memory_capacity

pytestmark = pytest.mark.opencl


def test_info_comes_from_the_device(device: OpenCLDevice) -> None:
    info, cl_device = device.info, device.cl_device
    assert info.name == cl_device.name.strip()
    assert info.max_local_threads == cl_device.max_work_group_size
    assert info.max_local_work_dims == tuple(cl_device.max_work_item_sizes)[:3]
    assert info.local_mem_size == cl_device.local_mem_size
    assert info.global_mem_size == memory_capacity(cl_device) == device.pool.capacity
    assert info.global_mem_size <= cl_device.global_mem_size
    assert info.preferred_vector_size == 4 * cl_device.preferred_vector_width_float
    assert info.compute > 1e9
    has_fp64 = "cl_khr_fp64" in cl_device.extensions
    assert info.supports(DType.F64, DTypeCapability.MATH) == has_fp64
    for dtype in (DType.F16, DType.BF16, DType.F32):
        assert info.supports(dtype, DTypeCapability.MATH), "16-bit floats compute in float"
    assert info.supports(DType.I64, DTypeCapability.ARITHMETIC)
    denormals = cl_device.single_fp_config & cl.device_fp_config.DENORM
    assert info.subnormals == bool(denormals)
    assert info.finite_math, "built with -cl-finite-math-only"


def test_a_launch_outside_the_limits_is_refused_before_it_is_enqueued(
    device: OpenCLDevice, alloc: Callable[[int], Buffer]
) -> None:
    program = device.compile(add_kernel())
    bufs = [alloc(256) for _ in range(3)]
    too_many = 64 * (device.info.max_global_work_dims[0] + 1)
    batched = device.scheduler.batched()
    with pytest.raises(BackendError) as caught:
        device.launch(program, [*bufs, too_many])
    assert caught.value.status is ErrorStatus.KERNEL_LAUNCH
    assert device.scheduler.batched() == batched


def test_a_launch_without_work_groups_does_nothing(
    device: OpenCLDevice, alloc: Callable[[int], Buffer]
) -> None:
    program = device.compile(add_kernel())
    bufs = [alloc(256) for _ in range(3)]
    batched = device.scheduler.batched()
    device.launch(program, [*bufs, 0])
    assert device.scheduler.batched() == batched


def test_launch_timed_drains_and_times_the_kernel(
    device: OpenCLDevice, alloc: Callable[[int], Buffer]
) -> None:
    program = device.compile(add_kernel())
    a, b, c = (alloc(4 * 1000) for _ in range(3))
    x = np.random.default_rng(0).random(1000, dtype=np.float32)
    device.pool.write(a, x)
    device.pool.write(b, x)
    assert device.launch_timed(program, [a, b, c, 1000]) > 0
    assert device.scheduler.batched() == 0
    np.testing.assert_array_equal(read(device, c), x + x)


def test_arguments_are_rebound_only_when_they_change(
    device: OpenCLDevice, alloc: Callable[[int], Buffer]
) -> None:
    program = device.compile(add_kernel())
    a, b, c = (alloc(256) for _ in range(3))
    device.pool.write(a, np.ones(64, np.float32))
    device.pool.write(b, np.full(64, 2, np.float32))
    device.launch(program, [a, b, c, 64])
    device.launch(program, [c, b, a, 64])  # a = 3 + 2
    device.launch(program, [c, b, a, 64])  # same arguments again
    np.testing.assert_array_equal(read(device, a), np.full(64, 5, np.float32))
    assert program.bound == (c, b, a, 64)


def test_a_released_program_or_another_devices_program_is_refused(
    device: OpenCLDevice, alloc: Callable[[int], Buffer]
) -> None:
    bufs = [alloc(256) for _ in range(3)]
    foreign = open_all()[device.index].compile(add_kernel())
    with pytest.raises(BackendError) as caught:
        device.launch(foreign, [*bufs, 64])
    assert caught.value.status is ErrorStatus.INCORRECT_KERNEL_ARG
    program = device.compile(add_kernel())
    device.launch(program, [*bufs, 64])
    device.release(program)  # the launch in the window is enqueued first
    for refused in (device.launch, device.launch_timed):
        with pytest.raises(BackendError) as caught:
            refused(program, [*bufs, 64])
        assert caught.value.status is ErrorStatus.INCORRECT_KERNEL_ARG
    device.synchronize()


@pytest.mark.gpu
def test_nvidia_reports_its_gpu(nvidia: OpenCLDevice) -> None:
    info = nvidia.info
    assert info.warp_size == 32
    assert info.compute_capability is not None and info.compute_capability >= (7, 0)
    assert info.max_global_work_dims[1:] == (65535, 65535)
    assert info.max_register_bytes == 4 * 255  # a thread's cap, 255 32-bit registers
    assert nvidia.dialect.fp16 == ("cl_khr_fp16" in nvidia.cl_device.extensions)


@pytest.mark.gpu
def test_nvidia_f16_arithmetic_rounds_like_numpy(nvidia: OpenCLDevice) -> None:
    n = 4096
    kb = KernelBuilder("fma16")
    a, b = kb.param(DType.F16), kb.param(DType.F16)
    out = kb.param(DType.F16, ParamKind.GLOBAL_MUT)
    size = kb.variable(DType.I64)
    i = kb.group(0, ceil_div(size, 128)) * 128 + kb.local(0, 128)
    with kb.if_(i < size):
        out[i] = a[i] * b[i] + a[i]
    program = nvidia.compile(kb.build())
    rng = np.random.default_rng(0)
    x, y = (rng.uniform(-4, 4, n).astype(np.float16) for _ in range(2))
    pool = nvidia.pool
    bufs = [pool.allocate(2 * n) for _ in range(3)]
    try:
        pool.write(bufs[0], x)
        pool.write(bufs[1], y)
        nvidia.launch(program, [*bufs, n])
        got = read(nvidia, bufs[2], DType.F16)
        np.testing.assert_array_equal(got, x * y + x)  # numpy rounds after every op, too
    finally:
        for buf in bufs:
            pool.release(buf)
