"""Zero-copy exchange with torch and cupy: DLPack and ``__cuda_array_interface__``."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

import numpy as np
import pytest
from lcg import lcg_kernel, lcg_model

from zyx.dtypes import DType

if TYPE_CHECKING:
    from zyx_cuda.device import CudaDevice

pytestmark = [pytest.mark.cuda, pytest.mark.gpu]

N = 1 << 16


def test_export_to_torch_by_dlpack(device: CudaDevice, rng: np.random.Generator) -> None:
    torch = pytest.importorskip("torch")
    from zyx_cuda.interop import as_array

    pool = device.pool
    data = rng.standard_normal(N).astype(np.float32)
    buf = pool.allocate(data.nbytes)
    pool.write(buf, data)
    tensor = torch.from_dlpack(as_array(buf, DType.F32, (N // 256, 256)))  # waits for the write
    assert tensor.device.type == "cuda" and tensor.shape == (N // 256, 256)
    assert tensor.data_ptr() == buf.handle
    np.testing.assert_array_equal(tensor.cpu().numpy().ravel(), data)
    pool.release(buf)  # the tensor still holds a reference
    tensor.mul_(2)
    torch.cuda.synchronize()
    back = np.empty_like(data)
    pool.read(buf, back)
    np.testing.assert_array_equal(back, 2 * data)
    del tensor
    gc.collect()
    assert buf.refcount == 0


def test_bf16_export_to_torch(device: CudaDevice) -> None:
    torch = pytest.importorskip("torch")
    from zyx_cuda.interop import as_array

    values = np.arange(64, dtype=np.float32)
    bf16 = DType.BF16.numpy
    buf = device.pool.allocate(2 * 64)
    device.pool.write(buf, values.astype(bf16))
    tensor = torch.from_dlpack(as_array(buf, DType.BF16, (64,)))
    assert tensor.dtype == torch.bfloat16
    np.testing.assert_array_equal(tensor.float().cpu().numpy(), values)
    device.pool.release(buf)


def test_import_from_torch_keeps_the_tensor_alive(
    device: CudaDevice, rng: np.random.Generator
) -> None:
    torch = pytest.importorskip("torch")
    from zyx_cuda.interop import from_dlpack

    a_np = rng.integers(0, 1 << 31, N).astype(np.uint32)
    a = torch.from_numpy(a_np.view(np.int32)).cuda()
    b = torch.zeros(N, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    used = torch.cuda.memory_allocated()
    abuf, bbuf = from_dlpack(a, device), from_dlpack(b, device)
    del a, b
    gc.collect()
    assert torch.cuda.memory_allocated() == used, "the producer's memory must stay allocated"
    pool, program = device.pool, device.compile(lcg_kernel())
    out = pool.allocate(4 * N)
    device.launch(program, [abuf, bbuf, out, 9, N])
    result = np.empty(N, np.uint32)
    pool.read(out, result)
    np.testing.assert_array_equal(result, lcg_model(a_np, np.zeros(N, np.uint32), 9))
    for buf in (abuf, bbuf, out):
        pool.release(buf)
    device.synchronize()
    gc.collect()
    assert torch.cuda.memory_allocated() < used, "released imports give the memory back"
    device.release(program)


def test_cupy_by_cuda_array_interface_both_ways(
    device: CudaDevice, rng: np.random.Generator
) -> None:
    cupy = pytest.importorskip("cupy")
    from zyx_cuda.interop import as_array, from_cuda_array

    data = rng.standard_normal(N).astype(np.float64)
    buf = device.pool.allocate(data.nbytes)
    device.pool.write(buf, data)
    view = cupy.asarray(as_array(buf, DType.F64, (N,)))
    np.testing.assert_array_equal(cupy.asnumpy(view), data)
    source = cupy.arange(N, dtype=cupy.int64)
    imported = from_cuda_array(source, device)
    back = np.empty(N, np.int64)
    device.pool.read(imported, back)
    np.testing.assert_array_equal(back, np.arange(N))
    device.pool.release(imported)
    device.pool.release(buf)


def test_cupy_dlpack_import(device: CudaDevice) -> None:
    cupy = pytest.importorskip("cupy")
    from zyx_cuda.interop import from_dlpack

    source = cupy.arange(N, dtype=cupy.float32) * 3
    imported = from_dlpack(source, device)
    back = np.empty(N, np.float32)
    device.pool.read(imported, back)
    np.testing.assert_array_equal(back, np.arange(N, dtype=np.float32) * 3)
    device.pool.release(imported)
