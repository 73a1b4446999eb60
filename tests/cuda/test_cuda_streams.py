"""Launches and copies on several streams give exactly what one stream gives.

Random commands over random buffers (kernels that alias their inputs and outputs, writes,
device copies, releases followed by reallocation, reads), checked against a numpy model
after every read: a missing cross-stream wait or an early free shows as a wrong value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest
from lcg import lcg_kernel, lcg_model

if TYPE_CHECKING:
    from zyx_cuda.device import CudaDevice

pytestmark = [pytest.mark.cuda, pytest.mark.gpu]

N = 1 << 18
BUFFERS = 10
STEPS = 400


@pytest.mark.parametrize(("queues", "launch"), [(8, "native"), (8, "cuda-python"), (1, "native")])
def test_random_commands_match_the_model(
    gpu: None, queues: int, launch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``launch``: through zyx-cuda's native module, or cuda-python's binding (the path
    taken where the module cannot be built)."""
    from zyx_cuda.device import CudaDevice
    from zyx_cuda.native import launch_function

    if launch == "native" and launch_function() is None:
        pytest.skip("zyx-cuda's native module is not built here (see zyx.native's log)")
    if launch == "cuda-python":
        monkeypatch.setattr("zyx_cuda.program.launch_function", lambda: None)
        monkeypatch.setattr("zyx_cuda.program.launcher_type", lambda: None)
    rng = np.random.default_rng(1234)  # the same commands for 8 streams and for 1
    device = CudaDevice(0, queues=queues)
    pool, program = device.pool, device.compile(lcg_kernel())
    model = [rng.integers(0, 1 << 32, N, dtype=np.uint32) for _ in range(BUFFERS)]
    bufs = [pool.allocate(4 * N) for _ in range(BUFFERS)]
    for buf, data in zip(bufs, model):
        pool.write(buf, data)

    def check(j: int) -> None:
        out = np.empty(N, np.uint32)
        pool.read(bufs[j], out)
        np.testing.assert_array_equal(out, model[j], err_msg=f"buffer {j}")

    for _ in range(STEPS):
        command = rng.choice(["launch"] * 6 + ["write", "copy", "replace", "read"])
        j, k, o = (int(x) for x in rng.integers(0, BUFFERS, 3))
        if command == "launch":
            steps = int(rng.integers(0, 20000))
            device.launch(program, [bufs[j], bufs[k], bufs[o], steps, N])
            model[o] = lcg_model(model[j], model[k], steps)
        elif command == "write":
            start = int(rng.integers(0, N))
            data = rng.integers(0, 1 << 32, N - start, dtype=np.uint32)
            pool.write(bufs[j], data, offset=4 * start)
            model[j][start:] = data
        elif command == "copy" and j != o:
            pool.copy_from(pool, bufs[j], bufs[o])
            model[o] = model[j].copy()
        elif command == "replace":
            pool.release(bufs[j])
            bufs[j] = pool.allocate(4 * N)
            model[j] = rng.integers(0, 1 << 32, N, dtype=np.uint32)
            pool.write(bufs[j], model[j])
        elif command == "read":
            check(j)
    for j in range(BUFFERS):
        check(j)
    for buf in bufs:
        pool.release(buf)
    device.release(program)
    device.synchronize()
    assert device.streams.tracker.tracked() == 0


def test_independent_launches_record_no_events(device: CudaDevice) -> None:
    """Commands on disjoint buffers never wait across streams, so no event is recorded."""
    pool, program = device.pool, device.compile(lcg_kernel())
    device.synchronize()
    streams = device.streams
    bufs = [pool.allocate(4 * N) for _ in range(3 * 16)]
    events_before = streams.events()
    issued_before = list(streams.issued)
    for i in range(16):
        a, b, out = bufs[3 * i : 3 * i + 3]
        device.launch(program, [a, b, out, 100, N])
    assert all(now > then for now, then in zip(streams.issued, issued_before)), "not spread"
    assert streams.events() == events_before
    for buf in bufs:
        pool.release(buf)
    device.release(program)
    device.synchronize()


def test_a_released_buffer_is_freed_after_the_kernel_reading_it(
    device: CudaDevice, rng: np.random.Generator
) -> None:
    pool, program = device.pool, device.compile(lcg_kernel())
    device.synchronize()
    before = pool.free_bytes()
    a, b, out = (pool.allocate(4 * N) for _ in range(3))
    data = [rng.integers(0, 1 << 32, N, dtype=np.uint32) for _ in range(2)]
    pool.write(a, data[0])
    pool.write(b, data[1])
    device.launch(program, [a, b, out, 2_000_000, N])  # milliseconds of work
    pool.release(a)
    assert pool.free_bytes() == before - 3 * 4 * N, "freed while the kernel still reads it"
    result = np.empty(N, np.uint32)
    pool.read(out, result)
    np.testing.assert_array_equal(result, lcg_model(data[0], data[1], 2_000_000))
    assert pool.free_bytes() == before - 2 * 4 * N, "not freed once the kernel finished"
    pool.release(b)
    pool.release(out)
    device.release(program)


def test_launch_timed_measures_the_kernel_alone(device: CudaDevice) -> None:
    pool, program = device.pool, device.compile(lcg_kernel())
    a, b, out = (pool.allocate(4 * N) for _ in range(3))
    short = device.launch_timed(program, [a, b, out, 1000, N])
    long = device.launch_timed(program, [a, b, out, 100_000, N])
    assert 0 < short < long
    for buf in (a, b, out):
        pool.release(buf)
    device.release(program)
