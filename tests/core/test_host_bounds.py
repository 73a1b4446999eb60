"""Launches over buffers too small for the kernel, on the host.

Where a kernel's extent is known (``zyx.ir.extent``), ``Device.launch`` refuses a buffer
smaller than what its accesses reach, before the kernel runs: the process used to read and
write past the buffer, and segfault where far enough. Where it is not known (an index
loaded from data), the bounds-checked mode (``ZYX_DEBUG`` bit ``zyx.debug.BOUNDS``) checks
every load and store as it runs and names the kernel, the op, the param and the index.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from zyx.dtypes import DType
from zyx.errors import BackendError, ErrorStatus
from zyx.host.device import HostDevice
from zyx.host.pool import HostPool
from zyx.ir import INDEX, Kernel, KernelBuilder, ParamKind, ceil_div

LOCAL = 64


@pytest.fixture(autouse=True)
def private_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("ZYX_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture(params=["compiled", "interpreted"])
def device(request: pytest.FixtureRequest) -> HostDevice:
    return HostDevice(HostPool(), interpret=request.param == "interpreted")


def add() -> Kernel:
    """``c[i] = a[i] + b[i]`` for ``i < n``."""
    kb = KernelBuilder("add")
    a, b = kb.param(DType.F32, name="a"), kb.param(DType.F32, name="b")
    c = kb.param(DType.F32, ParamKind.GLOBAL_MUT, "c")
    n = kb.variable(INDEX, "n")
    i = kb.group(0, ceil_div(n, LOCAL)) * LOCAL + kb.local(0, LOCAL)
    with kb.if_(i < n):
        c[i] = a[i] + b[i]
    return kb.build()


def buffer(device: HostDevice, values: Any) -> Any:
    data = np.asarray(values, np.float32)
    buf = device.pool.allocate(max(1, data.nbytes))
    device.pool.write(buf, data)
    return buf


def read(device: HostDevice, buf: Any, n: int) -> np.ndarray[Any, Any]:
    out = np.empty(n, np.float32)
    device.pool.read(buf, out)
    return out


def test_a_buffer_smaller_than_the_kernel_reaches_is_refused_before_it_runs(
    device: HostDevice,
) -> None:
    program = device.compile(add())
    a, b = buffer(device, np.arange(100)), buffer(device, np.ones(100))
    c = buffer(device, np.full(100, -1.0))
    short = buffer(device, np.full(60, -1.0))
    device.launch(program, [a, b, c, 100])
    np.testing.assert_array_equal(read(device, c, 100), np.arange(100) + 1)
    with pytest.raises(BackendError) as caught:
        device.launch(program, [a, b, short, 100])
    assert caught.value.status is ErrorStatus.INCORRECT_KERNEL_ARG
    message = str(caught.value)
    assert "add: op %" in message and "(Store) reaches index 99" in message, message
    assert "argument 2 ('c', GlobalMut f32)" in message and "60 elements (240 bytes)" in message
    np.testing.assert_array_equal(read(device, short, 60), np.full(60, -1.0))  # untouched
    with pytest.raises(BackendError, match=r"\(Load\) reaches index 100 of argument 0 \('a'"):
        device.launch(program, [a, b, c, 101])
    device.launch(program, [a, b, short, 60])  # the same program, a size that fits
    np.testing.assert_array_equal(read(device, short, 60), np.arange(60) + 1)
    device.launch(program, [short, short, short, 0])  # no work-group: nothing reached


def test_the_segfault_of_the_issue_is_an_error(tmp_path: Path) -> None:
    """A launch of 2**28 work-items over 64-byte buffers: the process used to die."""
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_host_bounds import add
        from zyx.errors import BackendError
        from zyx.host.device import HostDevice
        from zyx.host.pool import HostPool
        device = HostDevice(HostPool())
        program = device.compile(add())
        a, b, c = (device.pool.allocate(64) for _ in range(3))
        try:
            device.launch(program, [a, b, c, 1 << 28])
        except BackendError as error:
            print("refused:", error)
        """
    )
    env = {"ZYX_CACHE_DIR": str(tmp_path), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "refused: IncorrectKernelArg: add: op %" in done.stdout, done.stdout
    assert f"reaches index {(1 << 28) - 1}" in done.stdout


def indexed(scatter: bool = False, registers: bool = False) -> Kernel:
    """``out[i] = x[idx[i]]`` (a gather), ``out[idx[i]] = x[i]`` (a scatter) or a register
    array of 4 read at ``idx[i]``, for ``i < n``: indices from data, which no launch check
    knows."""
    kb = KernelBuilder("scatter" if scatter else "registers" if registers else "gather")
    x, idx = kb.param(DType.F32, name="x"), kb.param(INDEX, name="idx")
    out = kb.param(DType.F32, ParamKind.GLOBAL_MUT, "out")
    n = kb.variable(INDEX, "n")
    i = kb.group(0, ceil_div(n, LOCAL)) * LOCAL + kb.local(0, LOCAL)
    with kb.if_(i < n):
        if scatter:
            out[idx[i]] = x[i]
        elif registers:
            r = kb.define(DType.F32, 4)
            with kb.loop(4) as j:
                r[j] = x[i]
            out[i] = r[idx[i]]
        else:
            out[i] = x[idx[i]]
    return kb.build()


@pytest.fixture(params=["compiled", "interpreted"])
def checked(request: pytest.FixtureRequest) -> HostDevice:
    return HostDevice(HostPool(), interpret=request.param == "interpreted", bounds_checked=True)


@pytest.mark.parametrize(
    ("kind", "what"),
    [
        ("gather", "op %12 (Load(%0, %11)): index 77 out of bounds for 10 elements of "
         "argument 0 ('x', Global f32)"),
        ("scatter", "op %13 (Store(%2, %12, %11)): index 77 out of bounds for 10 elements of "
         "argument 2 ('out', GlobalMut f32)"),
        ("registers", "op %18 (Load(%11, %17)): index 77 out of bounds for 4 elements of %11 "
         "(Register f32[4])"),
    ],
)  # fmt: skip
def test_the_bounds_checked_mode_names_the_kernel_op_param_and_index(
    checked: HostDevice, kind: str, what: str
) -> None:
    kernel = indexed(scatter=kind == "scatter", registers=kind == "registers")
    assert kind == "registers" or not extents_known(kernel)  # a Define is no param
    program = checked.compile(kernel)
    x = buffer(checked, np.arange(10))
    out = buffer(checked, np.zeros(10))
    good, bad = checked.pool.allocate(80), checked.pool.allocate(80)
    checked.pool.write(good, np.array([3, 1, 2, 0, 3, 1, 2, 0, 3, 1], np.int64))
    checked.pool.write(bad, np.array([3, 1, 2, 0, 3, 1, 77, 0, 3, 1], np.int64))
    checked.launch(program, [x, good, out, 10])
    with pytest.raises(BackendError) as caught:
        checked.launch(program, [x, bad, out, 10])
    assert caught.value.status is ErrorStatus.KERNEL_LAUNCH
    assert str(caught.value) == f"KernelLaunch: kernel {kind!r}, {what}"
    checked.launch(program, [x, good, out, 10])  # the record was cleared


def extents_known(kernel: Kernel) -> bool:
    from zyx.ir.extent import extents

    return not extents(kernel).unchecked


def test_zyx_debug_turns_the_bounds_checked_mode_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from zyx import debug
    from zyx.host.plugin import HostSection, open_host

    assert not HostDevice(HostPool()).bounds_checked
    monkeypatch.setenv("ZYX_DEBUG", str(debug.BOUNDS | 32))
    (device,) = open_host(HostSection())
    assert isinstance(device, HostDevice) and device.bounds_checked
    program = device.compile(indexed())
    x, out, idx = (
        buffer(device, np.arange(4)),
        buffer(device, np.zeros(4)),
        device.pool.allocate(32),
    )
    device.pool.write(idx, np.array([0, 1, 2, 4], np.int64))
    with pytest.raises(BackendError, match="index 4 out of bounds for 4 elements"):
        device.launch(program, [x, idx, out, 4])
    monkeypatch.setenv("ZYX_DEBUG", "junk")
    assert not debug.bounds_checked()
