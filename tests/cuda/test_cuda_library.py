"""Library programs run on the stream zyx chooses, ordered by the same hazards as kernels."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest
from lcg import lcg_kernel, lcg_model

from zyx.backend import Scalar
from zyx.dtypes import DType
from zyx.ir import Param, ParamKind

if TYPE_CHECKING:
    from zyx_cuda.device import CudaDevice

pytestmark = [pytest.mark.cuda, pytest.mark.gpu]

N = 1 << 20


def test_library_call_is_scheduled_like_a_kernel(
    device: CudaDevice, rng: np.random.Generator
) -> None:
    from cuda.bindings import driver

    from zyx_cuda.library import LibraryProgram

    calls: list[tuple[int, list[int], list[Scalar]]] = []

    def fill(stream: int, pointers: list[int], scalars: list[Scalar]) -> None:
        calls.append((stream, pointers, scalars))
        (result,) = driver.cuMemsetD32Async(pointers[0], scalars[0], scalars[1], stream)
        assert not result

    params = [
        Param(DType.U32, ParamKind.GLOBAL_MUT),
        Param(DType.U32, ParamKind.VARIABLE),
        Param(DType.I64, ParamKind.VARIABLE),
    ]
    filler = LibraryProgram(device, "fill", params, fill)
    pool, program = device.pool, device.compile(lcg_kernel())
    a, b, out = (pool.allocate(4 * N) for _ in range(3))
    data = [rng.integers(0, 1 << 32, N, dtype=np.uint32) for _ in range(2)]
    pool.write(a, data[0])
    pool.write(b, data[1])
    # A long kernel reads b; the fill overwrites b right after: it must wait (write after read).
    device.launch(program, [a, b, out, 500_000, N])
    device.launch(filler, [b, 7, N])
    result = np.empty(N, np.uint32)
    pool.read(out, result)
    np.testing.assert_array_equal(result, lcg_model(data[0], data[1], 500_000))
    pool.read(b, result)
    np.testing.assert_array_equal(result, np.full(N, 7, np.uint32))
    stream, pointers, scalars = calls[0]
    assert stream in [int(h) for h in device.streams.handles]
    assert pointers == [b.handle] and scalars == [7, N]
    for buf in (a, b, out):
        pool.release(buf)
    device.release(program)
