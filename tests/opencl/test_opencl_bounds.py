"""Launches over buffers too small for the kernel, on OpenCL.

A launch whose buffers hold less than the kernel is known to reach (``zyx.ir.extent``) is
refused before it is enqueued, by the native submit and the Python one alike (it used to
run, reading and writing past the buffer without a word). The bounds-checked mode
(``ZYX_DEBUG`` bit ``zyx.debug.BOUNDS``) checks every load and store as the kernel runs,
and the launch raises the first out of bounds, naming the kernel, op, param and index.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from opencl_support import DEVICES, PROBE, open_all

from zyx import debug
from zyx.dtypes import DType
from zyx.errors import BackendError, ErrorStatus
from zyx.ir import INDEX, Kernel, KernelBuilder, ParamKind, Storage, ceil_div
from zyx_opencl.device import OpenCLDevice

LOCAL = 32


def kernel(kind: str) -> Kernel:
    """``add`` (``out[i] = x[i] + x[i]``, ``idx`` unused), or, for ``i < n`` with ``idx``
    from data: ``gather`` (``out[i] = x[idx[i]]``), ``scatter`` (``out[idx[i]] = x[i]``),
    ``local`` (a group's ``x`` in local memory, read at ``idx[i]`` after a barrier)."""
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


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenCLDevice]:
    """The first OpenCL device, opened in the bounds-checked mode by ``ZYX_DEBUG``."""
    if not DEVICES:
        pytest.skip(f"no OpenCL device: {PROBE.reason}")
    monkeypatch.setenv("ZYX_DEBUG", str(debug.BOUNDS))
    dev = open_all()[0]
    assert dev.bounds_checked
    yield dev
    dev.synchronize()


def floats(dev: OpenCLDevice, values: Any) -> Any:
    data = np.asarray(values, np.float32)
    buf = dev.pool.allocate(data.nbytes)
    dev.pool.write(buf, data)
    return buf


def indices(dev: OpenCLDevice, values: Any) -> Any:
    data = np.asarray(values, np.int64)
    buf = dev.pool.allocate(data.nbytes)
    dev.pool.write(buf, data)
    return buf


def read(dev: OpenCLDevice, buf: Any, n: int) -> np.ndarray[Any, Any]:
    out = np.empty(n, np.float32)
    dev.pool.read(buf, out)
    return out


def test_a_buffer_smaller_than_the_kernel_reaches_is_refused_before_it_is_enqueued(
    device: OpenCLDevice,
) -> None:
    program = device.compile(kernel("add"))
    x, idx = floats(device, np.arange(100)), indices(device, np.zeros(100))
    out, short = floats(device, np.full(100, -1.0)), floats(device, np.full(40, -1.0))
    for submit in (program.submit, program.schedule):  # the native submit, the Python one
        with pytest.raises(BackendError) as caught:
            submit([x, idx, short, 100])
        assert caught.value.status is ErrorStatus.INCORRECT_KERNEL_ARG
        assert "(Store) reaches index 99 of argument 2 ('out', GlobalMut f32)" in str(caught.value)
        assert "40 elements (160 bytes)" in str(caught.value)
    device.launch(program, [x, idx, out, 100])
    device.launch(program, [x, idx, short, 40])
    np.testing.assert_array_equal(read(device, out, 100), 2 * np.arange(100))
    np.testing.assert_array_equal(read(device, short, 40), 2 * np.arange(40))
    for buf in (x, idx, out, short):
        device.pool.release(buf)


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
    checked: OpenCLDevice, kind: str, what: str
) -> None:
    dev = checked
    program = dev.compile(kernel(kind))
    assert program.enqueuer is None  # every launch waits for its kernel and reads the record
    x, out = floats(dev, np.arange(10)), floats(dev, np.zeros(10))
    good = indices(dev, [3, 1, 2, 0, 3, 1, 2, 0, 3, 1])
    bad = indices(dev, [3, 1, 2, 0, 3, 1, 77, 0, 3, 1])
    dev.launch(program, [x, good, out, 10])
    with pytest.raises(BackendError) as caught:
        dev.launch(program, [x, bad, out, 10])
    assert caught.value.status is ErrorStatus.KERNEL_LAUNCH
    message = str(caught.value)
    assert message.startswith(f"KernelLaunch: kernel {kind!r}, op %"), message
    assert what in message, message
    dev.launch(program, [x, good, out, 10])  # the record was cleared: the device goes on
    assert dev.launch_timed(program, [x, good, out, 10]) > 0
    with pytest.raises(BackendError, match="index 77 out of bounds"):
        dev.launch_timed(program, [x, bad, out, 10])
    for buf in (x, out, good, bad):
        dev.pool.release(buf)
