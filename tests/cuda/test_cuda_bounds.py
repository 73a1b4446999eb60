"""Launches over buffers too small for the kernel, on a CUDA GPU.

A launch whose buffers hold less than the kernel is known to reach (``zyx.ir.extent``) is
refused before ``cuLaunchKernel``, by the native ``Launcher`` and the Python path alike. The
bounds-checked mode (``bounds_checked=True``, or ``ZYX_DEBUG`` bit 512) checks every load
and store as the kernel runs, and the launch raises the first out of bounds, naming the
kernel, op, param and index. Needs a GPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from zyx.dtypes import DType
from zyx.errors import BackendError, ErrorStatus
from zyx.ir import INDEX, Kernel, KernelBuilder, ParamKind, Storage, ceil_div

pytestmark = [pytest.mark.cuda, pytest.mark.gpu]

LOCAL = 32


def kernel(kind: str) -> Kernel:
    """``add`` (``out[i] = x[i] + x[i]``), or, for ``i < n`` with ``idx`` from data:
    ``gather``, ``scatter``, ``local`` (a group's ``x`` in shared memory read at ``idx[i]``)."""
    kb = KernelBuilder(kind)
    x, idx = kb.param(DType.F32, name="x"), kb.param(INDEX, name="idx")
    out = kb.param(DType.F32, ParamKind.GLOBAL_MUT, "out")
    n = kb.variable(INDEX, "n")
    lid = kb.local(0, LOCAL)
    i = kb.group(0, ceil_div(n, LOCAL)) * LOCAL + lid
    if kind == "local":
        tile = kb.define(DType.F32, LOCAL, Storage.LOCAL)
        tile[lid] = x[kb.minimum(i, n - 1)]
        kb.barrier()
    with kb.if_(i < n):
        if kind == "add":
            out[i] = x[i] + x[i]
        elif kind == "gather":
            out[i] = x[idx[i]]
        elif kind == "scatter":
            out[idx[i]] = x[i]
        else:
            out[i] = tile[idx[i]]
    return kb.build()


@pytest.fixture(scope="module")
def checked(gpu: None) -> Iterator[Any]:
    from zyx_cuda.device import CudaDevice

    dev = CudaDevice(0, queues=4, bounds_checked=True)
    yield dev
    dev.synchronize()


def put(dev: Any, values: Any, dtype: Any = np.float32) -> Any:
    data = np.asarray(values, dtype)
    buf = dev.pool.allocate(data.nbytes)
    dev.pool.write(buf, data)
    return buf


def read(dev: Any, buf: Any, n: int) -> np.ndarray[Any, Any]:
    out = np.empty(n, np.float32)
    dev.pool.read(buf, out)
    return out


def test_a_buffer_smaller_than_the_kernel_reaches_is_refused_before_the_launch(device: Any) -> None:
    program = device.compile(kernel("add"))
    x, idx = put(device, np.arange(100)), put(device, np.zeros(100), np.int64)
    out, short = put(device, np.full(100, -1.0)), put(device, np.full(40, -1.0))
    device.launch(program, [x, idx, out, 100])  # packs the block: the C path takes the next
    for submit in (program.submit, program.schedule):
        with pytest.raises(BackendError) as caught:
            submit([x, idx, short, 100])
        assert caught.value.status is ErrorStatus.INCORRECT_KERNEL_ARG
        assert "(Store) reaches index 99 of argument 2 ('out', GlobalMut f32)" in str(caught.value)
    device.launch(program, [x, idx, short, 40])
    np.testing.assert_array_equal(read(device, out, 100), 2 * np.arange(100))
    np.testing.assert_array_equal(read(device, short, 40), 2 * np.arange(40))


@pytest.mark.parametrize(
    ("kind", "what"),
    [
        ("gather", "(Load(%0, %11)): index 77 out of bounds for 10 elements of argument 0 "
         "('x', Global f32)"),
        ("scatter", "(Store(%2, %12, %11)): index 77 out of bounds for 10 elements of "
         "argument 2 ('out', GlobalMut f32)"),
        ("local", "out of bounds for 32 elements of %9 (Local f32[32])"),
    ],
)  # fmt: skip
def test_the_bounds_checked_mode_names_the_kernel_op_param_and_index(
    checked: Any, kind: str, what: str
) -> None:
    dev = checked
    program = dev.compile(kernel(kind))
    assert program.launcher is None
    x, out = put(dev, np.arange(10)), put(dev, np.zeros(10))
    good = put(dev, [3, 1, 2, 0, 3, 1, 2, 0, 3, 1], np.int64)
    bad = put(dev, [3, 1, 2, 0, 3, 1, 77, 0, 3, 1], np.int64)
    dev.launch(program, [x, good, out, 10])
    with pytest.raises(BackendError) as caught:
        dev.launch(program, [x, bad, out, 10])
    assert caught.value.status is ErrorStatus.KERNEL_LAUNCH
    message = str(caught.value)
    assert message.startswith(f"KernelLaunch: kernel {kind!r}, op %") and what in message, message
    dev.launch(program, [x, good, out, 10])  # the record was cleared
    with pytest.raises(BackendError, match="index 77 out of bounds"):
        dev.launch_timed(program, [x, bad, out, 10])
    recording = dev.record()
    recording.launch(program, [x, bad, out, 10])
    with pytest.raises(BackendError, match="index 77 out of bounds"):
        recording.replay()
    if kind == "gather":
        np.testing.assert_array_equal(read(dev, out, 10), [3, 1, 2, 0, 3, 1, 0, 0, 3, 1])
