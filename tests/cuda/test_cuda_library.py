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


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler 'cc' on PATH")
def test_a_replaying_call_is_captured_the_second_time_and_replayed_after() -> None:
    """On the stand-in driver, in a process of its own; no GPU."""
    out = run_stubbed(Path(__file__), "replay")
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


def replay_and_release() -> str:
    sys.path.insert(0, str(HERE))
    from stub_driver import install

    stand_ins = install()
    from zyx_cuda.device import CudaDevice
    from zyx_cuda.library import REPLAYS, LibraryProgram

    calls: list[tuple[int, tuple[int, ...], tuple[Scalar, ...]]] = []

    def fill(stream: int, pointers: list[int], scalars: list[Scalar]) -> None:
        calls.append((stream, tuple(pointers), tuple(scalars)))

    device = CudaDevice(0, queues=1)
    params = [Param(DType.U32, ParamKind.GLOBAL_MUT), Param(DType.U32, ParamKind.VARIABLE)]
    filler = LibraryProgram(device, "fill", params, fill, replay=True)
    a, b = device.pool.allocate(64), device.pool.allocate(64)
    for args in ([a, 9], [a, 9], [a, 9], [b, 9], [a, 10], [a, 9]):
        device.launch(filler, args)
    assert [c[1:] for c in calls] == [
        ((a.handle,), (9,)),
        ((a.handle,), (9,)),
        ((b.handle,), (9,)),
        ((a.handle,), (10,)),
    ], calls
    streams = [int(handle) for handle in device.streams.handles]
    assert calls[0][0] in streams and calls[1][0] not in streams, "the second on the capture's"
    graphs = stand_ins.graph_calls
    assert graphs.count("cuStreamBeginCapture") == graphs.count("cuGraphInstantiate") == 1
    assert graphs.count("cuGraphLaunch") == 3, graphs
    for value in range(REPLAYS):  # each twice: captured; the least recent set's graph goes
        device.launch(filler, [b, value])
        device.launch(filler, [b, value])
    assert graphs.count("cuGraphExecDestroy") == 1, graphs
    device.release(filler)
    device.synchronize()
    assert graphs.count("cuGraphExecDestroy") == 1 + REPLAYS, graphs

    def uncapturable(stream: int, pointers: list[int], scalars: list[Scalar]) -> None:
        if stream not in streams:
            raise RuntimeError("not under capture")
        calls.append((stream, tuple(pointers), tuple(scalars)))

    calls.clear()
    other = LibraryProgram(device, "fill", params, uncapturable, replay=True)
    for _ in range(3):
        device.launch(other, [a, 1])
    assert len(calls) == 3 and not other.replay, "called each time once capture failed"
    return "ok"


if __name__ == "__main__":
    print(replay_and_release() if sys.argv[1:] == ["replay"] else capture_and_release())
