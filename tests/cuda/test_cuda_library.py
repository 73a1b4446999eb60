"""Library programs run on the stream zyx chooses, ordered by the same hazards as kernels;
the stream a recording captures them on is destroyed with the program."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
from lcg import lcg_kernel, lcg_model
from stub_driver import run_stubbed

from zyx.backend import Scalar
from zyx.dtypes import DType
from zyx.ir import Param, ParamKind

if TYPE_CHECKING:
    from zyx_cuda.device import CudaDevice

pytestmark = pytest.mark.cuda

HERE = Path(__file__).parent
N = 1 << 20


@pytest.mark.gpu
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


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler 'cc' on PATH")
def test_the_capture_stream_is_destroyed_with_the_program() -> None:
    """On the stand-in driver (``stub_driver``, in a process of its own); no GPU."""
    out = run_stubbed(Path(__file__))
    assert out == "ok\n", out


def capture_and_release() -> str:
    sys.path.insert(0, str(HERE))
    from stub_driver import install

    stand_ins = install()
    from zyx.errors import BackendError, ErrorStatus
    from zyx_cuda.device import CudaDevice
    from zyx_cuda.library import LibraryProgram

    captured: list[int] = []

    def fill(stream: int, pointers: list[int], scalars: list[Scalar]) -> None:
        captured.append(stream)

    device = CudaDevice(0, queues=2)
    params = [Param(DType.U32, ParamKind.GLOBAL_MUT), Param(DType.U32, ParamKind.VARIABLE)]
    filler = LibraryProgram(device, "fill", params, fill)
    buf = device.pool.allocate(4 * N)
    rec = device.record()
    rec.launch(filler, [buf, 9])
    rec.replay()
    rec.set_arg(0, 1, 13)  # captured again, on the same stream
    rec.replay()
    stream = captured[0]
    assert captured == [stream, stream], captured
    assert stream not in [int(handle) for handle in device.streams.handles]
    rec.set_arg(0, 1, 14)  # to be captured at the next replay, after the release
    device.release(filler)
    device.synchronize()
    assert stand_ins.destroyed == [stream], stand_ins.destroyed
    try:  # refused before any capture: no stream made again
        rec.replay()
        raise AssertionError("a replay of a released library program ran")
    except BackendError as error:
        assert error.status is ErrorStatus.INCORRECT_KERNEL_ARG, error
    assert len(captured) == 2 and stand_ins.destroyed == [stream]
    return "ok"


if __name__ == "__main__":
    print(capture_and_release())
