"""A launch without a work-group (a ``Variable`` size of 0) does nothing, on every launch
path: the native ``Launcher``, cuda-python's binding, ``launch_timed`` and a recording's
graph, where such a launch may gain work-groups by ``set_arg`` and lose them again."""

from __future__ import annotations

import numpy as np
import pytest
from lcg import lcg_kernel, lcg_model

from zyx.backend import Buffer

pytestmark = [pytest.mark.cuda, pytest.mark.gpu]

N = 10_000


@pytest.mark.parametrize("launch", ["native", "cuda-python"])
def test_launches_without_work_groups_do_nothing(
    gpu: None, rng: np.random.Generator, launch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from zyx_cuda.device import CudaDevice
    from zyx_cuda.native import launch_function

    if launch == "native" and launch_function() is None:
        pytest.skip("zyx-cuda's native module is not built here (see zyx.native's log)")
    if launch == "cuda-python":
        monkeypatch.setattr("zyx_cuda.program.launch_function", lambda: None)
        monkeypatch.setattr("zyx_cuda.program.launcher_type", lambda: None)
    device = CudaDevice(0, queues=2)
    pool, program = device.pool, device.compile(lcg_kernel())
    x, y = (rng.integers(0, 1 << 32, N, dtype=np.uint32) for _ in range(2))
    a, b, out = (pool.allocate(4 * N) for _ in range(3))
    for buf, data in ((a, x), (b, y), (out, y)):
        pool.write(buf, data)

    def read(buf: Buffer) -> np.ndarray:
        got = np.empty(N, np.uint32)
        pool.read(buf, got)
        return got

    device.launch(program, [a, b, out, 3, N])
    want = lcg_model(x, y, 3)
    device.launch(program, [a, b, out, 5, 0])  # new scalars: the Python path
    device.launch(program, [a, b, out, 5, 0])  # the same: the native Launcher's to run
    assert device.launch_timed(program, [a, b, out, 6, 0]) >= 0
    np.testing.assert_array_equal(read(out), want)
    device.launch(program, [a, b, out, 4, N])
    np.testing.assert_array_equal(read(out), lcg_model(x, y, 4))

    rec = device.record()
    rec.launch(program, [a, b, out, 7, 0])  # an empty node
    rec.launch(program, [out, b, a, 1, N])  # after it: reads what it would write
    rec.replay()
    np.testing.assert_array_equal(read(out), lcg_model(x, y, 4))
    np.testing.assert_array_equal(read(a), lcg_model(lcg_model(x, y, 4), y, 1))
    pool.write(a, x)
    rec.set_arg(0, 4, N)  # gains work-groups: the graph is rebuilt with a kernel node
    rec.replay()
    np.testing.assert_array_equal(read(out), lcg_model(x, y, 7))
    np.testing.assert_array_equal(read(a), lcg_model(lcg_model(x, y, 7), y, 1))
    pool.write(a, x)
    rec.set_arg(0, 3, 9)
    rec.set_arg(0, 4, 0)  # loses them again
    rec.replay()
    np.testing.assert_array_equal(read(out), lcg_model(x, y, 7))
    np.testing.assert_array_equal(read(a), lcg_model(lcg_model(x, y, 7), y, 1))
    for buf in (a, b, out):
        pool.release(buf)
    device.release(program)
    device.synchronize()
