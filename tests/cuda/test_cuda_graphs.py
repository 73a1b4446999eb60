"""``device.record()`` replays as a CUDA graph; ``set_arg`` rebinds between replays."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest
from lcg import lcg_kernel, lcg_model

from zyx.backend import Buffer, Scalar
from zyx.dtypes import DType
from zyx.errors import BackendError, ErrorStatus
from zyx.ir import Param, ParamKind

if TYPE_CHECKING:
    from zyx_cuda.device import CudaDevice

pytestmark = [pytest.mark.cuda, pytest.mark.gpu]

N = 100_000


def read(device: CudaDevice, buf: Buffer) -> np.ndarray:
    out = np.empty(N, np.uint32)
    device.pool.read(buf, out)
    return out


def test_replay_rebind_and_rebuild(device: CudaDevice, rng: np.random.Generator) -> None:
    from zyx_cuda.graphs import GraphRecording

    pool, program = device.pool, device.compile(lcg_kernel())
    data = [rng.integers(0, 1 << 32, N, dtype=np.uint32) for _ in range(5)]
    x, y, z, w, v = bufs = [pool.allocate(4 * N) for _ in range(5)]
    for buf, d in zip(bufs, data):
        pool.write(buf, d)
    rec = device.record()
    assert isinstance(rec, GraphRecording)
    rec.launch(program, [x, y, z, 5, N])  # z = f5(x) + y
    rec.launch(program, [z, x, w, 7, N])  # w = f7(z) + x
    rec.replay()
    z_now = lcg_model(data[0], data[1], 5)
    np.testing.assert_array_equal(read(device, w), lcg_model(z_now, data[0], 7))

    rec.set_arg(0, 3, 11)  # a scalar: the node is updated in place
    rec.replay()
    z_now = lcg_model(data[0], data[1], 11)
    np.testing.assert_array_equal(read(device, w), lcg_model(z_now, data[0], 7))

    rec.set_arg(1, 2, v)  # another output buffer, same edges
    rec.replay()
    np.testing.assert_array_equal(read(device, v), lcg_model(z_now, data[0], 7))

    rec.set_arg(1, 0, y)  # launch 1 no longer reads launch 0's output: the graph is rebuilt
    rec.replay()
    np.testing.assert_array_equal(read(device, v), lcg_model(data[1], data[0], 7))

    # Ordinary launches after a replay see its results (the replay is a stream command).
    device.launch(program, [v, x, w, 3, N])
    np.testing.assert_array_equal(
        read(device, w), lcg_model(lcg_model(data[1], data[0], 7), data[0], 3)
    )
    pool.release(v)
    with pytest.raises(BackendError, match="released"):
        rec.replay()
    for buf in (x, y, z, w):
        pool.release(buf)
    device.release(program)


def test_a_replay_of_a_released_program_is_refused(
    device: CudaDevice, rng: np.random.Generator
) -> None:
    """The released program's module is unloaded once its queued work is done: the graph's
    kernel node would point into it."""
    pool, program = device.pool, device.compile(lcg_kernel())
    data = rng.integers(0, 1 << 32, N, dtype=np.uint32)
    x, out = pool.allocate(4 * N), pool.allocate(4 * N)
    pool.write(x, data)
    rec = device.record()
    rec.launch(program, [x, x, out, 2, N])
    rec.replay()
    np.testing.assert_array_equal(read(device, out), lcg_model(data, data, 2))
    device.release(program)
    device.synchronize()  # the module is unloaded by now
    with pytest.raises(BackendError, match="was released") as caught:
        rec.replay()
    assert caught.value.status is ErrorStatus.INCORRECT_KERNEL_ARG
    pool.release(x)
    pool.release(out)


def test_a_library_program_inside_a_recording(device: CudaDevice) -> None:
    from cuda.bindings import driver

    from zyx_cuda.library import LibraryProgram

    def fill(stream: int, pointers: list[int], scalars: list[Scalar]) -> None:
        (result,) = driver.cuMemsetD32Async(pointers[0], scalars[0], N, stream)
        assert not result

    filler = LibraryProgram(
        device,
        "fill",
        [Param(DType.U32, ParamKind.GLOBAL_MUT), Param(DType.U32, ParamKind.VARIABLE)],
        fill,
    )
    pool, program = device.pool, device.compile(lcg_kernel())
    x, y, out = (pool.allocate(4 * N) for _ in range(3))
    pool.write(y, np.arange(N, dtype=np.uint32))
    rec = device.record()
    rec.launch(filler, [x, 9])
    rec.launch(program, [x, y, out, 4, N])
    rec.replay()
    nine = np.full(N, 9, np.uint32)
    np.testing.assert_array_equal(
        read(device, out), lcg_model(nine, np.arange(N, dtype=np.uint32), 4)
    )
    rec.set_arg(0, 1, 13)  # recaptures the library call
    rec.replay()
    thirteen = np.full(N, 13, np.uint32)
    np.testing.assert_array_equal(
        read(device, out), lcg_model(thirteen, np.arange(N, dtype=np.uint32), 4)
    )
    for buf in (x, y, out):
        pool.release(buf)
    device.release(program)
    device.release(filler)
    device.synchronize()
    assert filler._capture_stream is None  # its capture stream destroyed
