"""The OpenCL C dialect: what it renders, that it builds, and its f16/bf16 rounding."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from opencl_support import read

from zyx.dtypes import DType
from zyx.ir import BOp, Kernel, KernelBuilder, ParamKind, Storage
from zyx_opencl.codegen import OpenCLDialect
from zyx_opencl.device import OpenCLDevice

pytestmark = pytest.mark.opencl


def every_op_kernel(dtype: DType) -> Kernel:
    """Loads, stores, local memory, a barrier, a cast, a constant, / and %: per dtype."""
    kb = KernelBuilder(f"ops_{dtype.value}")
    a, b = kb.param(dtype), kb.param(dtype)
    out = kb.param(dtype, ParamKind.GLOBAL_MUT)
    lid = kb.local(0, 32)
    i = kb.group(0, 2) * 32 + lid
    shared = kb.define(dtype, 32, Storage.LOCAL)
    shared[lid] = a[i]
    kb.barrier()
    x = shared[31 - lid]
    if dtype is DType.BOOL:
        out[i] = x & b[i]
    else:
        out[i] = x * b[i] + b[i].cast(DType.F32).cast(dtype) + 3 + x / b[i] + x % b[i]
    return kb.build()


def cast_kernel(src: DType, dst: DType, n: int) -> Kernel:
    kb = KernelBuilder("cast")
    x = kb.param(src)
    out = kb.param(dst, ParamKind.GLOBAL_MUT)
    i = kb.group(0, n // 32) * 32 + kb.local(0, 32)
    out[i] = x[i].cast(dst)
    return kb.build()


@pytest.mark.parametrize("dtype", list(DType), ids=str)
def test_every_dtype_builds(device: OpenCLDevice, dtype: DType) -> None:
    if not device.info.supports(dtype):
        pytest.skip(f"{device.info.name} has no {dtype}")
    device.release(device.compile(every_op_kernel(dtype)))


def test_types_qualifiers_and_builtins() -> None:
    code = OpenCLDialect().render(every_op_kernel(DType.BOOL)).code
    assert "__kernel __attribute__((reqd_work_group_size(32, 1, 1))) void k_ops_bool(" in code
    assert "__global const uchar* restrict p0" in code
    assert "__local uchar v" in code
    assert "barrier(CLK_LOCAL_MEM_FENCE)" in code
    assert "get_group_id(0)" in code and "get_local_id(0)" in code
    assert "#pragma" not in code


def test_f16_uses_vload_and_vstore_half_and_its_pragma_only_where_the_device_has_it() -> None:
    kernel = every_op_kernel(DType.F16)
    soft = OpenCLDialect(fp16=False).render(kernel).code
    assert "vload_half(" in soft and "vstore_half_rte(" in soft
    assert "cl_khr_fp16" not in soft
    assert "__local ushort v" in soft  # half arrays need the extension; ushort does not
    native = OpenCLDialect(fp16=True).render(kernel).code
    assert "#pragma OPENCL EXTENSION cl_khr_fp16 : enable" in native
    assert "convert_half_rte" in native
    assert "cl_khr_fp16" not in OpenCLDialect(fp16=True).render(every_op_kernel(DType.F32)).code


@pytest.mark.parametrize("dtype", [DType.F16, DType.BF16], ids=str)
def test_nextafter_of_half_types_steps_on_their_bits(dtype: DType) -> None:
    """OpenCL's nextafter of a float would step by a float's ulp."""
    kb = KernelBuilder("step")
    a, out = kb.param(dtype), kb.param(dtype, ParamKind.GLOBAL_MUT)
    i = kb.local(0, 32)
    out[i] = kb.binary(BOp.NEXTAFTER, a[i], 1.0)
    for fp16 in (False, True):
        code = OpenCLDialect(fp16=fp16).render(kb.build()).code
        assert "nextafter(" not in code
        assert ("zyx_f16_bits(" if dtype is DType.F16 else "zyx_f32_to_bf16(") in code


def test_f64_pragma_bf16_helpers_and_long_literals_only_where_used() -> None:
    f64 = OpenCLDialect().render(every_op_kernel(DType.F64)).code
    assert f64.startswith("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
    bf16 = OpenCLDialect().render(every_op_kernel(DType.BF16)).code
    assert "ushort zyx_f32_to_bf16(float f)" in bf16 and "cl_khr_fp64" not in bf16
    assert "zyx_f32_to_bf16" not in OpenCLDialect().render(every_op_kernel(DType.F32)).code
    kb = KernelBuilder("big")
    out = kb.param(DType.I64, ParamKind.GLOBAL_MUT)
    out[0] = kb.const(2**40, DType.I64)
    assert "1099511627776L)" in OpenCLDialect().render(kb.build()).code


# f32 values at and around ties of the 16-bit formats, and past their ranges.
TIES = np.array(
    [1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-11, 1 + 3 * 2**-11, -(1 + 2**-9), 65520.0, 3e38, 1e-6]
    + [0.1 * k for k in range(1, 25)],
    dtype=np.float32,
)


@pytest.mark.parametrize(
    ("dtype", "numpy_dtype"), [(DType.F16, np.float16), (DType.BF16, ml_dtypes.bfloat16)], ids=str
)
def test_f32_to_16_bit_rounds_to_nearest_even(
    device: OpenCLDevice, dtype: DType, numpy_dtype: type
) -> None:
    n = len(TIES)
    pool = device.pool
    src, dst = pool.allocate(4 * n), pool.allocate(2 * n)
    try:
        pool.write(src, TIES)
        device.launch(device.compile(cast_kernel(DType.F32, dtype, n)), [src, dst])
        got = read(device, dst, DType.U16)
        with np.errstate(over="ignore"):  # 3e38 is past f16's range: inf, as on the device
            want = TIES.astype(numpy_dtype).view(np.uint16)
        np.testing.assert_array_equal(got, want)
    finally:
        pool.release(src)
        pool.release(dst)


def test_f16_rounding_in_a_loop_after_a_barrier(device: OpenCLDevice) -> None:
    """Each work-item rounds its own values to f16 in a loop after a barrier: PoCL 5 gave
    work-items each other's values where the rounding went through two helpers."""
    kb = KernelBuilder("round_after_barrier")
    x = kb.param(DType.F16)
    out = kb.param(DType.F16, ParamKind.GLOBAL_MUT)
    lid = kb.local(0, 8)
    shared = kb.define(DType.F32, 16, Storage.LOCAL)
    with kb.loop(2) as e:
        shared[e * 8 + lid] = x[e * 8 + lid].cast(DType.F32) + 1.0
    kb.barrier()
    with kb.loop(2) as e:
        out[e * 8 + lid] = shared[e * 8 + lid].cast(DType.F16)
    values = np.arange(16, dtype=np.float16)
    pool = device.pool
    src, dst = pool.allocate(values.nbytes), pool.allocate(values.nbytes)
    try:
        pool.write(src, values)
        device.launch(device.compile(kb.build()), [src, dst])
        np.testing.assert_array_equal(read(device, dst, DType.F16), values + 1)
    finally:
        pool.release(src)
        pool.release(dst)
