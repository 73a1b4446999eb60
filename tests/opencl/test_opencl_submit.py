"""The native ``Enqueuer.submit`` against the Python ``schedule`` it stands in for.

``Device.launch`` of a program goes to its native submit where zyx-opencl's module is
built: it appends launches whose arguments are plainly of their params' kinds, with the
work-groups computed in C, and hands every other launch to ``OpenCLProgram.schedule``. Both must
put the same entry in the window, or raise the same error, for every argument list: a buffer
smaller than the kernel reaches for its ``n`` too (``zyx.ir.extent``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from opencl_support import open_all

from zyx.backend import Arg, Buffer
from zyx.dtypes import DType
from zyx.errors import BackendError
from zyx.ir import Kernel, KernelBuilder, ParamKind, ceil_div
from zyx_opencl.device import OpenCLDevice
from zyx_opencl.native import enqueuer_type
from zyx_opencl.program import OpenCLProgram

LOCAL = 64
PER_GROUP = 2 * LOCAL
"""Elements per work-group along axis 0: ``n`` makes ``ceil(n / PER_GROUP)`` groups."""


class Index(int):
    """An int subclass: the Python submit takes it, the native one hands it over."""


def scaled_copy() -> Kernel:
    """``out[i] = x[i] * scale`` for ``i < n``, on ``ceil(n / PER_GROUP)`` x 3 groups (a
    Variable axis and a fixed one, whose groups write the same elements)."""
    kb = KernelBuilder("scaled_copy")
    x = kb.param(DType.F32)
    out = kb.param(DType.F32, ParamKind.GLOBAL_MUT)
    scale = kb.variable(DType.F32, "scale")
    n = kb.variable(DType.I64, "n")
    base = kb.group(0, ceil_div(n, PER_GROUP)) * PER_GROUP + kb.local(0, LOCAL)
    kb.group(1, 3)
    with kb.loop(PER_GROUP // LOCAL) as j:
        i = base + j * LOCAL
        with kb.if_(i < n):
            out[i] = x[i] * scale
    return kb.build()


@pytest.fixture
def unflushed(device: OpenCLDevice) -> Iterator[OpenCLDevice]:
    """``device`` opened again with a window that never fills: what a submit appended
    stays in it to be looked at."""
    if enqueuer_type() is None:
        pytest.skip("zyx-opencl's native module did not build")
    dev = open_all(window=1 << 30)[device.index]
    yield dev
    dev.synchronize()


def outcome(dev: OpenCLDevice, submit: Any, args: Any) -> object:
    """What ``submit(args)`` did: the entries it appended to the window (then taken out,
    never enqueued), or the error it raised."""
    batch = dev.scheduler._batch
    before = len(batch)
    try:
        submit(args)
    except BackendError as error:
        return (error.status, str(error))
    appended = [(program, list(entry_args), work) for program, entry_args, work in batch[before:]]
    del batch[before:]
    return appended


def argument_lists(
    dev: OpenCLDevice, x: Buffer, out: Buffer, released: Buffer, foreign: Buffer, small: Buffer
) -> list[Any]:
    good: list[Arg] = [x, out, 2.0, 1000]
    limit = dev.info.max_global_work_dims[0]
    lists: list[Any] = [good, tuple(good), good[:3], [*good, 1], [out, out, 2.0, 1000]]
    for n in (0, 1, PER_GROUP - 1, PER_GROUP, PER_GROUP + 1, 10**6, -1, -PER_GROUP - 1,
              limit * PER_GROUP, limit * PER_GROUP + 1, 2**62, 2**64, True, 3.0,
              np.int64(5), Index(300)):  # fmt: skip
        lists.append([x, out, 2.0, n])
    for scale in (2, True, np.float32(2.0), np.float64(2.0), "2", None):
        lists.append([x, out, scale, 1000])
    for buffer in (released, foreign, 0, None, small):
        lists += [[buffer, out, 2.0, 1000], [x, buffer, 2.0, 1000]]
    for n in (99, 100, 101, 4096, 4097):  # small holds 100 elements, x and out 4096
        lists += [[small, out, 2.0, n], [x, small, 2.0, n], [x, out, 2.0, n]]
    return lists


def test_native_submit_appends_what_the_python_submit_appends(unflushed: OpenCLDevice) -> None:
    dev = unflushed
    program = dev.compile(scaled_copy())
    assert isinstance(program, OpenCLProgram)
    python_submit = program.schedule
    other = open_all()[dev.index]
    pool = dev.pool
    x, out, released = (pool.allocate(4 * 4096) for _ in range(3))
    small = pool.allocate(4 * 100)
    pool.release(released)
    foreign = other.pool.allocate(64)

    def launch(args: Any) -> None:
        dev.launch(program, args)

    lists = argument_lists(dev, x, out, released, foreign, small)
    refused = 0
    for args in lists:
        got, want = outcome(dev, launch, args), outcome(dev, python_submit, args)
        assert got == want, f"{args!r}: native {got} != python {want}"
        refused += isinstance(got, tuple) and "reaches index" in got[1]
    # n = 101 over small (both params), 4097 over every buffer, 10**6 over x and out.
    assert refused >= 6, refused
    good = lists[0]
    assert outcome(dev, launch, iter(good)) == outcome(dev, python_submit, iter(good))
    # Most of these go to the Python submit; the plain ones stay in C.
    assert program.enqueuer is not None
    appended = program.enqueuer.appended
    assert 5 <= appended < len(lists), appended
    other.pool.release(foreign)
    for buf in (x, out, small):
        pool.release(buf)


def test_native_submit_launches_compute_the_right_result(device: OpenCLDevice) -> None:
    """Launches appended in C over many sizes, run and compared with numpy."""
    program = device.compile(scaled_copy())
    rng = np.random.default_rng(7)
    x = rng.standard_normal(4096).astype(np.float32)
    bx, bout = device.pool.allocate(x.nbytes), device.pool.allocate(x.nbytes)
    device.pool.write(bx, x)
    for n in (1, PER_GROUP - 1, PER_GROUP + 1, 3000, 4096):
        poison = np.full(4096, np.nan, np.float32)
        device.pool.write(bout, poison)
        device.launch(program, [bx, bout, 1.5, n])
        got = np.empty(4096, np.float32)
        device.pool.read(bout, got)
        np.testing.assert_allclose(got[:n], x[:n].astype(np.float64) * 1.5, rtol=1e-6)
        assert np.all(np.isnan(got[n:])), f"n={n}: wrote past n"
    device.pool.release(bx)
    device.pool.release(bout)
